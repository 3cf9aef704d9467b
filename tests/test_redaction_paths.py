"""No secret reaches ``.forge/`` or a notice in the encodings an agent's output may hold it.

Beside :mod:`tests.test_redaction_fuzz` (plain, JSON-escaped, base64, cut, URL-escaped):
UTF-16 text, as a ``cat`` of a UTF-16 file prints it (a NUL byte beside every ASCII
one, either byte order) and as Claude's stream-json carries it (the NULs as
``\\u0000``); bytes shown as ``\\x`` escapes (a program's repr of them). Each goes
through every path an agent's words take into Forge: its stdout and stderr, the
parsed stream-json fields (final message, errors, refused tool input), the report
at ``$FORGE_REPORT``, and ``forge event --detail`` run by the agent itself. Then
every file Forge wrote and every notice it sent is read as bytes.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from .support import FAKE_AGENT, Repo
from .test_redaction_fuzz import EXAMPLES

FORGE = Path(sys.executable).with_name("forge")


def _wide(text: str, order: str) -> str:
    """``text`` as UTF-16 bytes, each byte one character (how the agent writes them)."""
    return text.encode(f"utf-16-{order}").decode("latin-1")


def _hex(text: str) -> str:
    """``text``'s bytes as ``\\x`` escapes, as ``printf`` takes them."""
    return "".join(f"\\x{byte:02x}" for byte in text.encode())


def _shown(text: str) -> list[str]:
    """The encodings of ``text`` an agent's output may hold."""
    return [
        _wide(text, "le"),
        _wide(text, "be"),
        repr(text.encode("utf-16-le")),  # b'e\x00x\x00…'
        _hex(text),
    ]


def _forms(secret: str) -> list[bytes]:
    """What must not be found: the secret's long lines, in each encoding."""
    lines = [line for line in secret.replace("\\n", "\n").splitlines() if len(line) >= 16]
    forms: list[bytes] = []
    for line in lines or [secret]:
        forms += [line.encode(), line.encode("utf-16-le"), line.encode("utf-16-be")]
        escaped = [repr(line.encode("utf-16-le"))[2:-1], _hex(line)]
        # As the timeline's JSON holds them too: each backslash doubled.
        forms += [form.encode() for form in escaped + [json.dumps(e)[1:-1] for e in escaped]]
    return forms


def _stream_json(text: str) -> str:
    """Claude's stream-json: the text in a tool result, the final answer and the errors."""
    tool = {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}]},
    }
    result = {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "num_turns": 1,
        "result": text,
        "errors": [text],
        "permission_denials": [
            {"tool_name": "Bash", "tool_use_id": "t2", "tool_input": {"command": text}}
        ],
        "total_cost_usd": 0.01,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return json.dumps(tool) + "\n" + json.dumps(result) + "\n"


@pytest.mark.parametrize(("rule_id", "text", "secret"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_no_encoded_secret_reaches_a_file_or_a_notice(
    repo: Repo, rule_id: str, text: str, secret: str
) -> None:
    shown = _shown(text)
    # Raw output (a cat of the file) on both streams, and each form in stream-json.
    stdout = "".join(form + "\n" for form in shown) + "".join(_stream_json(f) for f in shown)
    stderr = "".join(form + "\n" for form in shown)
    # The agent records an event with the secret in its detail, in a form argv can hold.
    detail = repo.root.parent / "detail.txt"
    detail.write_text(text + " " + shown[2] + " " + shown[3])
    event = (
        f"{shlex.quote(str(FORGE))} event --change c forge.blocked "
        f'--detail "$(cat {shlex.quote(str(detail))})" >/dev/null 2>&1'
    )
    report = json.dumps({"summary": " ".join(shown), "done": False})
    script = repo.root.parent / "steps.json"
    script.write_text(
        json.dumps(
            {"steps": [{"shell": event, "print": stdout, "stderr": stderr, "report_raw": report}]}
        )
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
        # In the sandbox, as an agent runs: its forge event goes through the inbox.
        '[sandbox]\nmode = "bubblewrap"\n'
        f"[notify]\non_escalate = \"cat >> '{notices}'; echo >> '{notices}'\"\n"
        f"on_finish = \"cat >> '{notices}'; echo >> '{notices}'\"\n"
        '[[loop]]\nchange = "super"\nexecutor = "leaky"\nmax_iterations = 1\n',
    )
    repo.commit("policy")

    ran = repo.forge("run", "--change", "c", "--executor", "leaky", "--yes", "--plain")
    assert ran.code == 1, ran.out + ran.err  # the agent reported an error
    supervised = repo.forge("supervise", "--plain")
    assert notices.exists(), supervised.out + supervised.err

    written = {p: p.read_bytes() for p in (repo.root / ".forge").rglob("*") if p.is_file()}
    timeline = (repo.change_dir("c") / "timeline.jsonl").read_text()
    assert '"forge.blocked"' in timeline, "the agent's event was not recorded"
    assert any(b"from the inbox" in data for data in written.values()), "not through the inbox"
    written[notices] = notices.read_bytes()
    for form in _forms(secret):
        leaks = [str(path) for path, data in written.items() if form in data]
        assert not leaks, f"{rule_id}: {form[:12]!r}… in {leaks}"
    for said in (ran.out, ran.err, supervised.out, supervised.err):
        assert all(form.decode("latin-1") not in said for form in _forms(secret))
