"""Redaction of an agent's output: ms per MB for plain text, Claude stream-json and base64.

Every byte an executor prints goes through :class:`StreamRedactor` before the
log, the terminal or the parser sees it, in the chunks the pump reads (64 KiB).
Three kinds of output are generated, each with the words the rules key on
(token, password, secret, URLs) at a realistic density and a few planted
secrets: source-like plain text; Claude's stream-json, where the same text
arrives JSON-escaped inside assistant messages, tool inputs and tool results
(one long line each); and base64-heavy output (``base64`` of files, wrapped at
76, and long one-line blobs). Each is redacted three ways, all in this run:

- ``stream`` — the stream alone, redacting nothing (the cost of cutting lines);
- ``as is`` — the rules over the text as it is (:func:`find_secrets`), no view;
- ``decoded`` — the redaction Forge runs: the text and its decoded views.

The ratios printed are decoded/as-is per kind, and each kind's decoded cost to
plain text's, decoded and as is. The goal: stream-json, decoded, within 3x of
plain text through the rules alone (what redaction cost before it decoded).

    .venv/bin/python bench/redaction.py [--megabytes 4] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import textwrap
import time
from collections.abc import Callable

from _corpus import ident, source_line, token
from _quick import parse_args, verdict

from orchestra._redact import StreamRedactor
from orchestra._secscan import find_secrets, load_rules
from orchestra._secscan._redactor import SecretRedactor
from orchestra._secscan._rules import Ruleset

CHUNK = 64 * 1024  # what the pump reads at a time
# A planted secret in one line of this many: a few per MB (an agent rarely prints one).
PLANTED = 1 / 5000
GOAL = 3.0  # stream-json's decoded cost within this many times plain text's as is


def _line(rng: random.Random) -> str:
    """A line of source or of a command's output; a planted secret now and then."""
    if rng.random() < PLANTED:
        return f"GITHUB_TOKEN=ghp_{token(rng, 36)}"
    return source_line(rng)


def _lines(rng: random.Random, size: int) -> list[str]:
    lines: list[str] = []
    total = 0
    while total < size:
        line = _line(rng)
        lines.append(line)
        total += len(line) + 1
    return lines


def plain(rng: random.Random, size: int) -> bytes:
    """Source-like text, one line at a time."""
    return ("\n".join(_lines(rng, size)) + "\n").encode()


def stream_json(rng: random.Random, size: int) -> bytes:
    """Claude's stream-json: the same kind of text, JSON-escaped, one event a line."""
    events: list[str] = []
    total = 0
    turn = 0
    while total < size:
        turn += 1
        body = "\n".join(_lines(rng, rng.randint(200, 6000)))
        if rng.random() < 0.1:  # a non-ASCII character now and then: a \\u escape
            body += " — done ✓"
        kind = rng.random()
        if kind < 0.3:
            event = {
                "type": "assistant",
                "message": {"id": f"m{turn}", "content": [{"type": "text", "text": body}]},
            }
        elif kind < 0.55:
            event = {
                "type": "assistant",
                "message": {
                    "id": f"m{turn}",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{turn}",
                            "name": "Write",
                            "input": {"file_path": f"/repo/{ident(rng)}.py", "content": body},
                        }
                    ],
                },
            }
        else:
            event = {
                "type": "user",
                "message": {
                    "content": [{"type": "tool_result", "tool_use_id": f"t{turn}", "content": body}]
                },
            }
        line = json.dumps(event)
        events.append(line)
        total += len(line) + 1
    return ("\n".join(events) + "\n").encode()


def base64_heavy(rng: random.Random, size: int) -> bytes:
    """``base64`` of files wrapped at 76, one-line blobs, and a few lines of prose."""
    parts: list[str] = []
    total = 0
    while total < size:
        roll = rng.random()
        if roll < 0.4:
            encoded = base64.b64encode(plain(rng, rng.randint(500, 4000))).decode()
            part = "\n".join(textwrap.wrap(encoded, 76))
        elif roll < 0.7:
            blob = base64.b64encode(rng.randbytes(rng.randint(100, 3000))).decode()
            part = f'"image": "data:image/png;base64,{blob}"'
        else:
            part = "\n".join(_lines(rng, 400))
        parts.append(part)
        total += len(part) + 1
    return ("\n".join(parts) + "\n").encode()


def _as_is(ruleset: Ruleset) -> Callable[[str], str]:
    """Redaction by the rules over the text as it is: no view decoded."""

    def redact(text: str) -> str:
        data = text.encode("utf-8", "surrogatepass")
        hits = find_secrets(data, ruleset)
        if not hits:
            return text
        out = bytearray()
        position = 0
        for hit in sorted(hits, key=lambda hit: hit.start):
            if hit.start < position:
                continue
            out += data[position : hit.start] + f"[redacted:{hit.rule_id}]".encode()
            position = hit.end
        out += data[position:]
        return out.decode("utf-8", "replace")

    return redact


def ms_per_mb(data: bytes, redact: Callable[[str], str]) -> float:
    """One run of ``data`` through a stream redactor, in ms per MB."""
    stream = StreamRedactor(redact)
    started = time.perf_counter()
    for offset in range(0, len(data), CHUNK):
        stream.feed(data[offset : offset + CHUNK])
    stream.flush()
    return (time.perf_counter() - started) * 1000 / (len(data) / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parse_args(parser, megabytes=0.3, repeat=1)
    ruleset = load_rules("secscan")
    size = int(args.megabytes * 1e6)
    kinds = {
        "plain": plain(random.Random(1), size),
        "stream-json": stream_json(random.Random(2), size),
        "base64": base64_heavy(random.Random(3), size),
    }
    ways: dict[str, Callable[[str], str]] = {
        "stream": lambda text: text,
        "as is": _as_is(ruleset),
        "decoded": SecretRedactor(ruleset),
    }
    chunk = CHUNK // 1024
    print(f"{args.megabytes:g} MB of each kind, in {chunk} KiB chunks, best of {args.repeat}")
    # Round after round of every kind every way, the best of each kept: a
    # machine busy for a moment slows one run of each, not one kind's runs.
    figures = {kind: dict.fromkeys(ways, float("inf")) for kind in kinds}
    for _ in range(args.repeat):
        for kind, data in kinds.items():
            for way, redact in ways.items():
                figures[kind][way] = min(figures[kind][way], ms_per_mb(data, redact))
    for kind in kinds:
        row = "  ".join(f"{way} {figures[kind][way]:7.1f}" for way in ways)
        ratio = figures[kind]["decoded"] / figures[kind]["as is"]
        print(f"{kind:12} ms/MB: {row}   decoded/as-is {ratio:.2f}x")
    for against in ("decoded", "as is"):
        plain_cost = figures["plain"][against]
        for kind in ("stream-json", "base64"):
            ratio = figures[kind]["decoded"] / plain_cost
            print(f"{kind} decoded / plain {against} {ratio:.2f}x")
    met = figures["stream-json"]["decoded"] <= GOAL * figures["plain"]["as is"]
    print(f"goal: stream-json decoded within {GOAL:.0f}x of plain text as is: {verdict(args, met)}")


if __name__ == "__main__":
    main()
