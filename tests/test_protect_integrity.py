"""The integrity check on real files: manifests, violations, snapshots and restores."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestra._policy import Policy, ProtectPolicy
from orchestra._protect._check import IntegrityCheck, integrity_check
from orchestra._protect._manifest import (
    SMALL_FILE,
    Scope,
    Settled,
    content_digest,
    read_digest,
    take_manifest,
)
from orchestra._protect._spec import ProtectSpec
from orchestra._ratelimit import SqliteBackend
from orchestra._ratelimit._window import SlidingWindow


def _tree(root: Path) -> None:
    (root / "specs" / "api").mkdir(parents=True)
    (root / "specs" / "api" / "login.md").write_text("# login\n")
    (root / "specs" / "README.md").write_text("specs\n")
    (root / "AGENTS.md").write_text("agents\n")
    (root / "forge.toml").write_text("[verify]\n")
    (root / "policies").mkdir()
    (root / "policies" / "nightly.toml").write_text("[run]\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print()\n")


def _check(root: Path) -> IntegrityCheck:
    policy = Policy(
        protect=ProtectPolicy(
            exist=("AGENTS.md", "specs/", "memory/"), frozen=("forge.toml", "policies/")
        )
    )
    return integrity_check(policy, workdir=root, root=root, state_folder=root / ".forge/changes/c")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    _tree(tmp_path)
    return tmp_path


def test_nothing_harmed_reports_nothing(project: Path) -> None:
    check = _check(project)
    check.arm()
    (project / "src" / "app.py").write_text("changed\n")
    (project / "AGENTS.md").write_text("edited: exist paths may change\n")
    (project / "specs" / "new.md").write_text("added to an exist folder\n")
    report = check.inspect("i1")
    assert not report.harmed
    assert report.checked >= 7


def test_deleted_exist_folder_is_restored_whole(project: Path) -> None:
    check = _check(project)
    check.arm()
    for path in sorted(project.joinpath("specs").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    project.joinpath("specs").rmdir()
    report = check.inspect("i1")
    assert report.harmed
    assert {r.violation.name for r in report.repairs} >= {"specs", "specs/api/login.md"}
    assert all(r.restored for r in report.repairs)
    assert (project / "specs" / "api" / "login.md").read_text() == "# login\n"
    assert (project / "specs" / "README.md").read_text() == "specs\n"


def test_frozen_edit_and_addition_are_undone_and_nothing_is_lost(project: Path) -> None:
    check = _check(project)
    check.arm()
    (project / "forge.toml").write_text("[verify]\nmax_failures = 99\n")
    (project / "policies" / "lax.toml").write_text("[budget]\n")
    report = check.inspect("i1")
    harms = {r.violation.name: r.violation.harm for r in report.repairs}
    assert harms == {"forge.toml": "modified", "policies/lax.toml": "added"}
    assert (project / "forge.toml").read_text() == "[verify]\n"
    assert not (project / "policies" / "lax.toml").exists()
    moved = next(r.quarantined for r in report.repairs if r.violation.harm == "added")
    assert moved is not None
    assert Path(moved).read_text() == "[budget]\n"


def test_permissions_and_symlink_swaps_are_changes_to_frozen_paths(project: Path) -> None:
    check = _check(project)
    check.arm()
    os.chmod(project / "policies" / "nightly.toml", 0o777)
    (project / "forge.toml").unlink()
    (project / "forge.toml").symlink_to(project / "src" / "app.py")
    report = check.inspect("i1")
    harms = {r.violation.name: r.violation.harm for r in report.repairs}
    assert harms == {"policies/nightly.toml": "modified", "forge.toml": "replaced"}
    assert not (project / "forge.toml").is_symlink()
    assert (project / "forge.toml").read_text() == "[verify]\n"
    assert (project / "policies" / "nightly.toml").stat().st_mode & 0o777 != 0o777


def test_a_folder_swapped_for_a_symlink_is_not_written_through(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    check = _check(project)
    check.arm()
    (project / "specs").rename(elsewhere / "moved-specs")
    (project / "specs").symlink_to(elsewhere)
    report = check.inspect("i1")
    assert all(r.restored for r in report.repairs)
    assert not (project / "specs").is_symlink()
    assert (project / "specs" / "api" / "login.md").read_text() == "# login\n"
    assert not (elsewhere / "api").exists()


def test_a_protected_path_appearing_later_is_not_a_violation(project: Path) -> None:
    check = _check(project)
    check.arm()
    (project / "memory").mkdir()
    (project / "memory" / "notes.md").write_text("learned\n")
    assert not check.inspect("i1").harmed
    # ...and from then on it is protected.
    check.arm()
    (project / "memory" / "notes.md").unlink()
    report = check.inspect("i2")
    assert [r.violation.name for r in report.repairs] == ["memory/notes.md"]
    assert (project / "memory" / "notes.md").read_text() == "learned\n"


def test_forge_state_of_the_change_is_frozen(project: Path) -> None:
    state = project / ".forge" / "changes" / "c"
    state.mkdir(parents=True)
    (state / "verify-attempts.yaml").write_text("consecutive_failures: 2\n")
    check = _check(project)
    check.arm()
    (state / "verify-attempts.yaml").write_text("consecutive_failures: 0\n")
    report = check.inspect("i1")
    assert [r.violation.name for r in report.repairs] == [".forge/changes/c/verify-attempts.yaml"]
    assert (state / "verify-attempts.yaml").read_text() == "consecutive_failures: 2\n"


def test_unchanged_files_are_not_rehashed(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scope = Scope(project, ProtectSpec(("specs/",), ("forge.toml",)))
    old = 1_000_000_000  # long before the manifest: not a racy timestamp
    for path in project.rglob("*"):
        os.utime(path, ns=(old, old), follow_symlinks=False)
    first = take_manifest([scope])
    reads: list[str] = []
    import orchestra._protect._manifest as manifest_module

    real = manifest_module.read_digest

    def counted(path: str, size: int = SMALL_FILE) -> tuple[str, bytes | None]:
        reads.append(path)
        return real(path, size)

    monkeypatch.setattr(manifest_module, "read_digest", counted)
    (project / "specs" / "README.md").write_text("edited\n")
    second = take_manifest([scope], first)
    assert reads == [str(project / "specs" / "README.md")]
    assert second.nodes[str(project / "forge.toml")].digest is not None


def test_an_edit_racing_the_manifest_is_still_seen(project: Path) -> None:
    scope = Scope(project, ProtectSpec((), ("forge.toml",)))
    first = take_manifest([scope])
    stat = (project / "forge.toml").stat()
    # Same size, same timestamps as recorded: only a fresh hash can tell.
    (project / "forge.toml").write_text("[verify]\r")
    os.utime(project / "forge.toml", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = take_manifest([scope], first)
    path = str(project / "forge.toml")
    assert second.nodes[path].digest != first.nodes[path].digest


def _snapshots(project: Path) -> list[str]:
    folder = project / ".forge/changes/c/protect/snapshots"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def test_small_files_are_snapshotted_in_memory_where_the_agent_cannot_reach(
    project: Path,
) -> None:
    check = _check(project)
    check.arm()
    assert _snapshots(project) == []
    # Nothing on disk to tamper with; the copy in memory restores the file.
    (project / "policies" / "nightly.toml").write_text("[run]\nmax_iterations = 999\n")
    report = check.inspect("i1")
    assert [r.action for r in report.repairs] == ["restored"]
    assert (project / "policies" / "nightly.toml").read_text() == "[run]\n"


def test_a_large_file_is_snapshotted_on_disk_and_restored_from_there(project: Path) -> None:
    big = os.urandom(SMALL_FILE) + b"one byte over"
    (project / "policies" / "big.bin").write_bytes(big)
    check = _check(project)
    check.arm()
    assert len(_snapshots(project)) == 1
    (project / "policies" / "big.bin").write_bytes(b"small now")
    report = check.inspect("i1")
    assert [r.action for r in report.repairs] == ["restored"]
    assert (project / "policies" / "big.bin").read_bytes() == big


def test_an_altered_snapshot_on_disk_is_not_restored(project: Path) -> None:
    (project / "policies" / "big.bin").write_bytes(b"x" * (SMALL_FILE + 1))
    check = _check(project)
    check.arm()
    [blob] = _snapshots(project)
    (project / ".forge/changes/c/protect/snapshots" / blob).write_bytes(b"y" * (SMALL_FILE + 1))
    (project / "policies" / "big.bin").unlink()
    report = check.inspect("i1")
    assert [r.action for r in report.repairs] == ["not restored: its snapshot was altered"]
    assert not (project / "policies" / "big.bin").exists()


def test_past_the_memory_budget_snapshots_go_to_disk(project: Path) -> None:
    check = _check(project)
    check.store.memory_budget = 6  # room for one six-byte file, no more
    manifest = check.arm()
    digests = {n.digest for n in manifest.nodes.values() if n.digest is not None}
    held = {d for d in digests if check.store.in_memory(d) is not None}
    assert sum(len(check.store.in_memory(d) or b"") for d in held) <= 6
    assert len(held) == 1
    assert set(_snapshots(project)) == digests - held
    (project / "policies" / "nightly.toml").write_text("edited\n")
    (project / "forge.toml").write_text("edited\n")
    report = check.inspect("i1")
    assert [r.action for r in report.repairs] == ["restored", "restored"]
    assert (project / "policies" / "nightly.toml").read_text() == "[run]\n"
    assert (project / "forge.toml").read_text() == "[verify]\n"


def test_arming_again_reads_only_what_changed_and_keeps_only_the_newest_content(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = 1_000_000_000  # long before the manifest: not a racy timestamp
    for path in project.rglob("*"):
        os.utime(path, ns=(old, old), follow_symlinks=False)
    check = _check(project)
    check.arm()
    assert not check.inspect("i1").harmed
    reads: list[str] = []
    import orchestra._protect._manifest as manifest_module
    import orchestra._protect._restore as restore_module

    real = manifest_module.read_digest

    def counted(path: str, size: int = SMALL_FILE) -> tuple[str, bytes | None]:
        reads.append(path)
        return real(path, size)

    monkeypatch.setattr(manifest_module, "read_digest", counted)
    monkeypatch.setattr(restore_module, "read_digest", counted)
    (project / "AGENTS.md").write_text("edited: an exist path\n")
    check.arm()
    # One read of the edited file serves both its hash and its snapshot.
    assert reads == [str(project / "AGENTS.md")]
    assert check.store.in_memory(content_digest(b"edited: an exist path\n")) is not None
    assert check.store.in_memory(content_digest(b"agents\n")) is None
    assert check.store.in_memory(content_digest(b"[verify]\n")) is not None
    assert _snapshots(project) == []


def test_content_read_by_inspect_is_not_read_again_by_the_next_arm(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = _check(project)
    check.arm()
    (project / "AGENTS.md").write_text("edited during the iteration\n")
    old = 1_000_000_000
    for path in project.rglob("*"):
        os.utime(path, ns=(old, old), follow_symlinks=False)
    assert not check.inspect("i1").harmed
    import orchestra._protect._manifest as manifest_module
    import orchestra._protect._restore as restore_module

    def refused(path: str, size: int = SMALL_FILE) -> tuple[str, bytes | None]:
        raise AssertionError(f"{path} read again")

    monkeypatch.setattr(manifest_module, "read_digest", refused)
    monkeypatch.setattr(restore_module, "read_digest", refused)
    check.arm()
    assert check.store.in_memory(content_digest(b"edited during the iteration\n")) is not None


def test_large_snapshots_no_longer_needed_are_dropped_at_the_next_arm(project: Path) -> None:
    first = b"a" * (SMALL_FILE + 1)
    (project / "policies" / "big.bin").write_bytes(first)
    leftover = project / ".forge/changes/c/protect/snapshots" / "left-by-another-run"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("not this check's to drop before the loop ends\n")
    check = _check(project)
    check.arm()
    assert not check.inspect("i1").harmed
    (project / "policies" / "big.bin").unlink()  # a human's edit between iterations
    second = b"b" * (SMALL_FILE + 1)
    (project / "policies" / "big.bin").write_bytes(second)
    check.arm()
    assert _snapshots(project) == sorted([content_digest(second), leftover.name])
    assert not check.inspect("i2").harmed
    check.finish()
    assert _snapshots(project) == [content_digest(second)]


def test_a_file_that_grew_since_its_stat_is_read_whole(project: Path) -> None:
    path = project / "grown.txt"
    path.write_bytes(b"x" * 100)
    assert read_digest(str(path), 3) == (content_digest(b"x" * 100), b"x" * 100)
    path.write_bytes(b"y" * (SMALL_FILE + 10))
    assert read_digest(str(path), 3) == (content_digest(b"y" * (SMALL_FILE + 10)), None)


def test_a_modification_settled_on_the_filesystems_clock_is_not_rehashed(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope = Scope(project, ProtectSpec((), ("forge.toml",)))
    path = project / "forge.toml"
    info = path.stat()
    # Modified this very second, but before the marker's time: settled.
    settled = Settled(info.st_dev, info.st_mtime_ns + 1)
    first = take_manifest([scope], settled=settled)
    # Stamped with the marker's own time: a later edit may share it.
    racing = take_manifest([scope], settled=Settled(info.st_dev, info.st_mtime_ns))
    import orchestra._protect._manifest as manifest_module

    reads: list[str] = []
    real = manifest_module.read_digest

    def counted(path: str, size: int = SMALL_FILE) -> tuple[str, bytes | None]:
        reads.append(path)
        return real(path, size)

    monkeypatch.setattr(manifest_module, "read_digest", counted)
    take_manifest([scope], first, settled=settled)
    assert reads == []
    take_manifest([scope], racing, settled=settled)
    assert reads == [str(path)]


def test_the_filesystems_clock_is_never_ahead_of_the_wall_clock(project: Path) -> None:
    check = _check(project)
    check.arm()
    marker = check.store.folder.parent / ".clock"
    assert marker.is_file()
    future = time.time_ns() + 3600 * 10**9
    os.utime(marker, ns=(future, future))
    settled = check._settled()
    assert settled is not None
    assert settled.before_ns <= time.time_ns()


def test_the_check_never_opens_the_live_rate_limit_log(project: Path) -> None:
    """Opening the log would drop this process's sqlite locks on it (they are POSIX
    locks, per process and file): another process closing its last connection then
    deletes the write-ahead log under the limiter's, whose next read fails with
    SQLITE_IOERR_SHORT_READ ("disk I/O error"), as racing `forge run`s did."""
    log = project / ".forge" / "ratelimit.sqlite3"
    backend = SqliteBackend.open(log)  # holds an idle connection, as a running loop does
    rule = SlidingWindow(calls=1000, window=60.0)
    backend.try_acquire(rule, 1, "mine")
    check = _check(project)
    check.arm()
    # Another Forge process takes a permit and closes its only connection.
    other = (
        "import sys; from orchestra._ratelimit import SqliteBackend; "
        "from orchestra._ratelimit._window import SlidingWindow; "
        "SqliteBackend.open(__import__('pathlib').Path(sys.argv[1]))"
        ".try_acquire(SlidingWindow(calls=1000, window=60.0), 1, 'other')"
    )
    subprocess.run([sys.executable, "-c", other, str(log)], check=True)
    assert log.with_name(log.name + "-wal").exists()  # still shared with this process
    assert backend.try_acquire(rule, 1, "mine").granted
    os.unlink(log)
    report = check.inspect("i1")
    [repair] = report.repairs
    assert (repair.violation.name, repair.violation.harm) == (".forge/ratelimit.sqlite3", "deleted")
    assert repair.action == "not restored: nothing to restore it from"
