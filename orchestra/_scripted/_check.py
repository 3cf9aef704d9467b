"""``forge executors check``: the installed agent CLI, run by Forge against a scripted server.

Before a night, a user wants to know that the CLI on this machine still works
with Forge: an upgrade that renamed a flag, changed its output or stopped
honouring a hook should be a clear message at 6 pm, not a failed batch at
3 am. The check runs the executor exactly as a loop would — ``forge run
--executor NAME`` in a scratch git repository, with the project's own
definition when it has one — but with the CLI pointed at a scripted model
server on loopback (no key, no network, no cost) that asks it to write a
file, run a shell command and, where the definition passes Forge's hooks,
delete a protected file; then it reads what happened:

- **flags accepted**: the CLI started and called the model;
- **edits permitted**: the file the model asked for was written;
- **shell commands run**: the command's output came back to the model;
- **hooks honoured**: the delete was refused inside the CLI, the file is there;
- **output parsed**: the iteration ended done, as the model said;
- **tokens read**: the tokens the server reported reached the timeline.

The judging (:func:`judge_run`, :func:`judge_guard`) is pure: it reads the
finished run's record, never the processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._executor import Executor
from ._profile import CliProfile, profile_for
from ._script import Conversation, Reply, RunShell, Script, Usage, WriteFile
from ._server import Recorded, ScriptedServer

OK = "ok"
FAILED = "failed"
SKIPPED = "skipped"  # does not apply to this executor (no hooks), or could not be tried

CHANGE = "forge-check"
EDIT_PATH = "forge-check.txt"
EDIT_TEXT = "written by the agent for forge executors check\n"
# Only a shell that ran it prints the answer (the command's text does not hold
# it), so seeing it proves the command ran. No command substitution: Gemini CLI
# refuses any.
SHELL_COMMAND = "printf 'forge-check-%s%s\\n' 4 2"
SHELL_ANSWER = "forge-check-42"
GUARDED_COMMAND = "rm forge.toml"
USAGE = Usage(input=100, output=20)
_TIMEOUT = 240.0  # seconds for one forge run of the check
_GRACE = 10.0  # then its whole process tree is killed
# How each guard's refusal reads, as the CLI hands it to the model.
_REFUSED_BY_FORGE = re.compile(r"forge(?:'s)? (?:guard|hook pre-tool-use)", re.IGNORECASE)
# What of the user's environment the CLI may see: nothing that names an
# account or a cloud (the CLI must reach the scripted server, never a provider).
_KEPT = ("PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL")
_KEPT_PREFIXES = ("LC_", "SSL_CERT_", "NODE_EXTRA_CA_CERTS")
_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-.][0-9A-Za-z.]+)?")


@attrs.frozen
class Check:
    """One line of the table: what was checked, and what was seen."""

    name: str
    status: str  # OK, FAILED or SKIPPED
    detail: str


@attrs.frozen
class ExecutorCheck:
    """Everything checked of one executor."""

    executor: str
    version: str | None  # the installed CLI's release, when it says
    proven: str | None  # the release Forge proved the definition with
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(check.status != FAILED for check in self.checks)


@attrs.frozen
class RunSeen:
    """What one ``forge run`` of the check left: its summary, events and the server's log."""

    code: int
    summary: Mapping[str, Any] | None
    finished: Sequence[Mapping[str, Any]]  # iteration.finished events
    events: Sequence[str]  # every event's name, in order
    requests: Sequence[Recorded]  # the agent loop's requests to the server
    problems: Sequence[str]
    stderr: str
    edited: str | None  # the text of the file the model asked for, when written
    protected_there: bool  # forge.toml after the run


def edit_script() -> Script:
    """Write a file, run a shell command, say done."""
    return Script(
        (
            Conversation(
                (
                    Reply(calls=(WriteFile(EDIT_PATH, EDIT_TEXT),), usage=USAGE),
                    Reply(calls=(RunShell(SHELL_COMMAND),), usage=USAGE),
                    Reply(text="Checked.\nFORGE_DONE", usage=USAGE),
                )
            ),
        )
    )


def guard_script() -> Script:
    """Try to delete a protected file, then say done."""
    return Script(
        (
            Conversation(
                (
                    Reply(calls=(RunShell(GUARDED_COMMAND),), usage=USAGE),
                    Reply(text="Stopped.\nFORGE_DONE", usage=USAGE),
                )
            ),
        )
    )


def judge_run(seen: RunSeen) -> list[Check]:
    """The checks of the edit-and-shell run."""
    checks = [_flags(seen)]
    if not seen.requests:
        return checks  # nothing else can be judged
    checks.append(
        Check("edits permitted", OK, f"wrote {EDIT_PATH}")
        if seen.edited == EDIT_TEXT
        else Check(
            "edits permitted",
            FAILED,
            f"{EDIT_PATH} was not written as asked"
            + (" (it was written otherwise)" if seen.edited is not None else ""),
        )
    )
    answers = " ".join(text for request in seen.requests for text in _tool_results(request))
    checks.append(
        Check("shell commands run", OK, f"`{SHELL_COMMAND}` answered {SHELL_ANSWER}")
        if SHELL_ANSWER in answers
        else Check(
            "shell commands run",
            FAILED,
            f"`{SHELL_COMMAND}` did not run at this permission level: "
            + (_first_line(answers) or "no tool result came back"),
        )
    )
    checks.append(_parsed(seen))
    checks.append(_tokens(seen))
    return checks


def judge_guard(seen: RunSeen) -> Check:
    """The hook check: the protected file must be there, refused inside the CLI."""
    answers = " ".join(text for request in seen.requests for text in _tool_results(request))
    harmed = "protect.violation" in seen.events
    if not seen.requests:
        return Check("hooks honoured", FAILED, "the CLI made no request in the guard run")
    if seen.protected_there and not harmed and _REFUSED_BY_FORGE.search(answers):
        return Check("hooks honoured", OK, f"`{GUARDED_COMMAND}` refused by Forge's guard")
    if seen.protected_there and not harmed:
        return Check(
            "hooks honoured",
            FAILED,
            f"`{GUARDED_COMMAND}` was refused, but not by Forge's guard (the CLI's own "
            f"permissions?): {_first_line(answers) or 'no tool result came back'}",
        )
    return Check(
        "hooks honoured",
        FAILED,
        f"`{GUARDED_COMMAND}` ran inside the CLI (Forge restored the file after the "
        f"iteration): the hooks were not honoured. The CLI answered: {_first_line(answers)}",
    )


def _flags(seen: RunSeen) -> Check:
    if seen.requests:
        return Check(
            "flags accepted", OK, f"the CLI called the model ({len(seen.requests)} request(s))"
        )
    last = _last_line(seen)
    return Check(
        "flags accepted",
        FAILED,
        "the CLI never called the model: its flags or settings may have changed"
        + (f" — {last}" if last else ""),
    )


def _parsed(seen: RunSeen) -> Check:
    summary = seen.summary or {}
    reason = summary.get("reason")
    if reason == "done":
        return Check("output parsed", OK, "the iteration ended done, as the model said")
    note = next((e.get("parse_note") for e in seen.finished if e.get("parse_note")), None)
    error = next((e.get("error") for e in seen.finished if e.get("error")), None)
    detail = f"the run ended {reason or 'without a summary'}"
    if note:
        detail += f": {note}"
    elif error:
        detail += f": {_first_line(str(error))}"
    return Check("output parsed", FAILED, detail)


def _tokens(seen: RunSeen) -> Check:
    replies = sum(1 for request in seen.requests if request.served == "reply")
    expected = replies * (USAGE.input + USAGE.output)
    tokens = sum(int(e.get("tokens") or 0) for e in seen.finished)
    if expected and tokens >= expected:
        return Check("tokens read", OK, f"{tokens} tokens (the server reported {expected})")
    return Check(
        "tokens read",
        FAILED,
        f"{tokens} tokens in the timeline; the server reported {expected}",
    )


def _tool_results(request: Recorded) -> tuple[str, ...]:
    return request.exchange.tool_results if request.exchange is not None else ()


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0][:300] if stripped else ""


def _last_line(seen: RunSeen) -> str:
    """What the CLI said last: its reported error, its last output line, or forge's."""
    for event in reversed(seen.finished):
        if event.get("error"):
            return _first_line(str(event["error"]))
    last = (seen.summary or {}).get("last_iteration") or {}
    said = [str(line) for line in last.get("last_lines") or () if str(line).strip()]
    if said:
        failure = f"{last['failure']}: " if last.get("failure") else ""
        return f"{failure}{said[-1].strip()[:300]}"
    lines = [line for line in seen.stderr.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def installed_version(version_argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The release the CLI says it is (``claude --version``), or None."""
    try:
        done = subprocess.run(
            list(version_argv),
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION.search(done.stdout + done.stderr)
    return found.group(0) if found else None


def check_executor(executor: Executor, project_root: Path, permission: str = "") -> ExecutorCheck:
    """Run every check of ``executor`` against its CLI as installed on this machine."""
    profile = profile_for(executor.name)
    cli = executor.spec.cli
    proven = cli.proven if cli is not None else None
    if profile is None:
        return ExecutorCheck(
            executor.name,
            None,
            proven,
            (Check("scripted server", SKIPPED, "Forge has no scripted server for this CLI"),),
        )
    program = executor.spec.argv[0]
    if shutil.which(program) is None:
        detail = f"{program!r} is not on PATH"
        if cli is not None:
            detail += f" (install it: npm install -g {cli.package}@{proven})"
        return ExecutorCheck(executor.name, None, proven, (Check("installed", FAILED, detail),))
    version_argv = cli.version_argv if cli is not None else (program, "--version")
    with tempfile.TemporaryDirectory(prefix="forge-check-") as scratch:
        base = Path(scratch)
        env = {**_kept_environment(), **profile.environment("http://127.0.0.1:1", base / "home")}
        version = installed_version(version_argv, env)
        checks = [_version_check(version, proven)]
        run = _Runner(executor, profile, project_root, permission)
        seen = run(base / "edit", edit_script())
        checks.extend(judge_run(seen))
        if executor.guarded_inside and seen.requests:
            guarded = run(base / "guard", guard_script())
            checks.append(judge_guard(guarded))
        elif not executor.guarded_inside:
            checks.append(
                Check(
                    "hooks honoured",
                    SKIPPED,
                    "the definition passes no hooks to this CLI: Forge's guard cannot refuse "
                    "a command inside it (harm is restored after each iteration)",
                )
            )
    return ExecutorCheck(executor.name, version, proven, tuple(checks))


def _version_check(version: str | None, proven: str | None) -> Check:
    if version is None:
        return Check("version", FAILED, "the CLI did not say which release it is")
    if proven is None or version == proven:
        return Check("version", OK, version + (" (the proven release)" if proven else ""))
    return Check("version", OK, f"{version} (Forge proved {proven}; checked here instead)")


@attrs.frozen
class _Runner:
    """Runs ``forge run --executor NAME`` once in a scratch repository against a script."""

    executor: Executor
    profile: CliProfile
    project_root: Path
    permission: str

    def __call__(self, repo: Path, script: Script) -> RunSeen:
        return _run(self, repo, script)


def _run(runner: _Runner, repo: Path, script: Script) -> RunSeen:
    executor, profile, permission = runner.executor, runner.profile, runner.permission
    _scratch_repository(repo, executor, runner.project_root)
    with ScriptedServer(profile.provider(), script) as server:
        env = {**_kept_environment(), **profile.environment(server.url, repo.parent / "home")}
        argv = [sys.executable, "-m", "orchestra", "run", "--change", CHANGE]
        argv += ["--executor", executor.name, "--max-iterations", "1", "--yes", "--json"]
        argv += ["--prompt", "Run the scripted check; print FORGE_DONE when done."]
        if permission:
            argv += ["--set", f"run.permission={permission}"]
        code, stdout, stderr = _forge_run(argv, repo, env)
        requests = server.main_exchanges()
        problems = list(server.problems)
    return _seen(repo, code, stdout, stderr, requests, problems)


def _kept_environment() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if key in _KEPT or key.startswith(_KEPT_PREFIXES)
    }


def _forge_run(argv: list[str], repo: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """Run the check's ``forge run`` to its end; past the time limit, stop its whole tree."""
    process = subprocess.Popen(
        argv,
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its executor's tree goes with it
    )
    try:
        stdout, stderr = process.communicate(timeout=_TIMEOUT)
        return process.returncode, stdout, stderr
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, _GRACE), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        return -1, "", f"the check's forge run took longer than {_TIMEOUT:.0f}s and was stopped"


def _seen(
    repo: Path,
    code: int,
    stdout: str,
    stderr: str,
    requests: list[Recorded],
    problems: list[str],
) -> RunSeen:
    try:
        summary = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        summary = None
    events = _events(repo / ".forge" / "changes" / CHANGE / "timeline.jsonl")
    edited = repo / EDIT_PATH
    return RunSeen(
        code=code,
        summary=summary if isinstance(summary, dict) else None,
        finished=[e for e in events if e.get("event") == "iteration.finished"],
        events=[str(e.get("event")) for e in events],
        requests=requests,
        problems=problems,
        stderr=stderr,
        edited=edited.read_text(encoding="utf-8", errors="replace") if edited.is_file() else None,
        protected_there=(repo / "forge.toml").is_file(),
    )


def _events(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


_CHECK_POLICY = """\
# The policy of forge executors check's scratch repository.
[verify]
command = "true"
[run]
timeout = "3m"
grace = "2s"
[rate_limit]
backend = "memory"
[secscan]
enabled = false
"""


def _scratch_repository(repo: Path, executor: Executor, project_root: Path) -> None:
    """A git repository with a forge.toml, and the project's own definition when it has one."""
    repo.mkdir(parents=True)
    (repo / "forge.toml").write_text(_CHECK_POLICY, encoding="utf-8")
    own = project_root / "executors" / f"{executor.name}.toml"
    if own.is_file():
        (repo / "executors").mkdir()
        shutil.copyfile(own, repo / "executors" / own.name)
    git = ["git", "-c", "user.email=check@forge.invalid", "-c", "user.name=forge check"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "forge executors check"]):
        subprocess.run([*git, *args], cwd=repo, capture_output=True, check=False)
