"""No secret an agent prints, in any form, reaches a file under ``.forge/`` or a notice.

Every secret shape the shipped rules know (one example per rule, from the
rules' own recall tests) is put out through every path an agent has: plain on
stdout and stderr, JSON-escaped inside Claude's stream-json (the assistant's
text, the result, a refused tool's input), base64, cut across two lines,
URL-escaped, and in the report at ``$FORGE_REPORT``. Then every file Forge
wrote is read as bytes, with the payload of every notice sent.
"""

from __future__ import annotations

import base64
import json
import random
import string
import sys
from pathlib import Path

import pytest

from orchestra._secscan import find_secrets, load_rules

from .support import FAKE_AGENT, Repo
from .test_secscan_recall import Tokens, planted_corpus

HEX = "0123456789abcdef"
URLSAFE = string.ascii_letters + string.digits + "-_"


def _examples() -> list[tuple[str, str, str]]:
    """``(rule id, the text it is found in, the secret)``, one per shipped rule."""
    tokens = Tokens(seed=99)
    texts: dict[str, str] = {}
    for _, rule, _, text in planted_corpus(tokens):
        texts.setdefault(rule, text)
    # The rules the recall corpus plants no example of, in their public formats.
    rng = random.Random(5)
    texts.setdefault(
        "digitalocean-token", "DO_TOKEN=dop_v1_" + "".join(rng.choices(HEX, k=64)) + "\n"
    )
    texts.setdefault(
        "google-oauth-client-secret",
        'client_secret = "GOCSPX-' + "".join(rng.choices(URLSAFE, k=28)) + '"\n',
    )
    texts.setdefault(
        "pypi-token", "password = pypi-AgEIcHlwaS5vcmc" + "".join(rng.choices(URLSAFE, k=70)) + "\n"
    )
    ruleset = load_rules("secscan", root=Path.cwd())
    examples = []
    for shipped in ruleset.rules:
        text = texts[shipped.id]  # a KeyError here: a new rule needs an example above
        [hit] = [h for h in find_secrets(text.encode(), ruleset) if h.rule_id == shipped.id]
        examples.append((shipped.id, text, hit.secret))
    return examples


EXAMPLES = _examples()


def _escaped(text: str, secret: str) -> str:
    """``text`` as a JSON string's body, the secret's characters as ``\\uXXXX`` escapes."""
    body = json.dumps(text)[1:-1]
    inner = json.dumps(secret)[1:-1]
    hidden = "".join(
        f"\\u{ord(char):04x}" if index % 3 == 2 and char.isalnum() else char
        for index, char in enumerate(inner)
    )
    return body.replace(inner, hidden)


def _percent(text: str, secret: str) -> str:
    return text.replace(secret, "".join(f"%{byte:02X}" for byte in secret.encode()))


def _split(text: str, secret: str) -> str:
    cut = len(secret) // 2
    return text.replace(secret, secret[:cut] + "\n" + secret[cut:])


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _agent_output(text: str, secret: str) -> tuple[str, str, str]:
    """What the agent prints on stdout and stderr, and writes as its report."""
    escaped = _escaped(text, secret)
    assistant = (
        '{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"'
        + escaped
        + '"}]}}'
    )
    result = (
        '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":1,'
        '"result":"' + escaped + '","errors":["' + escaped + '"],'
        '"permission_denials":[{"tool_name":"Bash","tool_use_id":"t1",'
        '"tool_input":{"command":"' + escaped + '"}}],'
        '"total_cost_usd":0.01,"usage":{"input_tokens":1,"output_tokens":1}}'
    )
    stdout = "\n".join(
        [
            "plain: " + text,
            assistant,
            "base64: " + _b64(text),
            "split: " + _split(text, secret),
            "url: " + _percent(text, secret),
            result,
            "",
        ]
    )
    stderr = "plain: " + text + "\nbase64: " + _b64(text) + "\n"
    report = '{"summary": "' + escaped + '", "done": false}'
    return stdout, stderr, report


def _forms(text: str, secret: str) -> list[bytes]:
    """What must not be found: the secret (each long line of it) and the forms it was put in."""
    parts = [secret]
    if "\n" in secret or "\\n" in secret:
        parts = [p for p in secret.replace("\\n", "\n").splitlines() if len(p) >= 16]
    encoded = [_escaped(secret, secret), _percent(secret, secret), _b64(text)]
    return [form.encode() for form in (*parts, *encoded)]


def _everything(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize(("rule_id", "text", "secret"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_no_secret_reaches_a_file_or_a_notice(
    repo: Repo, rule_id: str, text: str, secret: str
) -> None:
    stdout, stderr, report = _agent_output(text, secret)
    script = repo.root.parent / "steps.json"
    script.write_text(
        json.dumps({"steps": [{"print": stdout, "stderr": stderr, "report_raw": report}]})
    )
    notices = repo.root.parent / "notices.jsonl"
    repo.write(
        "executors/leaky.toml",
        f"argv = {json.dumps([sys.executable, str(FAKE_AGENT), str(script)])}\n"
        'output = "claude-stream-json"\n',
    )
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        f"[notify]\non_escalate = \"cat >> '{notices}'; echo >> '{notices}'\"\n"
        f"on_finish = \"cat >> '{notices}'; echo >> '{notices}'\"\n"
        '[[loop]]\nchange = "super"\nexecutor = "leaky"\nmax_iterations = 1\n',
    )
    repo.commit("policy")

    ran = repo.forge("run", "--change", "c", "--executor", "leaky", "--yes", "--plain")
    assert ran.code == 1, ran.out + ran.err  # the agent reported an error
    supervised = repo.forge("supervise", "--plain")
    assert notices.exists(), supervised.out + supervised.err

    written = _everything(repo.root / ".forge")
    assert any(path.name == "timeline.jsonl" for path in written)
    assert any(path.name == "report.html" for path in written), sorted(written)
    assert any(path.name == "status.md" for path in written), sorted(written)
    written[notices] = notices.read_bytes()
    for form in _forms(text, secret):
        leaks = [str(path) for path, data in written.items() if form in data]
        assert not leaks, f"{rule_id}: {form[:12]!r}… in {leaks}"
    for shown in (ran.out, ran.err, supervised.out, supervised.err):
        assert secret not in shown
    # The redaction is visible where the secret was.
    timeline = (repo.change_dir("c") / "timeline.jsonl").read_text()
    assert "[redacted:" in timeline
