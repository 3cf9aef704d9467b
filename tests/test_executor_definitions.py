"""Executor definitions and the FORGE_REPORT file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestra._errors import ConfigError
from orchestra._executor import ExecutorReport, load_executor, read_report, shell_command
from orchestra._shipped import shipped_names

VALUES = {
    "prompt": "fix the cart",
    "change": "checkout",
    "iteration": "2",
    "max_iterations": "5",
    "state_dir": "/s",
    "report": "/s/r.json",
    "workdir": "/w",
}


@pytest.mark.parametrize("name", ["claude", "codex", "gemini", "shell"])
def test_shipped_executors_load(name: str, tmp_path: Path) -> None:
    assert name in shipped_names("executors")
    executor = load_executor(name, tmp_path)
    argv = executor.argv(VALUES)
    assert "fix the cart" in argv


def test_shell_command_is_not_templated() -> None:
    executor = shell_command("echo ${HOME} {a,b}")
    assert executor.argv(VALUES) == ["sh", "-c", "echo ${HOME} {a,b}"]
    assert executor.describe(VALUES) == 'sh -c "echo ${HOME} {a,b}"'


def test_literal_braces_in_a_template(tmp_path: Path) -> None:
    (tmp_path / "executors").mkdir()
    (tmp_path / "executors" / "mine.toml").write_text(
        'argv = ["agent", "--json={{\\"change\\": \\"{change}\\"}}"]\n'
    )
    executor = load_executor("mine", tmp_path)
    assert executor.argv(VALUES) == ["agent", '--json={"change": "checkout"}']


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("argv = []\n", "argv: expected a non-empty list"),
        ('argv = ["a", "{nope}"]\n', "argv[1]: expected only the placeholders"),
        ('argv = ["a", "{unbalanced"]\n', "argv[1]: expected only the placeholders"),
        ('argv = ["a"]\ntimeout = "soon"\n', "timeout: expected a duration"),
        ('argv = ["a"]\nenv = {X = 1}\n', "env"),
        ("argv = [\n", "cannot read the executor definition"),
    ],
)
def test_invalid_definitions_name_file_and_key(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "executors").mkdir()
    (tmp_path / "executors" / "bad.toml").write_text(body)
    with pytest.raises(ConfigError) as caught:
        load_executor("bad", tmp_path)
    assert message in caught.value.render()


def test_unknown_and_invalid_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no executor named 'nope'"):
        load_executor("nope", tmp_path)
    with pytest.raises(ConfigError, match="invalid executor name"):
        load_executor("../claude", tmp_path)


def test_report_with_every_key(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"done": true, "tokens": 5, "tool_calls": 2, "cost_usd": 1, "summary": "ok"}')
    assert read_report(path) == (
        ExecutorReport(done=True, tokens=5, tool_calls=2, cost_usd=1.0, summary="ok"),
        [],
    )


def test_a_summary_is_redacted_before_it_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    token = "ghp_" + "a1B2c3D4e5" * 4  # straddles the cut at 2000 characters
    path.write_text(json.dumps({"summary": "x" * 1990 + token}))
    report, _ = read_report(path, lambda text: text.replace(token, "[REDACTED]"))
    assert report is not None
    assert report.summary == "x" * 1990 + "[REDACTED]"


def test_report_absent_is_no_report(tmp_path: Path) -> None:
    assert read_report(tmp_path / "missing.json") == (None, [])


@pytest.mark.parametrize(
    ("text", "expected", "problem"),
    [
        ('{"done": "yes", "tokens": 3}', ExecutorReport(tokens=3), "'done'"),
        ('{"tokens": -1}', ExecutorReport(), "'tokens'"),
        ('{"tokens": 1.5}', ExecutorReport(), "'tokens'"),
        ('{"tool_calls": true}', ExecutorReport(), "'tool_calls'"),
        ('{"cost_usd": "1"}', ExecutorReport(), "'cost_usd'"),
        ('{"summary": 4}', ExecutorReport(), "'summary'"),
    ],
)
def test_report_keys_of_the_wrong_type_are_ignored_and_noted(
    tmp_path: Path, text: str, expected: ExecutorReport, problem: str
) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    report, problems = read_report(path)
    assert report == expected
    assert len(problems) == 1
    assert problem in problems[0]


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"done": tr', ""])
def test_a_report_that_is_not_an_object_is_ignored(tmp_path: Path, text: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    report, problems = read_report(path)
    assert report is None
    assert problems


def test_a_level_the_cli_refuses_to_root_is_refused_for_root_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    full = load_executor("claude", tmp_path).with_permission("full", "[run] permission")
    assert full.spec.not_as_root == ("full",)
    full.refuse_root("[run] permission", euid=1000)  # another user: as it is
    with pytest.raises(ConfigError, match="cannot run at level 'full' as root") as refused:
        full.refuse_root("[run] permission", euid=0)
    assert "edit, edit-and-run, read-only" in refused.value.message
    assert "IS_SANDBOX=1" in refused.value.message
    # Every other level runs as root, and the CLI's own override is honoured.
    load_executor("claude", tmp_path).refuse_root("[run] permission", euid=0)
    monkeypatch.setenv("IS_SANDBOX", "1")
    full.refuse_root("[run] permission", euid=0)


def test_not_as_root_names_permission_levels(tmp_path: Path) -> None:
    (tmp_path / "executors").mkdir()
    (tmp_path / "executors" / "x.toml").write_text(
        'argv = ["x"]\nnot_as_root = ["full"]\n[permissions]\nedit = []\n'
    )
    with pytest.raises(ConfigError) as refused:
        load_executor("x", tmp_path)
    assert "not_as_root" in refused.value.render()
