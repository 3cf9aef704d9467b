"""Delivering one notification: a command with the JSON on its stdin, or a POST to a URL.

Neither may hold up or fail the batch that sends it: each is bounded by a
timeout, and whatever goes wrong (the command exits non-zero, hangs, cannot
start; the server refuses or does not answer) becomes a :class:`Delivery`
that says so, for the caller to log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

# After the timeout: SIGTERM to the command's process group, then this long before SIGKILL.
_GRACE = 2.0
_SAID = 300  # characters of a failing command's output kept for the log


@attrs.frozen
class Delivery:
    """How one notification went.

    Attributes:
        event: ``escalate``, ``alert`` or ``finish``.
        target: ``command`` or ``webhook``.
        ok: Whether it was delivered (exit 0, or a 2xx answer).
        detail: What happened, in words.
    """

    event: str
    target: str
    ok: bool
    detail: str

    def line(self) -> str:
        state = "sent" if self.ok else "FAILED"
        return f"notify: {self.event} {self.target} {state} — {self.detail}"


def payload_bytes(payload: Mapping[str, Any]) -> bytes:
    return (json.dumps(payload, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def run_command(
    command: str,
    event: str,
    payload: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    timeout: float,
    cwd: Path,
) -> Delivery:
    """Run ``command`` with ``sh -c`` in its own process group, the payload on its stdin."""
    with tempfile.TemporaryFile() as said:
        try:
            process = subprocess.Popen(
                ["/bin/sh", "-c", command],
                cwd=cwd,
                env={**os.environ, **env},
                stdin=subprocess.PIPE,
                stdout=said,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return Delivery(event, "command", False, f"cannot start {command!r}: {exc}")
        try:
            process.communicate(payload_bytes(payload), timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(process)
            return Delivery(
                event, "command", False, f"{command!r} did not finish within {timeout:g}s; stopped"
            )
        code = process.returncode
        if code == 0:
            return Delivery(event, "command", True, f"{command!r} exit 0")
        said.seek(0)
        output = said.read().decode("utf-8", errors="replace").strip()
        tail = output[-_SAID:].replace("\n", " | ")
        ended = f"exit {code}" if code > 0 else f"killed by signal {-code}"
        return Delivery(event, "command", False, f"{command!r} {ended}: {tail or '(no output)'}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole group, a grace period, then SIGKILL; reaped either way."""
    for sig, wait in ((signal.SIGTERM, _GRACE), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # Whatever of the group outlived its leader's end goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def post_webhook(url: str, event: str, payload: Mapping[str, Any], *, timeout: float) -> Delivery:
    """POST the payload as JSON to ``url``."""
    request = urllib.request.Request(
        url,
        data=payload_bytes(payload),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "forge-notify",
            "X-Forge-Event": event,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        return Delivery(event, "webhook", False, f"{url} answered {exc.code} {exc.reason}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Delivery(event, "webhook", False, f"{url}: {reason}")
    return Delivery(event, "webhook", 200 <= status < 300, f"{url} answered {status}")
