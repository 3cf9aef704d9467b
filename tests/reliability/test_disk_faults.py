"""A full disk and a read-only state folder: a clear error, and nothing recorded is lost.

A full disk is simulated with a file-size limit on the forge process
(RLIMIT_FSIZE, SIGXFSZ ignored so the write fails with EFBIG instead of
killing it): it needs no privileges and makes every write past the limit fail
the way ENOSPC does, short writes included. A read-only folder is chmod 0o500
for an ordinary user; root ignores modes, so as root the folder is bind-mounted
read-only in a private mount namespace (``unshare -m``) for the forge process
alone, and the test is skipped where neither works.

Guards: atomic_write (the old file stays whole when the new one cannot be
written, its temporary file is removed, and the OSError becomes a StateError
naming the file), exclusive_lock's StateError, and the CLI's exit 1 for it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import shutil
import signal
import stat
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from ..support import FORGE, Completed, Repo, failing_policy, forge_env
from .harness import assert_clean_exit, inspect_state


def _limit_file_size(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def forge_with(
    repo: Repo,
    *args: str,
    prefix: Sequence[str] = (),
    preexec: Callable[[], None] | None = None,
) -> Completed:
    done = subprocess.run(
        [*prefix, str(FORGE), *args],
        cwd=repo.root,
        env=forge_env(),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        stdin=subprocess.DEVNULL,
        preexec_fn=preexec,
    )
    return Completed(code=done.returncode, out=done.stdout, err=done.stderr)


def full_disk(repo: Repo, limit: int, *args: str) -> Completed:
    """forge ``args`` where no file can grow past ``limit`` bytes."""
    return forge_with(repo, *args, preexec=functools.partial(_limit_file_size, limit))


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every state file's bytes (what must survive the fault exactly)."""
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.suffix in (".yaml", ".jsonl")
    }


def assert_clear_state_error(done: Completed, folder: Path) -> None:
    assert done.code == 1, (done.code, done.out, done.err)
    assert "Traceback" not in done.err, done.err
    assert "error: cannot " in done.err, done.err
    assert str(folder) in done.err  # the message names the file


def test_a_full_disk_during_verify_keeps_the_recorded_state(repo: Repo) -> None:
    failing_policy(repo, max_failures=100)
    assert_clean_exit(repo.forge("verify", "--change", "c"), 0)
    folder = repo.change_dir("c")
    before = snapshot(folder)

    done = full_disk(repo, 100, "verify", "--change", "c")
    assert_clear_state_error(done, folder)
    assert "verify-attempts.yaml: File too large" in done.err
    assert snapshot(folder) == before  # the old state whole; no event without its state
    assert not list(folder.glob(".*.tmp"))  # the temporary file was cleaned up

    after = repo.forge("verify", "--change", "c")  # space again: it counts on
    assert_clean_exit(after, 0)
    state = yaml.safe_load((folder / "verify-attempts.yaml").read_text())
    assert state["total_attempts"] == state["consecutive_failures"] == 2
    inspect_state(repo.root)


def test_a_full_disk_during_a_run_stops_it_clearly(repo: Repo) -> None:
    cmd = "echo working"
    args = ("run", "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "1")
    assert_clean_exit(repo.forge(*args), 1)  # exhausted: spend and timeline exist
    folder = repo.change_dir("c")
    before = snapshot(folder)
    done = full_disk(repo, 100, *args)
    # The first write may be the shared rate limiter's log, under .forge/ too.
    assert_clear_state_error(done, repo.root / ".forge")
    assert snapshot(folder) == before
    inspect_state(repo.root)


def test_a_timeline_append_cut_short_by_a_full_disk_is_an_error(repo: Repo) -> None:
    failing_policy(repo, max_failures=100)
    assert_clean_exit(repo.forge("verify", "--change", "c"), 0)
    timeline = repo.change_dir("c") / "timeline.jsonl"
    # Room for the state file, and for 40 more bytes of timeline: half an event.
    done = full_disk(repo, timeline.stat().st_size + 40, "verify", "--change", "c")
    facts = inspect_state(repo.root, tolerated_bad={"c": frozenset({2})})
    counters = facts.changes["c"]
    # Either the event is whole, or forge said it could not record it.
    assert counters.torn_line is None or done.code == 1, (done.code, done.err)


@functools.cache
def _read_only_method() -> str | None:
    """How this machine can make a folder read-only for forge: chmod, unshare, or not at all."""
    if os.geteuid() != 0:
        return "chmod"
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind / / && mount -o remount,bind,ro / /"],
        capture_output=True,
        check=False,
    )
    return "unshare" if probe.returncode == 0 else None


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[Sequence[str]]:
    """Make ``folder`` read-only for the forge command run with the prefix yielded."""
    method = _read_only_method()
    if method is None:
        pytest.skip("no way to make a folder read-only here (root without unshare)")
    if method == "unshare":
        script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
        yield ("unshare", "-m", "sh", "-c", script, str(folder))
        return
    mode = folder.stat().st_mode
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)  # 0o500
    try:
        yield ()
    finally:
        folder.chmod(mode)


@pytest.mark.parametrize(
    "args",
    [("verify", "--change", "c"), ("run", "--change", "c", "--cmd", "echo hi", "--yes")],
    ids=["verify", "run"],
)
def test_a_read_only_state_folder_is_a_clear_error(repo: Repo, args: tuple[str, ...]) -> None:
    failing_policy(repo, max_failures=100)
    assert_clean_exit(repo.forge("verify", "--change", "c"), 0)
    folder = repo.change_dir("c")
    before = snapshot(folder)
    with read_only(folder) as prefix:
        done = forge_with(repo, *args, prefix=prefix)
    if args[0] == "run":
        # A loop whose state cannot be read stops as on an unreadable gate,
        # its ending naming the file, before any executor starts.
        assert done.code == 1, (done.code, done.out, done.err)
        assert "Traceback" not in done.err, done.err
        assert "run: STOPPED after 0 iteration(s) — gate-error" in done.lines
        assert "  gate:   forge state" in done.lines
        assert str(folder) in done.out
    else:
        assert_clear_state_error(done, folder)
    assert snapshot(folder) == before
    assert_clean_exit(repo.forge("verify", "--change", "c"), 0)  # writable again: it goes on
