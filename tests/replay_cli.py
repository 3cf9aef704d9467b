#!/usr/bin/env python3
"""A fake agent CLI that replays recorded output: ``claude``, ``codex`` or ``gemini`` on PATH.

Usage: installed under the real CLI's name (a shim runs ``replay_cli.py``).
``$REPLAY_SCRIPT`` is a JSON list of calls, ``{"stdout": path, "stderr":
path, "exit": code}``; the Nth invocation plays the Nth call (the last one
again once they run out), counted in ``$REPLAY_SCRIPT.calls``, which also
records each invocation's argv as one JSON line. The recording's bytes go to
stdout and stderr unchanged and the process exits with the recorded code.

For Claude Code recordings a ``Write`` tool use is carried out, relative to
the working directory, so an edit-and-done transcript edits the tree as the
real agent did.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    script = Path(os.environ["REPLAY_SCRIPT"])
    calls = json.loads(script.read_text())
    log = script.with_suffix(".calls")
    done = len(log.read_text().splitlines()) if log.exists() else 0
    with log.open("a") as handle:
        handle.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}) + "\n")
    call = calls[min(done, len(calls) - 1)]
    stdout = Path(call["stdout"]).read_bytes()
    if call.get("apply_writes"):
        _apply_writes(stdout)
    sys.stdout.buffer.write(stdout)
    sys.stdout.flush()
    if call.get("stderr"):
        sys.stderr.buffer.write(Path(call["stderr"]).read_bytes())
        sys.stderr.flush()
    return int(call.get("exit", 0))


def _apply_writes(stdout: bytes) -> None:
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        message = event.get("message") if isinstance(event, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use" and block.get("name") == "Write":
                target = Path(block["input"]["file_path"])
                if not target.is_absolute():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(block["input"]["content"])


if __name__ == "__main__":
    sys.exit(main())
