"""The incremental cache: it saves reading, and never costs a finding."""

from __future__ import annotations

import os
import random
import sqlite3
import string
import threading
import time
from pathlib import Path

import pytest

from orchestra._secscan import RACY_MARGIN_NS, Ruleset, load_rules, parse_rules, scan_tree
from orchestra._secscan._cache import CacheEntry
from orchestra._shipped import shipped_dir

from .support import Repo

HOUR_NS = 3600 * 10**9


def fake_pat(seed: int) -> str:
    rng = random.Random(seed)
    return "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


@pytest.fixture(scope="module")
def ruleset() -> Ruleset:
    return load_rules()


def set_mtime(path: Path, mtime_ns: int) -> None:
    os.utime(path, ns=(mtime_ns, mtime_ns))


def generated_tree(root: Path, count: int, *, mtime_ns: int) -> list[Path]:
    paths = []
    for index in range(count):
        path = root / f"pkg{index % 20}" / f"module_{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def handler_{index}(request):\n    return {index}\n")
        set_mtime(path, mtime_ns)
        paths.append(path)
    return paths


def test_a_rescan_reads_only_the_touched_files(tmp_path: Path, ruleset: Ruleset) -> None:
    root = tmp_path / "tree"
    cache = tmp_path / "cache" / "secscan.sqlite3"
    past = time.time_ns() - HOUR_NS
    paths = generated_tree(root, 2000, mtime_ns=past)
    first = scan_tree(root, ruleset, cache_path=cache)
    assert (first.files_considered, first.files_read, first.files_cached) == (2000, 2000, 0)
    assert first.findings == ()

    touched = paths[::200]
    for index, path in enumerate(touched):
        text = path.read_text() + (f"TOKEN = '{fake_pat(index)}'\n" if index < 3 else "# edit\n")
        path.write_text(text)
        set_mtime(path, past + 60 * 10**9)  # still long before this scan: only the stat differs
    second = scan_tree(root, ruleset, cache_path=cache)
    assert len(touched) == 10
    assert second.files_read <= 10 + 2
    assert second.files_cached >= 2000 - 12
    assert second.bytes_read < first.bytes_read / 100
    assert len(second.findings) == 3

    third = scan_tree(root, ruleset, cache_path=cache)
    assert third.files_read == 0
    assert third.findings == second.findings


def test_an_edit_in_the_same_tick_as_the_scan_is_still_caught(
    tmp_path: Path, ruleset: Ruleset
) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    cache = tmp_path / "secscan.sqlite3"
    path = root / "config.py"
    secret = f"TOKEN = '{fake_pat(1)}'\n"
    path.write_text("TOKEN = 'not yet'".ljust(len(secret) - 1) + "\n")
    now = time.time_ns()
    set_mtime(path, now)  # modified "now": as racy as it gets
    first = scan_tree(root, ruleset, cache_path=cache)
    assert first.findings == ()
    # Same size, same mtime: only the content (and the ctime) differ.
    assert len(secret) == path.stat().st_size
    path.write_text(secret)
    set_mtime(path, now)
    second = scan_tree(root, ruleset, cache_path=cache)
    assert [f.rule_id for f in second.findings] == ["github-pat"]
    # Untouched but recent, the file is read again rather than trusted.
    third = scan_tree(root, ruleset, cache_path=cache)
    assert third.files_read == 1


def test_the_racy_rule_itself() -> None:
    stat = (1, 2, 3, 10 * HOUR_NS, 10 * HOUR_NS)
    verified = 10 * HOUR_NS + RACY_MARGIN_NS + 1
    entry = CacheEntry(stat, "hash", "rules", verified, "{}")
    assert entry.trusted(stat, "rules")
    assert not entry.trusted(stat, "other rules")
    assert not entry.trusted((1, 2, 3, 10 * HOUR_NS, 10 * HOUR_NS + 1), "rules")  # ctime moved
    recent = CacheEntry(stat, "hash", "rules", verified - 2, "{}")
    assert not recent.trusted(stat, "rules")


def test_changing_the_rules_rescans_everything(tmp_path: Path, ruleset: Ruleset) -> None:
    root = tmp_path / "tree"
    cache = tmp_path / "secscan.sqlite3"
    generated_tree(root, 50, mtime_ns=time.time_ns() - HOUR_NS)
    (root / "pkg0" / "module_0.py").write_text("x = 'demo_0123456789abcdef'\n")
    set_mtime(root / "pkg0" / "module_0.py", time.time_ns() - HOUR_NS)
    scan_tree(root, ruleset, cache_path=cache)
    assert scan_tree(root, ruleset, cache_path=cache).files_read == 0

    shipped = (shipped_dir("policies") / "secscan.toml").read_text(encoding="utf-8")
    extended = parse_rules(
        shipped
        + """
[[rule]]
id = "demo-token"
description = "Demo token"
regex = '''\\b(?P<secret>demo_[a-z0-9]{16})\\b'''
keywords = ["demo_"]
severity = "low"
"""
    )
    rescan = scan_tree(root, extended, cache_path=cache)
    assert rescan.files_read == 50
    assert [f.rule_id for f in rescan.findings] == ["demo-token"]


def test_a_corrupt_cache_is_moved_aside_and_the_scan_finds_everything(
    tmp_path: Path, ruleset: Ruleset
) -> None:
    root = tmp_path / "tree"
    cache = tmp_path / "cache" / "secscan.sqlite3"
    generated_tree(root, 30, mtime_ns=time.time_ns() - HOUR_NS)
    (root / "leak.env").write_text(f"GH={fake_pat(1)}\n")
    set_mtime(root / "leak.env", time.time_ns() - HOUR_NS)
    clean = scan_tree(root, ruleset, cache_path=cache)
    assert len(clean.findings) == 1

    cache.write_bytes(b"this is not a database" * 200)
    rescued = scan_tree(root, ruleset, cache_path=cache)
    assert rescued.findings == clean.findings
    assert rescued.files_read == 31
    assert rescued.cache_note is not None
    assert "corrupt" in rescued.cache_note
    assert len(list(cache.parent.glob("secscan.sqlite3.corrupt-*"))) == 1
    # The fresh cache works from the next scan on.
    again = scan_tree(root, ruleset, cache_path=cache)
    assert (again.files_read, again.cache_note, again.findings) == (0, None, clean.findings)


def test_a_damaged_row_is_rescanned(tmp_path: Path, ruleset: Ruleset) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    cache = tmp_path / "secscan.sqlite3"
    (root / "leak.env").write_text(f"GH={fake_pat(2)}\n")
    set_mtime(root / "leak.env", time.time_ns() - HOUR_NS)
    first = scan_tree(root, ruleset, cache_path=cache)
    with sqlite3.connect(cache) as connection:
        connection.execute("UPDATE files SET result = 'garbage'")
    connection.close()
    second = scan_tree(root, ruleset, cache_path=cache)
    assert second.findings == first.findings
    assert second.files_read == 1


def test_an_unusable_cache_location_only_costs_time(tmp_path: Path, ruleset: Ruleset) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "leak.env").write_text(f"GH={fake_pat(3)}\n")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    result = scan_tree(root, ruleset, cache_path=blocker / "secscan.sqlite3")
    assert len(result.findings) == 1
    assert result.cache_note is not None
    assert "not used" in result.cache_note


def test_concurrent_scanners_share_one_cache(tmp_path: Path, ruleset: Ruleset) -> None:
    root = tmp_path / "tree"
    cache = tmp_path / "secscan.sqlite3"
    generated_tree(root, 300, mtime_ns=time.time_ns() - HOUR_NS)
    (root / "leak.env").write_text(f"GH={fake_pat(4)}\n")
    results = []
    errors: list[BaseException] = []

    def scan() -> None:
        try:
            results.append(scan_tree(root, ruleset, cache_path=cache))
        except BaseException as exc:  # reported below; a thread must not swallow it
            errors.append(exc)

    threads = [threading.Thread(target=scan) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(len(result.findings) == 1 and result.cache_note is None for result in results)
    connection = sqlite3.connect(cache)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert connection.execute("SELECT count(*) FROM files").fetchone() == (301,)
    finally:
        connection.close()


def test_files_that_disappear_leave_the_cache(repo: Repo, ruleset: Ruleset, tmp_path: Path) -> None:
    cache = tmp_path / "secscan.sqlite3"
    repo.write("a.py", "x = 1\n")
    repo.write("b.py", "y = 2\n")
    scan_tree(repo.root, ruleset, cache_path=cache)
    (repo.root / "b.py").unlink()
    scan_tree(repo.root, ruleset, cache_path=cache)
    connection = sqlite3.connect(cache)
    try:
        paths = {row[0] for row in connection.execute("SELECT path FROM files")}
    finally:
        connection.close()
    assert paths == {"README.md", "a.py"}


def test_the_cache_holds_no_secret(tmp_path: Path, ruleset: Ruleset) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    cache = tmp_path / "secscan.sqlite3"
    token = fake_pat(5)
    (root / "leak.env").write_text(f"GH={token}\n")
    scan_tree(root, ruleset, cache_path=cache)
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("secscan.sqlite3*"))
    assert token.encode() not in stored
    assert token[8:].encode() not in stored
