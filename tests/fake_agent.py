#!/usr/bin/env python3
"""A scriptable fake agent: a real executable that does what a JSON script says.

Usage: ``fake_agent.py SCRIPT.json``. The script is ``{"steps": [step, ...]}``;
iteration N (from ``$FORGE_ITERATION``) plays step N, or the last step once
the steps run out. ``{"when_env": {"VAR": [step, ...]}}`` beside ``steps``
plays that list instead while ``$VAR`` is set (a loop handed back by
``forge land --rework`` has ``FORGE_BRIEF``). A step may hold, in the order they are carried out:

- ``record_env``: a path; the FORGE_* environment is written there as JSON
- ``record_argv``: a path; the arguments after the script's are written there as JSON
- ``write``: {path: text} files to write; ``append``: {path: text} to append
- ``delete``: [paths] to delete
- ``shell``: a shell command to run (``rm -rf specs``), in the working directory
- ``print``: text for stdout; ``stderr``: text for stderr
- ``print_bytes``: that many bytes of "x" lines on stdout (volume tests)
- ``report``: an object written as JSON to ``$FORGE_REPORT``
- ``report_raw``: text written as-is to ``$FORGE_REPORT``
- ``spawn_stubborn``: a path; a grandchild that ignores SIGTERM and holds the
  output pipe is started, and its pid (then ours) written there
- ``ignore_term``: true to ignore SIGTERM ourselves
- ``sleep``: seconds to sleep
- ``exit``: the exit code (default 0)

Every invocation appends a line to ``$FAKE_AGENT_CALLS`` when it is set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def main() -> int:
    script = json.loads(Path(sys.argv[1]).read_text())
    steps: list[dict[str, Any]] = script["steps"]
    for variable, instead in script.get("when_env", {}).items():
        if os.environ.get(variable):
            steps = instead
            break
    iteration = int(os.environ.get("FORGE_ITERATION", "1"))
    step = steps[min(iteration, len(steps)) - 1]
    if calls := os.environ.get("FAKE_AGENT_CALLS"):
        with open(calls, "a") as handle:
            handle.write(f"{os.environ.get('FORGE_CHANGE')} {iteration}\n")
    if target := step.get("record_env"):
        env = {k: v for k, v in os.environ.items() if k.startswith("FORGE_")}
        Path(target).write_text(json.dumps(env))
    if target := step.get("record_argv"):
        Path(target).write_text(json.dumps(sys.argv[2:]))
    for path, text in step.get("write", {}).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    for path, text in step.get("append", {}).items():
        with open(path, "a") as handle:
            handle.write(text)
    for path in step.get("delete", []):
        Path(path).unlink(missing_ok=True)
    if command := step.get("shell"):
        subprocess.run(command, shell=True, check=False)
    if "print" in step:
        sys.stdout.write(step["print"])
    if "stderr" in step:
        sys.stderr.write(step["stderr"])
    if count := step.get("print_bytes"):
        line = b"x" * 1023 + b"\n"
        out = sys.stdout.buffer
        for _ in range(count // len(line)):
            out.write(line)
    sys.stdout.flush()
    if "report" in step:
        Path(os.environ["FORGE_REPORT"]).write_text(json.dumps(step["report"]))
    if "report_raw" in step:
        Path(os.environ["FORGE_REPORT"]).write_text(step["report_raw"])
    if target := step.get("spawn_stubborn"):
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import signal, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('grandchild up', flush=True)\n"
                "time.sleep(600)",
            ],
        )
        Path(target).write_text(f"{child.pid}\n{os.getpid()}\n")
    if step.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if seconds := step.get("sleep"):
        time.sleep(seconds)
    return int(step.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
