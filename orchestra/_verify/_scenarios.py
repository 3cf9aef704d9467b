"""Spec scenario coverage: every scenario in the specs must be named by a test.

A scenario is a Markdown heading ``Scenario: <title>`` (any level) or a Gherkin
``Scenario:`` line in a ``.feature`` file. Its id is the slug of its title
(``Checkout with a declined card`` -> ``checkout-with-a-declined-card``). A
test covers it by containing ``scenario: <id>`` anywhere: a comment, a
docstring, a marker.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import attrs

_MARKDOWN_SUFFIXES = {".md", ".markdown"}
_GHERKIN_SUFFIXES = {".feature"}
_MARKDOWN_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+scenario:[ \t]*(?P<title>.*?)[ \t#]*$", re.I)
_FENCE = re.compile(r"^ {0,3}(?P<run>`{3,}|~{3,})(?P<info>.*)$")
_GHERKIN_SCENARIO = re.compile(
    r"^\s*scenario(?:[ \t]+(?:outline|template))?:[ \t]*(?P<title>.*?)\s*$", re.I
)
_COVERS = re.compile(r"scenario:[ \t]*(?P<id>[^\W_]+(?:-[^\W_]+)*)(?![\w-])", re.I)
_SKIPPED_DIRS = {".git", "__pycache__", "node_modules", ".venv", ".forge", ".mypy_cache"}
_MAX_FILE_BYTES = 4 * 1024 * 1024
_GLOB_CHARS = set("*?[")


@attrs.frozen
class Scenario:
    """One scenario of a spec, and where it is written."""

    id: str
    title: str
    path: str
    line: int


@attrs.frozen
class ScenarioCoverage:
    """Which scenarios of the specs the tests name.

    Attributes:
        scenarios: Every distinct scenario found, in file order.
        covered: The ids some test names.
        spec_files: How many spec files were read.
        skipped_specs: Spec files that could not be read, and why (they fail coverage).
        unmatched_patterns: Spec paths that matched no spec file (perhaps a typo).
    """

    scenarios: tuple[Scenario, ...]
    covered: frozenset[str]
    spec_files: int
    skipped_specs: tuple[tuple[str, str], ...] = ()
    unmatched_patterns: tuple[str, ...] = ()

    @property
    def counts(self) -> bool:
        """Coverage is judged when there is something to cover, or a spec that could not be read."""
        return bool(self.scenarios) or bool(self.skipped_specs)

    @property
    def uncovered(self) -> tuple[Scenario, ...]:
        return tuple(s for s in self.scenarios if s.id not in self.covered)

    @property
    def covered_count(self) -> int:
        return len(self.scenarios) - len(self.uncovered)

    @property
    def passed(self) -> bool:
        return not self.uncovered and not self.skipped_specs


def slugify(title: str) -> str:
    """The id of a scenario title: its lower-case words joined by hyphens.

    Accents are dropped (``Café`` -> ``cafe``); letters of other scripts are kept.
    """
    decomposed = unicodedata.normalize("NFKD", title.casefold())
    bare = "".join(char for char in decomposed if not unicodedata.combining(char))
    return re.sub(r"[\W_]+", "-", bare).strip("-")


def scenarios_in(text: str, *, path: str, gherkin: bool) -> Iterator[Scenario]:
    """The scenarios written in one spec file's text."""
    fence: str | None = None  # the run of backticks or tildes that opened a code block
    for number, line in enumerate(text.splitlines(), start=1):
        if gherkin:
            match = _GHERKIN_SCENARIO.match(line)
        else:
            if fence_match := _FENCE.match(line):
                run = fence_match["run"]
                if fence is None:
                    fence = run
                elif (
                    run[0] == fence[0]
                    and len(run) >= len(fence)
                    and not fence_match["info"].strip()
                ):
                    fence = None  # CommonMark: same character, at least as long, no info string
                continue
            match = None if fence is not None else _MARKDOWN_HEADING.match(line)
        if match and (slug := slugify(match["title"])):
            yield Scenario(id=slug, title=match["title"].strip(), path=path, line=number)


def covered_ids(text: str) -> set[str]:
    """The scenario ids a test file names with ``scenario: <id>``."""
    return {match["id"].casefold() for match in _COVERS.finditer(text)}


def measure_coverage(root: Path, specs: Sequence[str], tests: Sequence[str]) -> ScenarioCoverage:
    """Read the spec and test files under ``root`` and judge coverage."""
    scenarios: dict[str, Scenario] = {}
    spec_files = 0
    skipped: list[tuple[str, str]] = []
    unmatched: list[str] = []
    seen: set[Path] = set()
    for pattern in specs:
        matched = False
        for path in files_under(root, [pattern], seen=seen):
            suffix = path.suffix.lower()
            if suffix not in _MARKDOWN_SUFFIXES | _GHERKIN_SUFFIXES:
                continue
            matched = True
            relative = path.relative_to(root).as_posix()
            text, problem = _read_text(path)
            if text is None:
                # A spec that cannot be read cannot be covered: say so, never skip it quietly.
                skipped.append((relative, problem or "unreadable"))
                continue
            spec_files += 1
            for scenario in scenarios_in(text, path=relative, gherkin=suffix in _GHERKIN_SUFFIXES):
                scenarios.setdefault(scenario.id, scenario)
        if not matched:
            unmatched.append(pattern)
    covered: set[str] = set()
    if scenarios:
        for path in files_under(root, tests):
            text, _ = _read_text(path)
            if text is not None:
                covered |= covered_ids(text)
    return ScenarioCoverage(
        scenarios=tuple(scenarios.values()),
        covered=frozenset(covered & scenarios.keys()),
        spec_files=spec_files,
        skipped_specs=tuple(skipped),
        unmatched_patterns=tuple(unmatched),
    )


def files_under(
    root: Path, patterns: Iterable[str], *, seen: set[Path] | None = None
) -> Iterator[Path]:
    """Files named by folder, file or glob patterns relative to ``root``, each once.

    Nothing outside ``root`` is returned, whatever a pattern or a symlink says,
    and nothing inside tool folders such as ``.git/`` or ``node_modules/``.
    ``seen`` carries the files already returned across calls.
    """
    resolved_root = root.resolve()
    seen = set() if seen is None else seen
    for pattern in patterns:
        if any(char in _GLOB_CHARS for char in pattern):
            candidates: Iterable[Path] = root.glob(pattern)
        else:
            candidates = [root / pattern]
        for candidate in sorted(candidates):
            for path in _walk(candidate):
                real = path.resolve()
                if real in seen or not real.is_relative_to(resolved_root):
                    continue
                if _SKIPPED_DIRS.intersection(path.relative_to(root).parts[:-1]):
                    continue
                seen.add(real)
                yield path


def _walk(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif path.is_dir():
        for child in sorted(path.iterdir()):
            if child.name in _SKIPPED_DIRS:
                continue
            if child.is_dir() and not child.is_symlink():
                yield from _walk(child)
            elif child.is_file():
                yield child


def _read_text(path: Path) -> tuple[str | None, str | None]:
    """The file's text, or None and why it was not read."""
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            return None, f"larger than {_MAX_FILE_BYTES // (1024 * 1024)} MiB"
        data = path.read_bytes()
    except OSError as exc:
        return None, exc.strerror or "unreadable"
    if b"\0" in data[:8192]:
        return None, "binary content"
    return data.decode("utf-8", errors="replace"), None
