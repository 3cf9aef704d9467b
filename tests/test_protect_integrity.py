"""The integrity check on real files: manifests, violations, snapshots and restores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestra._policy import Policy, ProtectPolicy
from orchestra._protect._check import IntegrityCheck, integrity_check
from orchestra._protect._manifest import Scope, take_manifest
from orchestra._protect._spec import ProtectSpec


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
    return integrity_check(
        policy, workdir=root, root=root, change="c", state_folder=root / ".forge/changes/c"
    )


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

    real = manifest_module.file_digest

    def counted(path: str) -> str:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(manifest_module, "file_digest", counted)
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
