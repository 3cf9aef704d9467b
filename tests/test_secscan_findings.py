"""Findings: stable fingerprints, no secret anywhere, and inline allow markers."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from orchestra._secscan import (
    ALLOW_MARKER_RULE,
    Ruleset,
    load_rules,
    redact,
    scan_bytes,
    scan_tree,
)


def fake_pat(seed: int) -> str:
    rng = random.Random(seed)
    return "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


def fake_password(seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits + "!%^&") for _ in range(20))


@pytest.fixture(scope="module")
def ruleset() -> Ruleset:
    return load_rules()


def test_the_fingerprint_survives_edits_above_the_secret(tmp_path: Path, ruleset: Ruleset) -> None:
    path = tmp_path / "settings.py"
    token = fake_pat(1)
    path.write_text(f"import os\nGITHUB = '{token}'\n")
    before = scan_tree(tmp_path, ruleset).findings
    path.write_text(f'"""Settings."""\n\nimport os\nimport sys\n\nGITHUB = \'{token}\'\n')
    after = scan_tree(tmp_path, ruleset).findings
    assert [f.line for f in before] == [2]
    assert [f.line for f in after] == [6]
    assert before[0].fingerprint == after[0].fingerprint
    assert len(before[0].fingerprint) == 16
    int(before[0].fingerprint, 16)


def test_the_fingerprint_changes_with_the_secret_and_the_file(ruleset: Ruleset) -> None:
    def fingerprint(path: str, token: str) -> str:
        (hit,) = scan_bytes(f"T = '{token}'\n".encode(), path, ruleset).hits
        return hit.fingerprint

    base = fingerprint("a.py", fake_pat(1))
    assert fingerprint("a.py", fake_pat(1)) == base
    assert fingerprint("a.py", fake_pat(2)) != base
    assert fingerprint("b.py", fake_pat(1)) != base


def test_the_secret_appears_nowhere_in_what_a_scan_returns(
    tmp_path: Path, ruleset: Ruleset
) -> None:
    token, password = fake_pat(3), fake_password(3)
    (tmp_path / ".env").write_text(f"GH_TOKEN={token}\nDB_PASSWORD={password}\n")
    result = scan_tree(tmp_path, ruleset)
    assert {f.rule_id for f in result.findings} == {"github-pat", "generic-password"}
    shown = [
        repr(result),
        str(result),
        json.dumps(result.as_dict()),
        *(repr(finding) for finding in result.findings),
        *(json.dumps(finding.as_dict()) for finding in result.findings),
        redact(f"GH_TOKEN={token} DB_PASSWORD={password}", ruleset),
    ]
    for text in shown:
        for secret in (token, password):
            assert secret not in text
            assert secret[4:12] not in text  # not even a middle slice
    previews = {f.rule_id: f.preview for f in result.findings}
    assert previews["github-pat"] == "ghp_…[redacted]"
    assert previews["generic-password"] == f"{password[:4]}…[redacted]"


def test_the_finding_says_what_and_how_bad(tmp_path: Path, ruleset: Ruleset) -> None:
    (tmp_path / "k.env").write_text(f"X={fake_pat(4)}\n")
    (finding,) = scan_tree(tmp_path, ruleset).findings
    assert finding.rule_id == "github-pat"
    assert finding.severity == "high"
    assert "GitHub" in finding.description
    assert finding.at_least("high")
    assert not finding.at_least("critical")


def marked_tree(root: Path) -> None:
    root.mkdir(exist_ok=True)
    (root / "fixtures.py").write_text(
        f"FIXTURE = '{fake_pat(10)}'  # gitleaks:allow\n"
        f"OTHER = '{fake_pat(11)}'  # pragma: allowlist secret\n"
        f"LIVE = '{fake_pat(12)}'\n"
    )


def test_every_marker_is_honoured_when_no_trust_list_is_given(
    tmp_path: Path, ruleset: Ruleset
) -> None:
    marked_tree(tmp_path)
    result = scan_tree(tmp_path, ruleset)
    assert [f.line for f in result.findings] == [3]
    assert [f.line for f in result.suppressed] == [1, 2]
    assert len(result.markers) == 2


def test_only_trusted_markers_are_honoured(tmp_path: Path, ruleset: Ruleset) -> None:
    marked_tree(tmp_path)
    at_start = scan_tree(tmp_path, ruleset)
    trusted = at_start.markers
    assert [f.line for f in scan_tree(tmp_path, ruleset, trusted_markers=trusted).findings] == [3]

    # During the loop the agent marks its own leak, and edits an old marker's line.
    path = tmp_path / "fixtures.py"
    lines = path.read_text().splitlines()
    lines[1] = f"OTHER = '{fake_pat(13)}'  # pragma: allowlist secret"
    lines[2] += "  # forge:allow-secret"
    path.write_text("\n".join(lines) + "\n")
    later = scan_tree(tmp_path, ruleset, trusted_markers=trusted)
    reported = [(f.line, f.rule_id) for f in later.findings]
    assert reported == [
        (2, ALLOW_MARKER_RULE),
        (2, "github-pat"),
        (3, ALLOW_MARKER_RULE),
        (3, "github-pat"),
    ]
    marker_finding = later.findings[0]
    assert marker_finding.severity == "high"
    assert "must not waive its own leak" in marker_finding.description
    assert [f.line for f in later.suppressed] == [1]
    # Trusting nothing reports every marker.
    none_trusted = scan_tree(tmp_path, ruleset, trusted_markers=frozenset())
    assert sum(f.rule_id == ALLOW_MARKER_RULE for f in none_trusted.findings) == 3


def test_marker_fingerprints_are_stable_across_scans_and_caching(
    tmp_path: Path, ruleset: Ruleset
) -> None:
    root = tmp_path / "tree"
    marked_tree(root)
    cache = tmp_path / "secscan.sqlite3"
    first = scan_tree(root, ruleset, cache_path=cache)
    second = scan_tree(root, ruleset, cache_path=cache, trusted_markers=first.markers)
    assert second.markers == first.markers
    assert [f.line for f in second.findings] == [3]
