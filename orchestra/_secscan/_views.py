"""Secrets in a text as a reader decodes it: joined lines, JSON and URL escapes, base64.

An agent's output is decoded after Forge reads it: a parser turns
``gh\\u0070_…`` into ``ghp_…``, a person pastes a base64 blob into a decoder, a
terminal shows a token cut by a newline as one. So a secret is looked for in
the text as it is and in each of its decoded *views*, and where a view finds
one, the bytes of the original text it came from are redacted.

Decoding costs, and redaction runs on every chunk of output, so each view is
made only when a cheap test says it could differ from the text (a newline, a
backslash, a ``%XX`` escape, a base64 run of 20 characters or more), and
searched only when it holds one of the rules' keywords.
"""

from __future__ import annotations

import base64
import binascii
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import Any

from ._engine import compile_pattern, match_spans
from ._match import find_secrets
from ._rules import Ruleset

# A word, no longer than any token: the halves of one cut by a line end.
_WORD_LIMIT = 1024
_WORD = re.compile(rb"\S{1,1024}")
# JSON string escapes; an escaped line end is a line end (then read joined).
_JSON_ESCAPE = re.compile(rb'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
_JSON_UNICODE = re.compile(rb"\\u[0-9a-fA-F]{4}")
_JSON_SIMPLE = {b'"': b'"', b"\\": b"\\", b"/": b"/", b"b": b"", b"f": b"", b"t": b"\t"}
_JSON_CHEAP = (
    (b"\\n", b"\n"),
    (b"\\r", b"\n"),
    (b'\\"', b'"'),
    (b"\\/", b"/"),
    (b"\\t", b"\t"),
    (b"\\b", b""),
    (b"\\f", b""),
)
_URL_ESCAPE = re.compile(rb"%[0-9a-fA-F]{2}")
_HEX_ESCAPE = re.compile(rb"\\x[0-9a-fA-F]{2}")
_NON_NUL = re.compile(rb"[^\0]+")
# Shorter runs decode to a few bytes, too few to hold a token and its keyword.
# RE2 where it is installed: Python's re tries a run at every byte of a long one.
_RUN = r"[A-Za-z0-9+/]{20,}={0,2}|[A-Za-z0-9_-]{20,}={0,2}"
_BASE64_RUN_LONG: Any = compile_pattern(_RUN)[0]
# On a line, Python's own is quicker: no call through RE2's wrapper.
_BASE64_RUN = re.compile(_RUN.encode())
_SHORT = 4096
# The cheap test for a run (Python's re is quick to search a line for it).
_BASE64_HINT = re.compile(rb"[A-Za-z0-9+/_-]{20}")
# A block wrapped at a fixed width (``base64`` wraps at 76): lines of base64 alone.
_BASE64_BLOCK: Any = compile_pattern(r"(?m)^(?:[A-Za-z0-9+/]{16,}\r?\n)+[A-Za-z0-9+/]*={0,2}$")[0]
_NEWLINES = re.compile(rb"\r?\n")
_PRINTABLE = bytes(range(32, 127)) + b"\t\n\r"


class View:
    """A decoded form of a text, and the way back from its bytes to the text's.

    ``pieces`` are ``(start in the view, start in the parent, end in the
    parent, literal)``: a literal piece maps byte for byte, any other maps as a
    whole (an escape, a base64 run).
    """

    def __init__(
        self,
        data: bytes,
        pieces: list[tuple[int, int, int, bool]] | Callable[[], list[tuple[int, int, int, bool]]],
        parent: View | None = None,
    ) -> None:
        self.data = data
        # A view made by a fast decoding maps its bytes back only when a
        # secret is found in it: most views hold none.
        self._pieces_of = pieces if callable(pieces) else None
        self._pieces = pieces if not callable(pieces) else []
        self._starts = [piece[0] for piece in self._pieces]
        self._parent = parent

    @classmethod
    def of(cls, data: bytes) -> View:
        """The text itself."""
        return cls(data, [(0, 0, len(data), True)])

    @property
    def pieces(self) -> list[tuple[int, int, int, bool]]:
        """How the view's bytes map to its parent's (see the class docstring)."""
        if self._pieces_of is not None:
            self._pieces = self._pieces_of()
            self._starts = [piece[0] for piece in self._pieces]
            self._pieces_of = None
        return self._pieces

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The bytes of the original text that ``data[start:end]`` came from."""
        first = self._locate(start, at_end=False)
        last = self._locate(end - 1, at_end=True)
        if self._parent is None:
            return first, last
        return self._parent.source_span(first, last)

    def _locate(self, position: int, *, at_end: bool) -> int:
        # The last piece starting at or before the position: a piece that
        # decodes to nothing (a joined line end) never holds a byte.
        pieces = self.pieces
        view_start, start, end, literal = pieces[bisect_right(self._starts, position) - 1]
        if literal:
            return start + position - view_start + (1 if at_end else 0)
        return end if at_end else start


def _rewritten(
    parent: View, pattern: re.Pattern[bytes], replace: Callable[[re.Match[bytes]], bytes]
) -> View:
    """``parent`` with every match of ``pattern`` replaced by what ``replace`` makes of it."""
    data = parent.data
    out = bytearray()
    pieces: list[tuple[int, int, int, bool]] = []
    position = 0
    for match in pattern.finditer(data):
        if match.start() > position:
            pieces.append((len(out), position, match.start(), True))
            out += data[position : match.start()]
        pieces.append((len(out), match.start(), match.end(), False))
        out += replace(match)
        position = match.end()
    if position < len(data) or not pieces:
        pieces.append((len(out), position, len(data), True))
        out += data[position:]
    return View(bytes(out), pieces, parent)


def _json_view(parent: View) -> View:
    """``parent`` with its JSON escapes undone, mapped back only when asked.

    The decoding is a few ``bytes.replace`` (and a regex for the rare ``\\u``
    escapes); it gives the bytes the exact, escape-by-escape rewrite gives,
    whose map back to the text is made only for a view a secret is found in.
    A NUL byte (the placeholder for an escaped backslash) or an escaped NUL
    takes the exact way.
    """
    data = parent.data
    if b"\0" in data or b"\\u0000" in data:
        return _rewritten(parent, _JSON_ESCAPE, _json_unescaped)
    fast = data.replace(b"\\\\", b"\0")
    # A \u escape first, a backslash it decodes to held as the placeholder:
    # it must not begin another escape; the others then cannot join into one.
    if b"\\u" in fast:
        fast = _JSON_UNICODE.sub(_json_unescaped_fast, fast)
    for escape, plain in _JSON_CHEAP:
        fast = fast.replace(escape, plain)
    fast = fast.replace(b"\0", b"\\")
    return View(fast, lambda: _json_pieces(data), parent)


# How many bytes each two-character escape decodes to.
_DECODED_LENGTH = {key: len(_JSON_SIMPLE.get(bytes([key]), b"\n")) for key in b'"\\/bfnrt'}


def _json_pieces(data: bytes) -> list[tuple[int, int, int, bool]]:
    """The pieces of ``data``'s JSON-unescaped view (as :func:`_rewritten` makes them)."""
    pieces: list[tuple[int, int, int, bool]] = []
    length = _DECODED_LENGTH
    view = position = 0
    for match in _JSON_ESCAPE.finditer(data):
        start, end = match.span()
        if start > position:
            pieces.append((view, position, start, True))
            view += start - position
        pieces.append((view, start, end, False))
        kind = data[start + 1]
        view += length[kind] if kind != 0x75 else len(_json_unescaped(match))
        position = end
    if position < len(data) or not pieces:
        pieces.append((view, position, len(data), True))
    return pieces


def _json_unescaped_fast(match: re.Match[bytes]) -> bytes:
    decoded = _json_unescaped(match)
    return b"\0" if decoded == b"\\" else decoded


def _json_unescaped(match: re.Match[bytes]) -> bytes:
    escape = match.group()
    kind = escape[1:2]
    if kind == b"u":
        return chr(int(escape[2:], 16)).encode("utf-8", "surrogatepass")
    if kind in (b"n", b"r"):
        return b"\n"
    return _JSON_SIMPLE[kind]


class _Pair(View):
    """Two words joined across a line end; only a secret across the join is new."""

    def __init__(
        self, data: bytes, pieces: list[tuple[int, int, int, bool]], parent: View, join: int
    ) -> None:
        super().__init__(data, pieces, parent)
        self.join = join


def _line_pairs(parent: View, lowered: bytes, ruleset: Ruleset) -> Iterator[View]:
    """The words either side of each line end that may cut a secret, joined."""
    data = parent.data
    for _, cut_end in match_spans(ruleset.line_cut, lowered):
        newline = cut_end - 1
        line_end = newline - 1 if newline and data[newline - 1] == 0x0D else newline
        head = _WORD.match(data, cut_end)
        if head is None:
            continue
        tail_start = _word_start(data, line_end)
        tail = data[tail_start:line_end]
        pieces = [
            (0, tail_start, line_end, True),
            (len(tail), head.start(), head.end(), True),
        ]
        yield _Pair(tail + head.group(), pieces, parent, len(tail))


def _word_start(data: bytes, end: int) -> int:
    start = end
    while start > 0 and end - start < _WORD_LIMIT and data[start - 1] not in b" \t\r\n\f\v":
        start -= 1
    return start


def _readable(parent: View, ruleset: Ruleset, lowered: bytes | None = None) -> list[View]:
    """``parent`` itself when it holds a keyword, and its words joined across line ends."""
    if lowered is None:
        lowered = parent.data.lower()
    views: list[View] = [parent] if ruleset.keyword_finder.present(lowered) else []
    # A line end with something after it: the last one of a chunk is held for
    # the next by the stream when it may cut a secret.
    if b"\n" in lowered.rstrip(b"\r\n"):
        views.extend(_line_pairs(parent, lowered, ruleset))
    return views


def _decoded(run: bytes, *, padded: bool) -> bytes | None:
    """A base64 run's text, or None when it is not base64 of text.

    A run found in a line may have lost its padding; a wrapped block (which
    tools always pad) must be whole, or the next line's word was taken in.
    """
    if padded:
        if len(run) % 4:
            return None
    else:
        run = run.rstrip(b"=")
        if len(run) % 4 == 1:
            return None
        run += b"=" * (-len(run) % 4)
    urlsafe = b"-" in run or b"_" in run
    try:
        decoded = base64.b64decode(run, altchars=b"-_" if urlsafe else None, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(decoded.translate(None, _PRINTABLE)) * 10 > len(decoded):
        return None  # binary, or an identifier that merely looks like base64
    return decoded


def _base64_views(parent: View) -> Iterator[View]:
    """The base64 runs and wrapped blocks of ``parent`` that decode to text, each a view.

    A run on a line of a block that decodes is not decoded again alone: the
    block's text holds the line's, and the whole block is redacted.
    """
    data = parent.data
    blocks: list[tuple[int, int]] = []
    if b"\n" in data:
        for start, end in match_spans(_BASE64_BLOCK, data):
            block = data[start:end]
            # The last line may be the next line's word rather than the block's end.
            for length in (len(block), block.rstrip(b"\r\n").rfind(b"\n")):
                decoded = _decoded(_NEWLINES.sub(b"", block[:length]), padded=True)
                if decoded is not None:
                    blocks.append((start, start + length))
                    yield View(decoded, [(0, start, start + length, False)], parent)
                    break
    runs = _BASE64_RUN if len(data) <= _SHORT else _BASE64_RUN_LONG
    block_starts = [start for start, _ in blocks]
    for start, end in match_spans(runs, data):
        inside = bisect_right(block_starts, start) - 1
        if inside >= 0 and end <= blocks[inside][1]:
            continue
        run = data[start:end]
        if run.islower() or run.isupper() or run.isdigit():
            continue  # an identifier or a hash: base64 of text mixes cases
        decoded = _decoded(run, padded=False)
        if decoded is not None:
            yield View(decoded, [(0, start, end, False)], parent)


def _unquoted(match: re.Match[bytes]) -> bytes:
    return bytes([int(match.group()[1:], 16)])


def _views(data: bytes, ruleset: Ruleset) -> list[View]:
    """The views of ``data`` that hold a keyword, each made only when it could differ."""
    present = ruleset.keyword_finder.present
    text = View.of(data)
    escaped = b"\\" in data
    quoted = b"%" in data
    nul = b"\0" in data
    if not (escaped or quoted or nul or _BASE64_HINT.search(data)):
        return _readable(text, ruleset, data.lower())  # nothing encoded, nothing more to read
    # The texts as read: the text itself, and with its JSON escapes undone.
    # Lines that are all JSON objects (stream-json events) are read only
    # unescaped: their raw form is no text a reader sees, and searching it too
    # would double the cost of an agent's commonest output.
    readings = [text]
    if escaped:
        unescaped = _json_view(text)
        if unescaped.data != data:
            readings = [unescaped] if _json_lines(data) else [text, unescaped]
    views: list[View] = []
    for reading in readings:
        views.extend(_readable(reading, ruleset))
    if quoted:
        for reading in readings:
            if b"%" in reading.data and _URL_ESCAPE.search(reading.data):
                views.extend(_readable(_rewritten(reading, _URL_ESCAPE, _unquoted), ruleset))
    # Bytes written as \x escapes (a program's repr of bytes, printf), and
    # UTF-16 text (a cat of a UTF-16 file, or such bytes escaped): a NUL byte
    # beside every ASCII one.
    wide: list[View] = []
    if escaped:
        wide = [
            _rewritten(view, _HEX_ESCAPE, _hex_unescaped)
            for view in readings
            if b"\\x" in view.data and _HEX_ESCAPE.search(view.data)
        ]
        for view in wide:
            views.extend(_readable(view, ruleset))
    for view in (*readings, *wide):
        if b"\0" in view.data:
            views.extend(_readable(_without_nuls(view), ruleset))
    for view in readings:
        for decoded in _base64_views(view):
            if present(decoded.data.lower()):
                views.append(decoded)
    return views


def _json_lines(data: bytes) -> bool:
    """Whether every line of ``data`` is one JSON object (``{`` to ``}``)."""
    lines = data.rstrip(b"\r\n").replace(b"\r\n", b"\n")
    return (
        lines.startswith(b"{")
        and lines.endswith(b"}")
        and lines.count(b"}\n{") == lines.count(b"\n")
    )


def _hex_unescaped(match: re.Match[bytes]) -> bytes:
    return bytes([int(match.group()[2:], 16)])


def _without_nuls(parent: View) -> View:
    """``parent`` without its NUL bytes: UTF-16 text read as the ASCII it holds."""
    data = parent.data

    def pieces() -> list[tuple[int, int, int, bool]]:
        mapped: list[tuple[int, int, int, bool]] = []
        view = 0
        for run in _NON_NUL.finditer(data):
            mapped.append((view, run.start(), run.end(), True))
            view += run.end() - run.start()
        return mapped or [(0, 0, len(data), True)]

    return View(data.replace(b"\0", b""), pieces, parent)


def _plain_and_clean(data: bytes, ruleset: Ruleset) -> bool:
    """The fast path of most lines: one line, no keyword, nothing that may be encoded."""
    return not (
        b"\\" in data
        or b"%" in data
        or b"\0" in data
        or b"\n" in data.rstrip(b"\r\n")
        or ruleset.keyword_finder.present(data.lower())
        or _BASE64_HINT.search(data)
    )


def secret_spans(data: bytes, ruleset: Ruleset) -> list[tuple[int, int, str]]:
    """Where ``data`` holds a secret, read as is or decoded: ``(start, end, rule id)``.

    Spans are byte offsets into ``data``, in order, overlapping ones merged (the
    first one's rule names the merged span).
    """
    if _plain_and_clean(data, ruleset):
        return []
    found: list[tuple[int, int, str]] = []
    views = _views(data, ruleset)
    pairs = [view for view in views if isinstance(view, _Pair)]
    for view in views:
        if not isinstance(view, _Pair):
            found.extend(_spans(view, data, ruleset))
    # A secret whole on its line, found again with the next line's first word
    # stuck to it, is the same secret: the next line is not part of it.
    ends = {(rule_id, end) for _, end, rule_id in found}
    for pair in pairs:
        for hit in find_secrets(pair.data, ruleset):
            if not hit.start < pair.join < hit.end:
                continue  # within one line: the line's own view finds it
            line_end = pair.source_span(hit.start, pair.join)[1]
            if (hit.rule_id, line_end) in ends:
                continue
            found.extend(_checked(data, *pair.source_span(hit.start, hit.end), hit.rule_id))
    found.sort()
    merged: list[tuple[int, int, str]] = []
    for start, end, rule_id in found:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2])
        else:
            merged.append((start, end, rule_id))
    return merged


def _spans(view: View, data: bytes, ruleset: Ruleset) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    for hit in find_secrets(view.data, ruleset):
        spans.extend(_checked(data, *view.source_span(hit.start, hit.end), hit.rule_id))
    return spans


def _checked(data: bytes, start: int, end: int, rule_id: str) -> list[tuple[int, int, str]]:
    start, end = _whole_escapes(data, start, end)
    return [(start, end, rule_id)] if start < end else []


def _whole_escapes(data: bytes, start: int, end: int) -> tuple[int, int]:
    """The span moved so that it neither begins after nor ends on an escaping backslash.

    A heuristic rule's value may run up to the backslash of a JSON ``\\"``;
    redacting it would leave the quote escaped no longer, and the line no
    longer JSON. One beginning right after a backslash would leave it
    escaping the bracket of ``[redacted``.
    """
    if _escaping(data, end - 1, end):
        end -= 1
    if start > 0 and _escaping(data, start - 1, start):
        start -= 1
    return start, end


def _escaping(data: bytes, index: int, limit: int) -> bool:
    """Whether ``data[index]`` is a backslash that escapes the byte after it."""
    if index < 0 or index >= limit or data[index] != 0x5C:
        return False
    run = 0
    while index - run >= 0 and data[index - run] == 0x5C:
        run += 1
    return run % 2 == 1


def redact(text: str, ruleset: Ruleset) -> str:
    """``text`` with every secret replaced by ``[redacted:<rule-id>]``.

    Meant for every line of an agent's output and everything written to the
    timeline. A secret is found as the text holds it and as a reader would
    decode it (see the module's docstring); a text in which no view holds a
    rule's keyword returns untouched.
    """
    data = text.encode("utf-8", "surrogatepass")
    spans = secret_spans(data, ruleset)
    if not spans:
        return text
    parts: list[bytes] = []
    position = 0
    for start, end, rule_id in spans:
        parts.append(data[position:start])
        parts.append(f"[redacted:{rule_id}]".encode())
        position = end
    parts.append(data[position:])
    joined = b"".join(parts)
    try:
        return joined.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a secret's edge fell inside a multi-byte character
        return joined.decode("utf-8", "replace")
