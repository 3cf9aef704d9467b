"""A ``redis-server`` for a bench: on a free loopback port, without persistence."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


def start_server(folder: Path, bench: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start one and wait until it answers; returns the process and its port.

    It runs in the bench's process group: whoever stops the bench stops the
    server too. ``bench`` names the script in the message when there is none.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit(f"{bench} needs redis-server (apt-get install redis-server)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(folder), "--logfile", str(folder / "redis.log")],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    for _ in range(500):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.01)
    client.close()
    return process, port
