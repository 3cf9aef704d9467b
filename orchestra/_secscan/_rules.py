"""Secret-scan rules: the model, the TOML file they live in, and its validation.

A rules file holds ``[[rule]]`` tables and, optionally, ``stopwords`` and
``allow_paths`` that apply to every rule::

    stopwords = ["example", "changeme"]

    [[rule]]
    id = "github-pat"
    description = "GitHub personal access token"
    regex = '''\\b(?P<secret>ghp_[A-Za-z0-9]{36})\\b'''
    keywords = ["ghp_"]
    severity = "critical"

A rule's keys:

- ``id``, ``description``, ``regex``, ``keywords``, ``severity``: required.
  The regex runs only on text holding one of the keywords (compared without
  regard to case). A group named ``secret`` marks the secret inside the
  match; without one the whole match is the secret.
- ``entropy``: a floor, in bits per character, for the secret's Shannon
  entropy. A rule with a floor is a heuristic one, and the value it finds must
  also look like a literal (not a variable, a path, a URL or plain words).
- ``min_length``: the secret's shortest length (default 8).
- ``allow_paths``: gitignore-style globs of files the rule does not apply to.
- ``stopwords``: a secret containing one of them (any case) is not a finding.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import ConfigError
from .._policy import SEVERITIES as SEVERITIES
from .._policy import read_config_text
from .._shipped import shipped_dir, shipped_names
from ._engine import DEFAULT_ENGINE, KeywordFinder, compile_pattern

if TYPE_CHECKING:
    import pathspec

# One list for the policy ([secscan] fail_on) and the rules.
SHIPPED_RULES = "secscan"
# Bump when the matching logic changes what a ruleset finds: the version is part
# of the ruleset's digest, so cached results from an older scanner are not reused.
MATCHER_VERSION = "2"

_RULE_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
_SHIPPED_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
_REQUIRED = ("id", "description", "regex", "keywords", "severity")
_OPTIONAL = ("entropy", "min_length", "allow_paths", "stopwords")
_TOP_LEVEL = ("rule", "stopwords", "allow_paths")


def severity_at_least(severity: str, threshold: str) -> bool:
    """Whether ``severity`` is ``threshold`` or worse (``"critical"`` is the worst).

    Raises:
        ValueError: either is not one of ``low``, ``medium``, ``high``, ``critical``.
    """
    for value in (severity, threshold):
        if value not in SEVERITIES:
            raise ValueError(f"unknown severity {value!r} (expected one of {SEVERITIES})")
    return SEVERITIES.index(severity) >= SEVERITIES.index(threshold)


def _paths_spec(globs: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
    if not globs:
        return None
    # Imported here: pathspec probes its optional engines when imported, a cost
    # every verify's redactor would pay for rules that mostly have no paths.
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(globs)


@attrs.frozen
class Rule:
    """One kind of secret and how to recognise it."""

    id: str
    description: str
    regex: str
    keywords: tuple[str, ...]
    severity: str
    entropy: float | None = None
    min_length: int = 8
    allow_paths: tuple[str, ...] = ()
    stopwords: tuple[str, ...] = ()
    engine: str = attrs.field(default=DEFAULT_ENGINE, repr=False)
    # Derived, compiled once; not part of equality or repr.
    pattern: Any = attrs.field(init=False, eq=False, repr=False)
    secret_group: int = attrs.field(init=False, eq=False, repr=False)
    keywords_bytes: tuple[bytes, ...] = attrs.field(init=False, eq=False, repr=False)
    stopwords_lower: tuple[str, ...] = attrs.field(init=False, eq=False, repr=False)
    allowed: pathspec.GitIgnoreSpec | None = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        pattern, group = compile_pattern(self.regex, self.engine)
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "secret_group", group)
        lowered = tuple(word.lower().encode("utf-8") for word in self.keywords)
        object.__setattr__(self, "keywords_bytes", lowered)
        object.__setattr__(self, "stopwords_lower", tuple(w.lower() for w in self.stopwords))
        object.__setattr__(self, "allowed", _paths_spec(self.allow_paths))

    def applies_to(self, path: str | None) -> bool:
        """Whether the rule applies to a file (relative POSIX path); None is any text."""
        return path is None or self.allowed is None or not self.allowed.match_file(path)

    def as_dict(self) -> dict[str, Any]:
        """The rule as its TOML table would hold it."""
        data: dict[str, Any] = {
            "id": self.id,
            "description": self.description,
            "regex": self.regex,
            "keywords": list(self.keywords),
            "severity": self.severity,
            "min_length": self.min_length,
            "allow_paths": list(self.allow_paths),
            "stopwords": list(self.stopwords),
        }
        if self.entropy is not None:
            data["entropy"] = self.entropy
        return data


@attrs.frozen
class Ruleset:
    """The rules of one file, with the stopwords and allowed paths they share.

    ``digest`` identifies what the ruleset finds (rules, engine, matcher
    version): the scan cache reuses a file's result only under the same digest.
    """

    rules: tuple[Rule, ...]
    source: str
    stopwords: tuple[str, ...] = ()
    allow_paths: tuple[str, ...] = ()
    engine: str = DEFAULT_ENGINE
    digest: str = attrs.field(init=False)
    stopwords_lower: tuple[str, ...] = attrs.field(init=False, eq=False, repr=False)
    allowed: pathspec.GitIgnoreSpec | None = attrs.field(init=False, eq=False, repr=False)
    keyword_finder: KeywordFinder = attrs.field(init=False, eq=False, repr=False)
    # Finds a line end that may cut a secret (see ``line_cut_pattern``).
    line_cut: Any = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        canonical = json.dumps(
            {
                "matcher": MATCHER_VERSION,
                "engine": self.engine,
                "stopwords": list(self.stopwords),
                "allow_paths": list(self.allow_paths),
                "rules": [rule.as_dict() for rule in self.rules],
            },
            sort_keys=True,
        )
        object.__setattr__(self, "digest", hashlib.sha256(canonical.encode()).hexdigest()[:32])
        object.__setattr__(self, "stopwords_lower", tuple(w.lower() for w in self.stopwords))
        object.__setattr__(self, "allowed", _paths_spec(self.allow_paths))
        keywords = sorted({word for rule in self.rules for word in rule.keywords_bytes})
        object.__setattr__(self, "keyword_finder", KeywordFinder(tuple(keywords), self.engine))
        cut, _ = compile_pattern(line_cut_pattern(keywords), self.engine)
        object.__setattr__(self, "line_cut", cut)

    def rule(self, rule_id: str) -> Rule | None:
        """The rule with this id, if the ruleset has it."""
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        return None

    def applies_to(self, path: str | None) -> bool:
        """Whether any rule may apply to a file (it is not globally allowed)."""
        return path is None or self.allowed is None or not self.allowed.match_file(path)


def line_cut_pattern(keywords: list[bytes]) -> str:
    """A pattern for a line end that may cut a secret, over lowercased text.

    The line's last word holds a keyword (``…ghp_abc⏎``, ``password=⏎``) or
    ends with a keyword's first two characters or more (``…gh⏎``): the secret
    may go on in the next line.
    """
    whole = sorted({re.escape(word.decode("latin-1")) for word in keywords})
    starts = sorted(
        {
            re.escape(word[:length].decode("latin-1"))
            for word in keywords
            for length in range(2, len(word))
        }
    )
    alternatives = [f"(?:{'|'.join(whole)})\\S*\\r?\\n"] if whole else []
    if starts:
        alternatives.append(f"(?:{'|'.join(starts)})\\r?\\n")
    # A ruleset without keywords finds nothing; nor does this (never matches).
    return "|".join(alternatives) or "[^\\x00-\\xff]"


def load_rules(
    spec: str | Path = SHIPPED_RULES, *, root: Path | None = None, engine: str = DEFAULT_ENGINE
) -> Ruleset:
    """Load a rules file: shipped by name (``"secscan"``) or a path relative to ``root``.

    Args:
        spec: A shipped ruleset's name, or the path of a TOML rules file.
        root: The project root that relative paths and displayed names start from.
        engine: ``"re2"`` (the default when installed) or ``"re"``.

    Raises:
        ConfigError: the file is missing or unreadable, is not TOML, or a rule is
            invalid; every problem names the file, the rule and what was expected.
    """
    base = root if root is not None else Path.cwd()
    text_spec = str(spec)
    if isinstance(spec, str) and _SHIPPED_NAME.fullmatch(spec):
        shipped = shipped_dir("policies") / f"{spec}.toml"
        if shipped.is_file():
            return _load_file(shipped, f"{spec} (shipped)", engine)
        if not (base / spec).is_file():
            known = ", ".join(shipped_names("policies")) or "none"
            raise ConfigError(
                "cannot load the secret-scan rules",
                problems=[f"{spec}: no shipped rules of that name (shipped: {known})"],
                hint='to use your own rules, give their path: rules = "policies/my-secscan.toml"',
            )
    path = base / text_spec
    return _load_file(path, _display(path, base), engine)


def parse_rules(text: str, source: str = "<rules>", *, engine: str = DEFAULT_ENGINE) -> Ruleset:
    """Parse the TOML text of a rules file; ``source`` names it in errors.

    Raises:
        ConfigError: as :func:`load_rules`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            "the secret-scan rules are not valid TOML", problems=[f"{source}: {exc}"]
        ) from exc
    except RecursionError:
        raise ConfigError(
            "the secret-scan rules are nested too deeply", problems=[f"{source}: nesting too deep"]
        ) from None
    return build_ruleset(data, source, engine=engine)


def build_ruleset(data: Mapping[str, Any], source: str, *, engine: str = DEFAULT_ENGINE) -> Ruleset:
    """Validate parsed rules data and compile it, reporting every problem at once.

    Raises:
        ConfigError: with one line per problem.
    """
    problems: list[str] = []
    for key in data:
        if key not in _TOP_LEVEL:
            problems.append(f"{source}: {key}: unknown key (expected {', '.join(_TOP_LEVEL)})")
    stopwords = _strings(data, "stopwords", source, problems)
    allow_paths = _strings(data, "allow_paths", source, problems)
    tables = data.get("rule", [])
    if not isinstance(tables, list) or not tables:
        problems.append(f"{source}: rule: expected one or more [[rule]] tables")
        tables = []
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, table in enumerate(tables):
        rule_id = table.get("id") if isinstance(table, dict) else None
        if isinstance(rule_id, str):
            if rule_id in seen:
                problems.append(f"{source}: rule {rule_id!r}: id: used by more than one rule")
            seen.add(rule_id)
        rule = _build_rule(table, index, source, engine, problems)
        if rule is not None:
            rules.append(rule)
    if problems:
        raise ConfigError(
            "the secret-scan rules are invalid",
            problems=problems,
            hint="each [[rule]] needs " + ", ".join(_REQUIRED) + "; see policies/secscan.toml",
        )
    return Ruleset(
        tuple(rules), source, stopwords=stopwords, allow_paths=allow_paths, engine=engine
    )


def _build_rule(
    table: object, index: int, source: str, engine: str, problems: list[str]
) -> Rule | None:
    if not isinstance(table, dict):
        problems.append(f"{source}: rule[{index}]: expected a table")
        return None
    raw_id = table.get("id")
    label = f"rule {raw_id!r}" if isinstance(raw_id, str) else f"rule[{index}]"
    where = f"{source}: {label}"
    before = len(problems)
    for key in table:
        if key not in _REQUIRED and key not in _OPTIONAL:
            known = ", ".join((*_REQUIRED, *_OPTIONAL))
            problems.append(f"{where}: {key}: unknown key (expected one of {known})")
    for key in _REQUIRED:
        if key not in table:
            problems.append(f"{where}: {key}: missing (every rule needs it)")
    rule_id = _string(table, "id", where, problems)
    if rule_id is not None and not _RULE_ID.fullmatch(rule_id):
        problems.append(f"{where}: id: expected lowercase letters, digits and '-', got {rule_id!r}")
    description = _string(table, "description", where, problems)
    regex = _string(table, "regex", where, problems)
    severity = _string(table, "severity", where, problems)
    if severity is not None and severity not in SEVERITIES:
        problems.append(
            f"{where}: severity: expected one of {', '.join(SEVERITIES)}, got {severity!r}"
        )
    keywords = _strings(table, "keywords", where, problems)
    if "keywords" in table and not keywords and isinstance(table["keywords"], list):
        problems.append(f"{where}: keywords: expected at least one keyword")
    if any(not word for word in keywords):
        problems.append(f"{where}: keywords: a keyword must not be empty")
    entropy = table.get("entropy")
    if entropy is not None and (
        isinstance(entropy, bool) or not isinstance(entropy, int | float) or not 0 <= entropy <= 8
    ):
        problems.append(
            f"{where}: entropy: expected bits per character from 0 to 8, got {entropy!r}"
        )
    min_length = table.get("min_length", 8)
    if isinstance(min_length, bool) or not isinstance(min_length, int) or min_length < 1:
        problems.append(f"{where}: min_length: expected a positive integer, got {min_length!r}")
    allow_paths = _strings(table, "allow_paths", where, problems)
    stopwords = _strings(table, "stopwords", where, problems)
    if len(problems) > before or None in (rule_id, description, regex, severity):
        return None
    try:
        return Rule(
            id=str(rule_id),
            description=str(description),
            regex=str(regex),
            keywords=keywords,
            severity=str(severity),
            entropy=None if entropy is None else float(entropy),
            min_length=min_length,
            allow_paths=allow_paths,
            stopwords=stopwords,
            engine=engine,
        )
    except ValueError as exc:
        problems.append(f"{where}: regex: does not compile under {engine} ({exc})")
        return None


def _string(table: Mapping[str, Any], key: str, where: str, problems: list[str]) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {key}: expected a non-empty string, got {value!r}")
        return None
    return value


def _strings(
    table: Mapping[str, Any], key: str, where: str, problems: list[str]
) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.append(f"{where}: {key}: expected a list of strings, got {value!r}")
        return ()
    return tuple(value)


def _load_file(path: Path, source: str, engine: str) -> Ruleset:
    return _parsed(read_config_text(path, source, "the secret-scan rules"), source, engine)


@functools.lru_cache(maxsize=16)
def _parsed(text: str, source: str, engine: str) -> Ruleset:
    # A supervisor loads the same rules for every loop: parse and compile once.
    # Keyed by the text itself, so an edited file is parsed afresh.
    return parse_rules(text, source, engine=engine)


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
