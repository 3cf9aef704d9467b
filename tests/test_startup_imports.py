"""The read-only commands import only what they use, and print what they printed before.

Each command runs through the real console-script entry point in a fresh
interpreter, with its stdout a pipe (or a terminal), and reports the modules
that were loaded by the time it exited. Timings are for bench/startup.py; this
pins the cause.
"""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestra._cli._console import _PlainWriter
from orchestra._cli._main import is_brief, parse_args
from orchestra._cli._styled import console, print_line

from .support import Repo, failing_policy, forge_env

# Records sys.modules when the command ends, by either way a forge command
# ends: os._exit after a brief command, sys.exit (atexit) after any other.
DRIVER = """
import atexit, os, sys
report = sys.argv.pop(1)
real_exit = os._exit

def record(how):
    import gc
    lines = [f"exit: {how}", f"gc: {gc.isenabled()}", *sorted(sys.modules)]
    with open(report, "w") as handle:
        handle.write("\\n".join(lines))

def exit_now(code):
    record("os._exit")
    real_exit(code)

os._exit = exit_now
atexit.register(record, "atexit")
sys.argv[0] = "forge"
from orchestra._cli._entry import entry
entry()
"""

NEVER = (
    "trio",
    "re2",
    "orchestra._executor",
    "orchestra._supervise._engine",
    "orchestra._supervise._supervisor",
    "orchestra._supervise._dashboard",
    "orchestra._secscan",
    "orchestra._loop",
    "orchestra._gates",
    "orchestra._stagnation",
    "orchestra._ratelimit",
)

READ_ONLY = (
    ("status",),
    ("timeline", "demo"),
    ("spend", "demo"),
    ("circuit", "demo"),
    ("policy", "show"),
    ("policy", "check"),
    ("policy", "dump"),
    ("policy", "schema"),
    ("policy", "diff", "-", "default"),
)


@pytest.fixture
def recorded(repo: Repo) -> Repo:
    """A project with a policy and state for every read-only command to read."""
    failing_policy(repo, max_failures=3)
    repo.commit("policy")
    for args in (
        ("verify", "--change", "demo"),
        ("circuit", "demo", "--reset", "--reason", "reviewed"),
    ):
        done = repo.forge(*args)
        assert done.code == 0, done.err
    assert (repo.change_dir("demo") / "verify-attempts.yaml").is_file()
    assert (repo.change_dir("demo") / "breaker.yaml").is_file()
    return repo


def loaded_modules(
    repo: Repo, args: tuple[str, ...], *, terminal: bool = False
) -> tuple[int, str, set[str]]:
    """Run ``forge args`` and return its exit code, its output and the modules it loaded."""
    report = repo.root.parent / "modules.txt"
    argv = [sys.executable, "-c", DRIVER, str(report), *args]
    if terminal:
        controller, child = pty.openpty()
        # A terminal type that rich colours, whatever the test runner's is.
        env = forge_env({"TERM": "xterm-256color"})
        with subprocess.Popen(
            argv, cwd=repo.root, env=env, stdout=child, stderr=subprocess.DEVNULL
        ) as process:
            os.close(child)
            output = _read_all(controller)
            process.wait(timeout=60)
        code, text = process.returncode, output.decode("utf-8", "replace")
    else:
        done = subprocess.run(
            argv, cwd=repo.root, env=forge_env(), capture_output=True, text=True, timeout=60
        )
        code, text = done.returncode, done.stdout
    return code, text, set(report.read_text().split("\n"))


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _under(modules: set[str], package: str) -> set[str]:
    return {name for name in modules if name == package or name.startswith(package + ".")}


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_read_only_commands_leave_the_heavy_machinery_unimported(
    recorded: Repo, args: tuple[str, ...]
) -> None:
    code, out, modules = loaded_modules(recorded, args)
    assert code == 0
    assert out  # it did its work
    for package in NEVER:
        assert not _under(modules, package), f"forge {' '.join(args)} imported {package}"
    # Output to a pipe is plain text, written without rich.
    assert not _under(modules, "rich")
    # A brief command: no collector, no interpreter teardown.
    assert "exit: os._exit" in modules
    assert "gc: False" in modules


def test_the_driver_runs_forge_as_the_console_script_does(recorded: Repo) -> None:
    for args in READ_ONLY:
        _, out, _ = loaded_modules(recorded, args)
        assert out == recorded.forge(*args).out


def test_other_commands_keep_the_collector_and_the_ordinary_exit(recorded: Repo) -> None:
    code, _, modules = loaded_modules(recorded, ("verify",))
    assert code == 0
    assert "exit: atexit" in modules
    assert "gc: True" in modules


def test_following_a_timeline_is_not_brief() -> None:
    assert is_brief(parse_args(["timeline", "demo"]))
    assert not is_brief(parse_args(["timeline", "demo", "--follow"]))
    assert not is_brief(parse_args(["run", "--cmd", "true"]))


def test_commands_that_need_no_policy_do_not_load_it(recorded: Repo) -> None:
    _, _, timeline = loaded_modules(recorded, ("timeline", "demo"))
    assert not _under(timeline, "cattrs")
    assert not _under(timeline, "yaml")
    _, _, circuit = loaded_modules(recorded, ("circuit", "demo"))
    assert "orchestra._policy._load" not in circuit
    assert "tomllib" not in circuit


def test_a_terminal_gets_rich(recorded: Repo) -> None:
    code, out, modules = loaded_modules(recorded, ("timeline", "demo"), terminal=True)
    assert code == 0
    assert "rich.console" in modules
    assert "verify" in out
    assert "\x1b[" in out  # styled


def test_the_full_parser_still_answers_help_and_typos(recorded: Repo) -> None:
    help_text = recorded.forge("--help")
    assert help_text.code == 0
    assert "timeline" in help_text.out
    assert "supervise" in help_text.out
    typo = recorded.forge("statu")
    assert typo.code == 2
    assert "unknown command 'statu'; did you mean 'status'?" in typo.err


_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["", "\r\n", "a\bb", "\x1b[31mred", "wide 漢字\tx", "…", "\n\n"]
)
_STYLE = st.sampled_from([None, "", "bold", "dim", "red", "cyan"])


@given(st.lists(st.tuples(_TEXT, _STYLE), min_size=1, max_size=4))
def test_plain_lines_are_what_rich_writes(parts: list[tuple[str, str | None]]) -> None:
    ours, theirs = io.StringIO(), io.StringIO()
    _PlainWriter(ours).write(parts)
    print_line(console(theirs, plain=True), parts)
    assert ours.getvalue() == theirs.getvalue()


def test_plain_lines_drop_what_rich_drops() -> None:
    stream = io.StringIO()
    _PlainWriter(stream).write((("a\rb\x07c\x0cd", None), ("\x1b[0m", "bold")))
    assert stream.getvalue() == "abcd\x1b[0m\n"


def test_forge_main_still_returns_the_exit_code(recorded: Repo) -> None:
    script = (
        "import sys; from orchestra._cli._main import main; sys.exit(10 + main(['spend', 'demo']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=recorded.root,
        env=forge_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 10
    assert 'change "demo"' in done.stdout


def test_a_loop_table_leaves_the_policy_hooks_cached() -> None:
    # In a fresh interpreter: the first mapping type cattrs meets is what matters.
    script = """
from orchestra._policy import Policy
from orchestra._policy._converter import POLICY_CONVERTER
from orchestra._policy._schema import structure_file
from orchestra._supervise._loop_tables import LoopTable
hook = POLICY_CONVERTER.get_structure_hook(Policy)
structure_file({"change": "c", "verify": {"command": "true"}}, LoopTable, "loop[0]")
print(POLICY_CONVERTER.get_structure_hook(Policy) is hook)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "True"


def test_status_reads_state_without_yaml_cattrs_or_the_policy_loader(recorded: Repo) -> None:
    recorded.write("other/.keep", "")
    policy = (recorded.root / "forge.toml").read_text()
    recorded.write("forge.toml", policy + '\n[[loop]]\nchange = "far"\ndir = "other"\n')
    far = recorded.root / "other" / ".forge" / "changes" / "far"
    far.mkdir(parents=True)
    (far / "spend.yaml").write_text("tokens: 7\ntool_calls: 1\ncost_usd: 0.5\niterations: 1\n")
    code, out, modules = loaded_modules(recorded, ("status",))
    assert code == 0
    assert "far" in out
    assert "7 tokens, 1 tool calls, $0.5000" in out
    for package in ("yaml", "cattrs", "orchestra._policy._load", "orchestra._policy._model"):
        assert not _under(modules, package), f"forge status imported {package}"


def test_status_still_reports_a_loop_table_it_cannot_read(recorded: Repo) -> None:
    policy = (recorded.root / "forge.toml").read_text()
    recorded.write("forge.toml", policy + '\n[[loop]]\nchange = "Not A Name"\n')
    done = recorded.forge("status")
    assert done.code != 0
    assert "loop[0].change" in done.err
