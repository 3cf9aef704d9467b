"""What the secret scan used to pass over: tracked files under .forge/, large files,
text after a NUL byte, and secrets that only the history holds."""

from __future__ import annotations

import json

from .support import Repo
from .test_secscan_e2e import github_token
from .test_secscan_recall import Tokens


def findings(repo: Repo, *args: str) -> tuple[int, list[dict[str, object]]]:
    done = repo.forge("secscan", "--json", *args)
    assert done.code in (0, 1), done.out + done.err
    return done.code, json.loads(done.out)["findings"]


def test_a_tracked_file_under_forge_is_scanned_and_forges_own_are_not(repo: Repo) -> None:
    repo.write(".forge/notes/deploy.env", f"GITHUB_TOKEN={github_token(1)}\n")
    repo.commit("notes under .forge")
    # Untracked (and not ignored) under .forge/: Forge's own, not scanned.
    repo.write(".forge/changes/c/scratch.txt", f"token {github_token(2)}\n")
    code, found = findings(repo)
    assert code == 1
    assert [(f["rule_id"], f["path"]) for f in found] == [("github-pat", ".forge/notes/deploy.env")]


def test_a_file_over_max_file_bytes_is_scanned_in_chunks(repo: Repo) -> None:
    repo.write("forge.toml", "[secscan]\nmax_file_bytes = 500\n")
    near = f"GITHUB_TOKEN={github_token(3)}\n"
    far = f"API_TOKEN={github_token(4)}\n"
    key = Tokens(seed=2).private_key("RSA")  # about 900 bytes: it crosses a chunk's end
    repo.write("big.sql", "x = 1\n" * 100 + near + "y = 2\n" * 2000 + far + key)
    # One line, no line end: a token across the border of the first chunk.
    repo.write("min.js", "v=1;" * 120 + f"t='{github_token(5)}';" + "w=2;" * 600)
    code, found = findings(repo)
    assert code == 1
    assert [(f["path"], f["rule_id"], f["line"]) for f in found] == [
        ("big.sql", "github-pat", 101),
        ("big.sql", "github-pat", 2102),
        ("big.sql", "private-key", 2103),
        ("min.js", "github-pat", 1),
    ]


def test_the_text_after_a_nul_byte_is_scanned(repo: Repo) -> None:
    (repo.root / "firmware.bin").write_bytes(
        b"\x7fELF\x00\x00\x01" + f"\x00auth={github_token(5)}\x00".encode() + b"\xff" * 10
    )
    code, found = findings(repo)
    assert code == 1
    assert [(f["rule_id"], f["path"]) for f in found] == [("github-pat", "firmware.bin")]


def test_history_finds_a_secret_committed_then_removed(repo: Repo) -> None:
    token = github_token(6)
    repo.write("config.py", f"TOKEN = '{token}'\n")
    repo.commit("add the config")
    repo.write("config.py", "TOKEN = os.environ['TOKEN']\n")
    repo.commit("read it from the environment")
    assert findings(repo) == (0, [])  # the tree is clean
    done = repo.forge("secscan", "--history", "--json")
    assert done.code == 1, done.out + done.err
    document = json.loads(done.out)
    assert document["range"] == "the last 50 commits"
    assert document["commits"] == 3
    [finding] = document["findings"]
    assert (finding["rule_id"], finding["path"], finding["line"]) == ("github-pat", "config.py", 1)
    assert finding["commit"] == repo.git("rev-parse", "HEAD~1").strip()
    assert token not in done.out
    plain = repo.forge("secscan", "--history", "--plain")
    assert plain.code == 1
    assert token not in plain.out
    # A waiver of the finding's fingerprint holds in the history too.
    waived = repo.forge("secscan", "waive", str(finding["fingerprint"]), "--reason", "revoked")
    assert waived.code == 0, waived.err
    assert repo.forge("secscan", "--history").code == 0


def test_history_of_a_range_and_by_default_what_the_upstream_lacks(repo: Repo) -> None:
    repo.write("old.env", f"TOKEN={github_token(7)}\n")
    repo.commit("an old leak, already pushed")
    repo.git("branch", "pushed")  # the upstream: a local branch serves as well as a remote's
    repo.git("branch", "--set-upstream-to=pushed")
    repo.write("new.env", f"TOKEN={github_token(8)}\n")
    repo.commit("a new leak, not pushed")
    code, found = findings(repo, "--history")
    assert code == 1
    assert [f["path"] for f in found] == ["new.env"]
    code, found = findings(repo, "--history", "HEAD~2..HEAD")
    assert sorted(str(f["path"]) for f in found) == ["new.env", "old.env"]
    bad = repo.forge("secscan", "--history", "no-such-ref..HEAD")
    assert bad.code == 2
    assert "git log no-such-ref..HEAD failed" in bad.err
