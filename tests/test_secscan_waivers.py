"""Waivers: recorded atomically, applied by fingerprint, lapsing when they expire."""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from orchestra._errors import CorruptStateError
from orchestra._secscan import (
    WAIVERS_FILE,
    Finding,
    add_waiver,
    apply_waivers,
    load_rules,
    load_waivers,
    scan_tree,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def finding(fingerprint: str) -> Finding:
    return Finding("github-pat", "GitHub token", "high", "a.py", 1, fingerprint, "ghp_…[redacted]")


def test_a_waiver_suppresses_its_finding_and_no_other(tmp_path: Path) -> None:
    path = tmp_path / WAIVERS_FILE
    add_waiver(path, fingerprint="aaaa", reason="revoked test key", who="alice", now=NOW)
    outcome = apply_waivers([finding("aaaa"), finding("bbbb")], load_waivers(path), now=NOW)
    assert [f.fingerprint for f in outcome.kept] == ["bbbb"]
    assert [f.fingerprint for f in outcome.waived] == ["aaaa"]


def test_an_expired_waiver_no_longer_waives(tmp_path: Path) -> None:
    path = tmp_path / WAIVERS_FILE
    waiver = add_waiver(
        path, fingerprint="aaaa", reason="until rotated", who="bob", expires_in="30d", now=NOW
    )
    assert waiver.created == "2025-03-01T12:00:00.000Z"
    assert waiver.expires == "2025-03-31T12:00:00.000Z"
    waivers = load_waivers(path)
    inside = apply_waivers([finding("aaaa")], waivers, now=NOW + timedelta(days=29))
    after = apply_waivers([finding("aaaa")], waivers, now=NOW + timedelta(days=30))
    assert len(inside.waived) == 1
    assert len(after.kept) == 1
    assert after.waived == ()


def test_adding_again_replaces_and_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / WAIVERS_FILE
    add_waiver(path, fingerprint="aaaa", reason="one", who="alice", now=NOW)
    add_waiver(path, fingerprint="bbbb", reason="two", who="alice", now=NOW)
    add_waiver(path, fingerprint="aaaa", reason="three", who="carol", now=NOW)
    waivers = load_waivers(path)
    assert [(w.fingerprint, w.reason, w.who) for w in waivers] == [
        ("bbbb", "two", "alice"),
        ("aaaa", "three", "carol"),
    ]
    document = yaml.safe_load(path.read_text())
    assert document[0] == {
        "fingerprint": "bbbb",
        "reason": "two",
        "who": "alice",
        "created": "2025-03-01T12:00:00.000Z",
    }


def test_a_missing_or_empty_file_has_no_waivers(tmp_path: Path) -> None:
    path = tmp_path / WAIVERS_FILE
    assert load_waivers(path) == ()
    path.write_text("")
    assert load_waivers(path) == ()


def test_hand_written_unquoted_timestamps_are_read(tmp_path: Path) -> None:
    path = tmp_path / "waivers.yaml"
    path.write_text(
        "- fingerprint: aaaa\n  reason: fixture\n  who: dana\n"
        "  created: 2025-01-31T09:12:00Z\n  expires: 2025-04-01\n"
    )
    (waiver,) = load_waivers(path)
    assert waiver.created == "2025-01-31T09:12:00.000Z"
    assert waiver.expires == "2025-04-01T00:00:00.000Z"
    assert waiver.active(NOW)


@pytest.mark.parametrize(
    "text",
    [
        "fingerprint: aaaa\n",  # a mapping, not a list
        "- fingerprint: aaaa\n  who: x\n  created: '2025-01-01T00:00:00Z'\n",  # no reason
        "- fingerprint: aaaa\n  reason: r\n  who: x\n  created: yesterday\n",
        "- [unclosed\n",
    ],
)
def test_a_corrupt_file_is_moved_aside(tmp_path: Path, text: str) -> None:
    path = tmp_path / "waivers.yaml"
    path.write_text(text)
    with pytest.raises(CorruptStateError) as caught:
        load_waivers(path)
    assert not path.exists()
    assert Path(caught.value.moved_to).read_text() == text
    assert "waivers.yaml" in caught.value.render()


def test_a_bad_expiry_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "waivers.yaml"
    with pytest.raises(ValueError, match="duration"):
        add_waiver(path, fingerprint="aaaa", reason="r", who="w", expires_in="soon")
    with pytest.raises(ValueError, match="reason"):
        add_waiver(path, fingerprint="aaaa", reason=" ", who="w")
    assert not path.exists()


def test_waiving_a_scanned_finding_end_to_end(tmp_path: Path) -> None:
    rng = random.Random(8)
    token = "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    root = tmp_path / "project"
    root.mkdir()
    (root / "fixture.py").write_text(f"TOKEN = '{token}'\n")
    ruleset = load_rules()
    (found,) = scan_tree(root, ruleset).findings
    waivers_path = root / WAIVERS_FILE
    add_waiver(waivers_path, fingerprint=found.fingerprint, reason="revoked", who="erin")
    # The waivers file lives under .forge/, which the scan never reads.
    result = scan_tree(root, ruleset)
    outcome = apply_waivers(result.findings, load_waivers(waivers_path))
    assert outcome.kept == ()
    assert outcome.waived == (found,)
    assert token not in waivers_path.read_text()
