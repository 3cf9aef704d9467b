"""The secret scan: rules, an incremental tree scan, waivers, inline markers, redaction.

Typical use::

    ruleset = load_rules("secscan", root=root)          # or a path to your own rules
    result = scan_tree(root, ruleset, cache_path=root / ".forge/cache/secscan.sqlite3")
    outcome = apply_waivers(result.findings, load_waivers(root / WAIVERS_FILE))
    blocking = [f for f in outcome.kept if f.at_least("high")]

    line = redact(line, ruleset)                         # every streamed output line
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._cache import RACY_MARGIN_NS as RACY_MARGIN_NS
    from ._engine import DEFAULT_ENGINE as DEFAULT_ENGINE
    from ._filescan import ALLOW_MARKERS as ALLOW_MARKERS
    from ._filescan import FileScan as FileScan
    from ._filescan import scan_bytes as scan_bytes
    from ._findings import ALLOW_MARKER_RULE as ALLOW_MARKER_RULE
    from ._findings import Finding as Finding
    from ._findings import ScanResult as ScanResult
    from ._history import HistoryFinding as HistoryFinding
    from ._history import HistoryScan as HistoryScan
    from ._history import scan_history as scan_history
    from ._match import find_secrets as find_secrets
    from ._match import is_placeholder as is_placeholder
    from ._match import shannon_entropy as shannon_entropy
    from ._project import ProjectScanner as ProjectScanner
    from ._project import project_scanner as project_scanner
    from ._redactor import output_redactor as output_redactor
    from ._rules import SEVERITIES as SEVERITIES
    from ._rules import SHIPPED_RULES as SHIPPED_RULES
    from ._rules import Rule as Rule
    from ._rules import Ruleset as Ruleset
    from ._rules import load_rules as load_rules
    from ._rules import parse_rules as parse_rules
    from ._rules import severity_at_least as severity_at_least
    from ._scan import DEFAULT_MAX_BYTES as DEFAULT_MAX_BYTES
    from ._scan import scan_tree as scan_tree
    from ._views import redact as redact
    from ._waivers import WAIVERS_FILE as WAIVERS_FILE
    from ._waivers import Waiver as Waiver
    from ._waivers import WaiverOutcome as WaiverOutcome
    from ._waivers import add_waiver as add_waiver
    from ._waivers import apply_waivers as apply_waivers
    from ._waivers import load_waivers as load_waivers
    from ._walk import list_files as list_files

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._cache": ("RACY_MARGIN_NS",),
            "._engine": ("DEFAULT_ENGINE",),
            "._filescan": (
                "ALLOW_MARKERS",
                "FileScan",
                "scan_bytes",
            ),
            "._findings": (
                "ALLOW_MARKER_RULE",
                "Finding",
                "ScanResult",
            ),
            "._history": (
                "HistoryFinding",
                "HistoryScan",
                "scan_history",
            ),
            "._match": (
                "find_secrets",
                "is_placeholder",
                "shannon_entropy",
            ),
            "._project": (
                "ProjectScanner",
                "project_scanner",
            ),
            "._redactor": ("output_redactor",),
            "._rules": (
                "Rule",
                "Ruleset",
                "SEVERITIES",
                "SHIPPED_RULES",
                "load_rules",
                "parse_rules",
                "severity_at_least",
            ),
            "._scan": (
                "DEFAULT_MAX_BYTES",
                "scan_tree",
            ),
            "._waivers": (
                "WAIVERS_FILE",
                "Waiver",
                "WaiverOutcome",
                "add_waiver",
                "apply_waivers",
                "load_waivers",
            ),
            "._views": ("redact",),
            "._walk": ("list_files",),
        },
    )
