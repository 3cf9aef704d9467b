"""Real Redis deployments per test: found (or installed), started on free ports, stopped.

- :class:`RedisServer`: one ``redis-server`` on a loopback port, optionally
  with a password (``requirepass``), ACL users, or TLS only (``--tls-port``
  with certificates made by :func:`make_certificates` with ``openssl``).
- :class:`RedisClusterNodes`: three empty cluster nodes given the slots and
  joined with ``CLUSTER ADDSLOTSRANGE`` / ``CLUSTER MEET`` (what
  ``redis-cli --cluster create`` sends), up when ``cluster_state:ok``.
- :class:`SentinelSet`: a master, its replica and one sentinel
  (``redis-server --sentinel``) that can be told to fail over.

No persistence (``--save '' --appendonly no``); :meth:`RedisServer.stop` with
``save=True`` writes one snapshot on the way down (``SHUTDOWN SAVE``), so a
restart on the same folder comes back with the data, as a server with
persistence would.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

_INSTALL_LOCK = Path("/tmp/forge-tests-redis-install.lock")
_WHAT_TO_INSTALL = (
    "these tests need a real {tool} binary on PATH: install it "
    "(Debian/Ubuntu: apt-get install {package}; macOS: brew install {brew})"
)


def _binary(tool: str, package: str, brew: str) -> str:
    """``tool`` on PATH; installed with apt-get (package ``package``) when missing and root."""
    found = shutil.which(tool)
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        # One installer at a time: the test workers run in parallel.
        with _INSTALL_LOCK.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not shutil.which(tool):
                env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
                subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
                subprocess.run(["apt-get", "install", "-y", "-qq", package], env=env, check=False)
        found = shutil.which(tool)
        if found:
            return found
    pytest.fail(_WHAT_TO_INSTALL.format(tool=tool, package=package, brew=brew), pytrace=False)


def redis_server_binary() -> str:
    """The ``redis-server`` binary; installed with apt-get when missing and running as root."""
    return _binary("redis-server", "redis-server", "redis")


def openssl_binary() -> str:
    """The ``openssl`` binary (it makes the TLS tests' certificates)."""
    return _binary("openssl", "openssl", "openssl")


def _is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def closed_port() -> int:
    """A loopback port nothing listens on (free a moment ago)."""
    return _free_port()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@attrs.frozen
class Certificates:
    """A test CA and a server certificate for 127.0.0.1 it signed (PEM files)."""

    ca: Path
    cert: Path
    key: Path


def make_certificates(folder: Path) -> Certificates:
    """A CA and a server certificate for ``127.0.0.1``/``localhost``, made with ``openssl``."""
    openssl = openssl_binary()
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.crt", folder / "ca.key"
    cert, key, request = folder / "server.crt", folder / "server.key", folder / "server.csr"
    names = folder / "names.ext"
    names.write_text("subjectAltName = IP:127.0.0.1, DNS:localhost\n")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=forge test CA",
        "-keyout", str(ca_key), "-out", str(ca))  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", str(key), "-out", str(request))  # fmt: skip
    run("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "2", "-extfile", str(names), "-out", str(cert))  # fmt: skip
    return Certificates(ca=ca, cert=cert, key=key)


class RedisServer:
    """One ``redis-server`` process on a loopback port, with its data folder.

    Args:
        binary: The ``redis-server`` binary.
        folder: Its data folder (and log).
        password: ``requirepass`` (the default user's password).
        users: ACL rules, one ``user …`` line each (``--user`` of redis-server).
        tls: Serve TLS only on the port, with these certificates (clients need no cert).
        args: More ``redis-server`` arguments.
        port: The port (default: a free one).
    """

    def __init__(
        self,
        binary: str,
        folder: Path,
        *,
        password: str | None = None,
        users: Sequence[str] = (),
        tls: Certificates | None = None,
        args: Sequence[str] = (),
        port: int | None = None,
    ) -> None:
        self.binary = binary
        self.folder = folder
        self.password = password
        self.users = tuple(users)
        self.tls = tls
        self.args = tuple(args)
        self.port = port or _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.tls is not None:
            return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.tls.ca}"
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        # No retries inside the client: a stopped server is seen at once.
        extra: dict[str, Any] = {}
        if self.tls is not None:
            extra = {"ssl": True, "ssl_ca_certs": str(self.tls.ca)}
        return redis.Redis(
            port=self.port,
            password=self.password,
            decode_responses=True,
            socket_timeout=5,
            retry=Retry(NoBackoff(), 0),
            **extra,
        )

    def command(self) -> list[str]:
        command = [
            self.binary,
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.folder),
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--logfile", str(self.folder / "redis.log"),
        ]  # fmt: skip
        if self.tls is None:
            command += ["--port", str(self.port)]
        else:
            command += [
                "--port", "0",
                "--tls-port", str(self.port),
                "--tls-cert-file", str(self.tls.cert),
                "--tls-key-file", str(self.tls.key),
                "--tls-ca-cert-file", str(self.tls.ca),
                "--tls-auth-clients", "no",
            ]  # fmt: skip
        if self.password:
            command += ["--requirepass", self.password]
        for user in self.users:
            command += ["--user", *user.split()]
        return command + list(self.args)

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_answering(self.process, self.folder / "redis.log", self.client)

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
        _reap(process)
        self.process = None


def _wait_answering(
    process: subprocess.Popen[bytes], log: Path, client: Callable[[], redis.Redis]
) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"redis-server exited with {process.returncode}: {text}")
        try:
            with client() as answering:
                if answering.ping():
                    return
        except (redis.exceptions.ConnectionError, redis.exceptions.BusyLoadingError):
            time.sleep(0.02)
    raise RuntimeError("redis-server did not answer within 10s")


def _reap(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def started(make: Callable[[], RedisServer]) -> RedisServer:
    """A server from ``make()``, started (once more on a fresh port if that one was taken)."""
    server = make()
    try:
        server.start()
    except RuntimeError:
        # Another process took the free port between the probe and the start.
        server.stop()
        server = make()
        server.start()
    return server


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.exceptions.RedisError):
            if predicate():
                return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


class RedisClusterNodes:
    """Three cluster nodes (masters, no replicas) sharing the 16384 slots."""

    def __init__(self, binary: str, folder: Path, count: int = 3) -> None:
        self.nodes: list[RedisServer] = []
        try:
            for number in range(count):
                self.nodes.append(started(_cluster_node(binary, folder / f"node{number}")))
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"redis+cluster://{hosts}/"

    def form(self) -> None:
        """Give each node a third of the slots, make them meet, wait for ``cluster_state:ok``."""
        share = 16384 // len(self.nodes)
        for number, node in enumerate(self.nodes):
            first = number * share
            last = 16383 if number == len(self.nodes) - 1 else first + share - 1
            with node.client() as client:
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        with self.nodes[0].client() as client:
            for node in self.nodes[1:]:
                client.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)

        def all_ok() -> bool:
            for node in self.nodes:
                with node.client() as client:
                    if client.cluster("info")["cluster_state"] != "ok":
                        return False
                    if len(client.cluster("nodes")) != len(self.nodes):
                        return False
            return True

        wait_until(all_ok, "the cluster's state to be ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _cluster_node(binary: str, folder: Path) -> Callable[[], RedisServer]:
    """Makes a cluster-enabled server, each time on a fresh port."""

    def make() -> RedisServer:
        # A start that failed leaves its node id behind: each try is a new node.
        (folder / "nodes.conf").unlink(missing_ok=True)
        # A cluster node also listens on its port + 10000 (the cluster bus).
        port = next(
            port
            for port in iter(lambda: random.randrange(20000, 55535), None)
            if _is_free(port) and _is_free(port + 10000)
        )
        args = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "5000")  # fmt: skip
        return RedisServer(binary, folder, args=args, port=port)

    return make


SENTINEL_SERVICE = "forgemaster"


class SentinelSet:
    """A master, one replica of it and a sentinel watching them (service ``forgemaster``)."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.sentinel_port = _free_port()
        self.sentinel: subprocess.Popen[bytes] | None = None
        self.master = started(lambda: RedisServer(binary, folder / "master"))
        replica_of = ("--replicaof", "127.0.0.1", str(self.master.port))
        try:
            self.replica = started(lambda: RedisServer(binary, folder / "replica", args=replica_of))
        except BaseException:
            self.master.stop()
            raise

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{SENTINEL_SERVICE}/0"

    def sentinel_client(self) -> redis.Redis:
        return redis.Redis(
            port=self.sentinel_port,
            decode_responses=True,
            socket_timeout=5,
            retry=Retry(NoBackoff(), 0),
        )

    def start_sentinel(self) -> None:
        """Start the sentinel; it is ready once it knows the master and its replica."""
        folder = self.folder / "sentinel"
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "sentinel.conf"
        config.write_text(
            f"port {self.sentinel_port}\n"
            "bind 127.0.0.1\n"
            f"dir {folder}\n"
            f"logfile {folder / 'sentinel.log'}\n"
            f"sentinel monitor {SENTINEL_SERVICE} 127.0.0.1 {self.master.port} 1\n"
            f"sentinel down-after-milliseconds {SENTINEL_SERVICE} 1000\n"
            f"sentinel failover-timeout {SENTINEL_SERVICE} 5000\n"
        )
        self.sentinel = subprocess.Popen(
            [self.binary, str(config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_answering(self.sentinel, folder / "sentinel.log", self.sentinel_client)
        wait_until(self._replica_known, "the sentinel to know the replica")

    def _replica_known(self) -> bool:
        with self.replica.client() as client:
            if client.info("replication").get("master_link_status") != "up":
                return False
        with self.sentinel_client() as client:
            replicas = client.execute_command("SENTINEL", "REPLICAS", SENTINEL_SERVICE)
        return any(_flags_ok(entry) for entry in replicas)

    def master_port(self) -> int:
        with self.sentinel_client() as client:
            _host, port = client.execute_command(
                "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_SERVICE
            )
        return int(port)

    def fail_over(self) -> int:
        """Make the replica the master (``SENTINEL FAILOVER``); returns the new master's port."""
        before = self.master_port()
        with self.sentinel_client() as client:
            client.execute_command("SENTINEL", "FAILOVER", SENTINEL_SERVICE)
        wait_until(lambda: self.master_port() != before, "the sentinel to fail over")
        after = self.master_port()
        promoted = self.replica if after == self.replica.port else self.master

        def promoted_is_master() -> bool:
            with promoted.client() as client:
                return bool(client.info("replication")["role"] == "master")

        wait_until(promoted_is_master, "the promoted replica to be a master")
        return after

    def stop(self) -> None:
        if self.sentinel is not None:
            self.sentinel.terminate()
            _reap(self.sentinel)
            self.sentinel = None
        self.replica.stop()
        self.master.stop()


def _flags_ok(entry: Any) -> bool:
    # SENTINEL REPLICAS answers a flat list of name, value pairs per replica.
    fields = dict(zip(entry[::2], entry[1::2], strict=False)) if isinstance(entry, list) else entry
    flags = str(fields.get("flags", ""))
    return "s_down" not in flags and "disconnected" not in flags


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh, empty Redis server for this test only."""
    binary = redis_server_binary()
    server = started(lambda: RedisServer(binary, tmp_path / "redis"))
    try:
        yield server
    finally:
        server.stop()
