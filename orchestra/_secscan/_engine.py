"""The regular-expression engine the secret scan compiles its rules with.

RE2 was chosen by measurement (``bench/secscan_engine.py``, 2,000 generated
files, 24.6 MB, every shipped rule): 43 MB/s against Python's ``re`` at 5.4 MB/s
as the scan runs (keyword pre-filter on), 21 against 2.9 MB/s with every rule
over every file. Its ``Set`` also finds which keywords occur in one pass. And
RE2 runs in linear time, so no rule and no file can hang the scan on
catastrophic backtracking. Rules are therefore written in the subset both
engines share (no lookarounds, no backreferences, repetition counts up to
1000). Python's ``re`` is used only when the ``re2`` module fails to import.

Patterns are compiled as bytes and run over file bytes: both engines then give
``\\s``, ``\\w`` and ``(?i)`` their ASCII meaning, so the two agree, and no file
has to be decoded before it is scanned.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

try:
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
except ImportError:  # pragma: no cover - re2 is a declared dependency
    re2 = None


ENGINES = ("re2", "re")
DEFAULT_ENGINE = "re2" if re2 is not None else "re"


def compile_pattern(regex: str, engine: str = DEFAULT_ENGINE) -> tuple[Any, int]:
    """Compile a rule's regex for scanning bytes; return it and its secret group.

    The secret group is the group named ``secret``, else the whole match (0).

    Raises:
        ValueError: the regex does not compile under ``engine``, with the
            engine's reason.
    """
    source = regex.encode("utf-8")
    if engine == "re2":
        if re2 is None:
            raise ValueError("the re2 engine is not installed")
        options = re2.Options()
        # Latin-1: every byte is one character, as in Python's bytes patterns,
        # so a file that is not valid UTF-8 is still scanned byte for byte.
        options.encoding = re2.Options.Encoding.LATIN1
        options.log_errors = False
        try:
            compiled = re2.compile(source, options)
        except re2.error as exc:
            raise ValueError(str(exc) or "not a valid RE2 expression") from exc
        groups: dict[Any, int] = dict(compiled.groupindex)
    elif engine == "re":
        try:
            compiled = re.compile(source)
        except (re.error, OverflowError, RecursionError) as exc:
            raise ValueError(str(exc)) from exc
        groups = dict(compiled.groupindex)
    else:
        raise ValueError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    secret_group = groups.get("secret", groups.get(b"secret", 0))
    return compiled, int(secret_group)


class KeywordFinder:
    """Which of a set of keywords occur in a text, in one pass where RE2 is available.

    The texts given to :meth:`present` must already be lowercased, like the keywords.
    """

    def __init__(self, keywords: tuple[bytes, ...], engine: str = DEFAULT_ENGINE) -> None:
        self.keywords = keywords
        self._set: Any = None
        if engine == "re2" and re2 is not None and keywords:
            options = re2.Options()
            options.encoding = re2.Options.Encoding.LATIN1
            options.log_errors = False
            keyword_set = re2.Set.SearchSet(options)
            for keyword in keywords:
                keyword_set.Add(re2.escape(keyword))
            # A pattern that always matches: RE2 reports a failed search (its
            # DFA out of memory) as no match at all, which must not read as
            # "no keywords here"; with the sentinel, an empty answer is a failure.
            self._sentinel = keyword_set.Add(b"")
            keyword_set.Compile()
            self._set = keyword_set

    def present(self, lowered: bytes) -> frozenset[bytes]:
        """The keywords that occur in ``lowered``."""
        if self._set is not None:
            indices = self._set.Match(lowered)
            if indices:
                return frozenset(
                    self.keywords[index] for index in indices if index != self._sentinel
                )
        return frozenset(keyword for keyword in self.keywords if keyword in lowered)


# RE2's Python wrapper makes a Match object (and a dozen calls) for every
# match; its compiled expression answers one search with the spans alone.
# Redaction runs over every byte an agent prints, and most of its searches
# find many short runs, so it asks the expression directly where it can.
_RE2_SPANS = re2 is not None and hasattr(re2, "_Anchor") and hasattr(re2, "_Regexp")
_NO_MATCH = (-1, -1)


def match_spans(compiled: Any, data: bytes, group: int = 0) -> Iterator[tuple[int, int]]:
    """The span of ``group`` in every match of ``compiled`` over ``data``, as ``finditer``.

    A group that took no part in a match gives ``(-1, -1)``.
    """
    regexp = getattr(compiled, "_regexp", None) if _RE2_SPANS else None
    if regexp is None:
        for match in compiled.finditer(data):
            yield match.span(group)
        return
    anchor = re2._Anchor.UNANCHORED
    position, end = 0, len(data)
    while True:
        spans = regexp.Match(anchor, data, position, end)
        if spans[0] == _NO_MATCH:
            return
        yield spans[group]
        if position == end:
            return
        # An empty match would find itself again: step past it.
        position = position + 1 if position == spans[0][1] else spans[0][1]
