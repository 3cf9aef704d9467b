"""A real ``redis-server`` per test: found (or installed), started on a free port, stopped.

No persistence (``--save '' --appendonly no``); :meth:`RedisServer.stop` with
``save=True`` writes one snapshot on the way down (``SHUTDOWN SAVE``), so a
restart on the same folder comes back with the data, as a server with
persistence would.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

_INSTALL_LOCK = Path("/tmp/forge-tests-redis-install.lock")
_WHAT_TO_INSTALL = (
    "these tests need a real redis-server binary on PATH: install it "
    "(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)"
)


def redis_server_binary() -> str:
    """The ``redis-server`` binary; installed with apt-get when missing and running as root."""
    found = shutil.which("redis-server")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        # One installer at a time: the test workers run in parallel.
        with _INSTALL_LOCK.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not shutil.which("redis-server"):
                env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
                subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
                subprocess.run(
                    ["apt-get", "install", "-y", "-qq", "redis-server"], env=env, check=False
                )
        found = shutil.which("redis-server")
        if found:
            return found
    pytest.fail(_WHAT_TO_INSTALL, pytrace=False)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process on a loopback port, with its data folder."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        # No retries inside the client: a stopped server is seen at once.
        return redis.Redis(
            port=self.port, decode_responses=True, socket_timeout=5, retry=Retry(NoBackoff(), 0)
        )

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.folder),
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--logfile", str(self.folder / "redis.log"),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = (self.folder / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: {log}")
            try:
                with self.client() as client:
                    if client.ping():
                        return
            except (redis.exceptions.ConnectionError, redis.exceptions.BusyLoadingError):
                time.sleep(0.02)
        raise RuntimeError("redis-server did not answer within 10s")

    def stop(self, *, save: bool = False) -> None:
        """Stop the server; with ``save`` its data is written first, for a restart."""
        process = self.process
        if process is None:
            return
        if save:
            # It goes down while answering, as SHUTDOWN does.
            with self.client() as client, contextlib.suppress(redis.exceptions.ConnectionError):
                client.shutdown(save=True)
        else:
            process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh, empty Redis server for this test only."""
    server = RedisServer(redis_server_binary(), tmp_path / "redis")
    try:
        server.start()
    except RuntimeError:
        # Another process took the free port between the probe and the start: once more.
        server = RedisServer(server.binary, tmp_path / "redis")
        server.start()
    try:
        yield server
    finally:
        server.stop()
