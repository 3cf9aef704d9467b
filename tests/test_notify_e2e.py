"""``[notify]``: commands and a webhook told when a batch escalates, alerts or ends."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestra._notify import notify_batch
from orchestra._policy import NotifyPolicy
from orchestra._report import gather_report

from .report_support import iter_json_lines, write_run
from .support import Repo


def batch_toml(repo: Repo, notify: str, *, escalating: int = 1) -> str:
    """One loop that finishes, ``escalating`` loops whose verify fails once and escalate."""
    done = repo.root.parent / "done.sh"
    done.write_text("echo working; echo FORGE_DONE\n")
    work = repo.root.parent / "work.sh"
    work.write_text("echo 'still failing: test_total'\n")
    text = (
        '[verify]\ncommand = "true"\nspecs = []\n'
        '[rate_limit]\ncalls = 50\nwindow = "2s"\nbackend = "memory"\n'
        f"{notify}\n"
        f'[[loop]]\nchange = "finishes"\ncmd = "sh {done}"\n'
    )
    for index in range(escalating):
        text += (
            f'[[loop]]\nchange = "escalates-{index}"\ncmd = "sh {work}"\nworktree = true\n'
            '[loop.verify]\ncommand = "exit 1"\nmax_failures = 1\n'
            '[loop.breaker]\non_open = "escalate"\n'
        )
    return text


def summary_of(repo: Repo) -> tuple[Path, dict[str, Any]]:
    [folder] = (repo.root / ".forge" / "runs").iterdir()
    return folder, json.loads((folder / "summary.json").read_text())


def test_the_commands_receive_the_summary(repo: Repo, tmp_path: Path) -> None:
    out = tmp_path / "told"
    out.mkdir()
    notify = (
        "[notify]\n"
        f'on_escalate = "cat > {out}/escalate-$FORGE_CHANGE.json; env > {out}/escalate.env"\n'
        f'on_finish = "cat > {out}/finish.json; env > {out}/finish.env"\n'
    )
    repo.write("forge.toml", batch_toml(repo, notify))
    done = repo.forge("supervise")
    assert done.code == 1, done
    folder, summary = summary_of(repo)
    finish = json.loads((out / "finish.json").read_text())
    assert finish["event"] == "finish"
    assert {k: v for k, v in finish.items() if k not in ("event", "report")} == summary
    assert finish["report"] == {
        "summary": str(folder / "summary.json"),
        "html": str(folder / "report.html"),
        "markdown": str(folder / "report.md"),
    }
    # The escalation was told when the loop stopped, before the batch ended: its
    # loop's line of the summary, the commands that resume it; no file paths (none is
    # written yet, and none will be if the batch is killed).
    escalated = json.loads((out / "escalate-escalates-0.json").read_text())
    assert escalated["event"] == "escalate"
    assert escalated["run_id"] == summary["run_id"]
    [entry] = [loop for loop in summary["loops"] if loop["change"] == "escalates-0"]
    assert {k: v for k, v in escalated["loop"].items() if k in entry} == entry
    assert escalated["loop"]["ending"] == "circuit-open"
    assert "forge circuit escalates-0 --reset --reason WHY" in escalated["loop"]["resume"]
    assert "report" not in escalated
    assert not (out / "escalate-finishes.json").exists()  # a loop that finished is no escalation
    env = dict(
        line.split("=", 1)
        for line in (out / "escalate.env").read_text().splitlines()
        if "=" in line
    )
    assert env["FORGE_EVENT"] == "escalate"
    assert env["FORGE_CHANGE"] == "escalates-0"
    assert env["FORGE_RUN_ID"] == summary["run_id"]
    assert env["FORGE_SUMMARY"] == ""  # not written yet
    assert env["FORGE_REPORT"] == ""
    assert env["FORGE_EXIT_CODE"] == ""  # nor known
    finish_env = (out / "finish.env").read_text()
    assert "FORGE_EVENT=finish\n" in finish_env
    log = (folder / "notify.log").read_text().splitlines()
    assert [line.split(" ", 1)[1].split(" — ")[0] for line in log] == [
        "notify: escalate command sent",
        "notify: finish command sent",
    ]
    finish_env_vars = dict(line.split("=", 1) for line in finish_env.splitlines() if "=" in line)
    assert finish_env_vars["FORGE_REPORT"] == str(folder / "report.html")
    assert finish_env_vars["FORGE_EXIT_CODE"] == "1"
    assert finish_env_vars["FORGE_SUMMARY"] == str(folder / "summary.json")


def test_an_escalation_is_told_while_the_other_loops_still_run(repo: Repo, tmp_path: Path) -> None:
    told = tmp_path / "told.json"
    # The other loop works until the escalation has been told (or 30 s have passed).
    waits = repo.root.parent / "waits.sh"
    waits.write_text(
        f"for i in $(seq 600); do [ -s {told} ] && break; sleep 0.05; done\n"
        f'[ -s {told} ] && echo "saw the notice" && echo FORGE_DONE\n'
    )
    notify = f'[notify]\non_escalate = "cat > {told}.part && mv {told}.part {told}"\n'
    text = batch_toml(repo, notify).replace(f"sh {repo.root.parent / 'done.sh'}", f"sh {waits}")
    repo.write(
        "forge.toml", text.replace('[[loop]]\nchange = "finishes"', '[[loop]]\nchange = "waits"')
    )
    done = repo.forge("supervise", "--plain")
    assert done.code == 1, done
    _, summary = summary_of(repo)
    endings = {loop["change"]: loop["reason"] for loop in summary["loops"]}
    assert endings == {"waits": "done", "escalates-0": "circuit-open"}
    assert json.loads(told.read_text())["loop"]["change"] == "escalates-0"


def _outcome(repo: Repo) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    return _outcome_after(repo, repo.forge("supervise").code)


@pytest.mark.parametrize(
    "command",
    ["echo 'chat is down' >&2; exit 3", "sleep 61.25", "no-such-notifier-command"],
    ids=["failing", "hanging", "missing"],
)
def test_a_failing_or_hanging_notifier_changes_nothing(
    repo: Repo, tmp_path: Path, command: str
) -> None:
    repo.write("forge.toml", batch_toml(repo, "", escalating=0))
    expected = _outcome(repo)
    assert expected[0] == 0
    # The same batch again, from scratch, with a notifier that fails.
    for folder in (repo.root / ".forge" / "runs", repo.root / ".forge" / "changes"):
        for path in sorted(folder.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        folder.rmdir()
    notify = f'[notify]\non_finish = {json.dumps(command)}\ntimeout = "1s"\n'
    repo.write("forge.toml", batch_toml(repo, notify, escalating=0))
    done = repo.forge("supervise")
    code, loops, state = _outcome_after(repo, done.code)
    assert (code, loops, state) == expected
    assert "notify: finish command FAILED" in done.err
    assert "Traceback" not in done.err
    [folder] = (repo.root / ".forge" / "runs").iterdir()
    log = (folder / "notify.log").read_text()
    assert "FAILED" in log
    if command.startswith("sleep"):
        assert "did not finish within 1s; stopped" in log
        assert not _running("sleep 61.25"), "the hanging notifier was left running"
    if command.startswith("echo"):
        assert "exit 3: chat is down" in log


def _outcome_after(repo: Repo, code: int) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    _, summary = summary_of(repo)
    loops = [{k: v for k, v in loop.items() if k != "dir"} for loop in summary["loops"]]
    # The loop's state, but for when it was written and the tree it saw (forge.toml differs).
    moments = ("updated_at", "last_attempt_at", "last_tree", "last_commit")
    state = {
        path.name: {k: v for k, v in yaml.safe_load(path.read_text()).items() if k not in moments}
        for path in (repo.root / ".forge" / "changes" / "finishes").glob("*.yaml")
    }
    return code, loops, state


def _running(needle: str) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if needle in cmdline and "pytest" not in cmdline:
                return True
    return False


class _Recorder(BaseHTTPRequestHandler):
    posts: list[tuple[str, dict[str, Any]]]
    status = 200

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.posts.append((self.headers.get("X-Forge-Event", ""), body))
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        del format, args


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]], type[_Recorder]]]:
    posts: list[tuple[str, dict[str, Any]]] = []
    handler = type("Handler", (_Recorder,), {"posts": posts, "status": 200})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", posts, handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_the_webhook_posts_once_per_event(
    repo: Repo, server: tuple[str, list[tuple[str, dict[str, Any]]], type[_Recorder]]
) -> None:
    url, posts, _ = server
    repo.write("forge.toml", batch_toml(repo, f'[notify]\nwebhook = "{url}"\n', escalating=2))
    done = repo.forge("supervise")
    assert done.code == 1, done
    _, summary = summary_of(repo)
    assert sorted(header for header, _ in posts) == ["escalate", "escalate", "finish"]
    assert all(header == body["event"] for header, body in posts)
    escalated = sorted(body["loop"]["change"] for _, body in posts if body["event"] == "escalate")
    assert escalated == ["escalates-0", "escalates-1"]
    assert all(body["run_id"] == summary["run_id"] for _, body in posts)


def test_a_webhook_that_refuses_is_logged_not_fatal(
    repo: Repo, server: tuple[str, list[tuple[str, dict[str, Any]]], type[_Recorder]]
) -> None:
    url, posts, handler = server
    handler.status = 500
    repo.write("forge.toml", batch_toml(repo, f'[notify]\nwebhook = "{url}"\n', escalating=0))
    done = repo.forge("supervise")
    assert done.code == 0, done
    assert len(posts) == 1
    assert f"notify: finish webhook FAILED — {url} answered 500" in done.err


def test_each_alert_raised_is_sent_once(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    run_id = "20261130T220000Z-ab12"
    write_run(root, run_id, 12)
    report = gather_report(root, run_id)
    raised = [(loop.change, notice.name) for loop in report.loops for notice in loop.alerts]
    told = tmp_path / "told.jsonl"
    policy = NotifyPolicy(on_alert=f"cat >> {told}; echo >> {told}")
    summary = json.loads((root / ".forge" / "runs" / run_id / "summary.json").read_text())
    said: list[str] = []
    deliveries = notify_batch(
        policy, summary, report, root=root, run_folder=tmp_path / "run", files={}, say=said.append
    )
    assert said == []
    alerts = list(iter_json_lines(told))
    expected = [change for change, name in raised if name == "alert.raised"]
    assert expected, "the synthetic run has alerts"
    assert [body["alert"]["change"] for body in alerts] == expected
    assert all(
        body["event"] == "alert" and body["alert"]["name"] == "alert.raised" for body in alerts
    )
    assert [d.event for d in deliveries] == ["alert"] * len(expected)


def test_the_notify_table_is_checked(repo: Repo) -> None:
    repo.write("forge.toml", '[notify]\nwebhook = "ftp://example.com"\n')
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "notify.webhook: expected an http:// or https:// URL" in done.err
    assert os.linesep.join(done.err.splitlines()).count("Traceback") == 0


def test_alerts_are_told_as_they_are_raised_and_once(repo: Repo, tmp_path: Path) -> None:
    told = tmp_path / "alerts.jsonl"
    idle = repo.root.parent / "idle.sh"
    idle.write_text("echo 'looking around'\n")
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        '[breaker]\non_open = "escalate"\n[alerts]\nno_files = 2\nno_tasks = 2\n'
        f'[notify]\non_alert = "cat >> {told}; echo >> {told}"\n'
        f'[[loop]]\nchange = "idle"\ncmd = "sh {idle}"\nmax_iterations = 4\n',
    )
    done = repo.forge("supervise", "--plain")
    assert done.code == 1, done
    timeline = [
        json.loads(line)
        for line in (repo.change_dir("idle") / "timeline.jsonl").read_text().splitlines()
    ]
    raised = [(e["alert"], e["iteration"]) for e in timeline if e["event"] == "alert.raised"]
    assert ("no-files", 2) in raised
    bodies = list(iter_json_lines(told))
    assert sorted((b["alert"]["name"], b["alert"]["text"]) for b in bodies) == sorted(
        (e["alert"], e["detail"]) for e in timeline if e["event"] == "alert.raised"
    )
    assert all(b["event"] == "alert" and b["alert"]["change"] == "idle" for b in bodies)


def test_a_batch_wide_alert_is_told_once_and_a_repeated_one_after_a_quiet_time(
    tmp_path: Path,
) -> None:
    from orchestra import Duration
    from orchestra._notify import LiveNotices

    told = tmp_path / "told.jsonl"
    policy = NotifyPolicy(on_alert=f"cat >> {told}; echo >> {told}", alert_quiet=Duration(30 * 60))
    live = LiveNotices(policy, root=tmp_path, run_folder=tmp_path / "run", run_id="r")
    raises = [  # (seconds into the batch, loop, alert)
        (10, "a", "calls-remaining"),
        (12, "b", "calls-remaining"),  # the same shared window: not told again
        (20, "a", "no-files"),
        (80, "a", "no-files"),  # raised again after a clear, within the quiet time
        (90, "b", "no-files"),  # another loop's own alert
        (400, "a", "calls-remaining"),
        (20 + 30 * 60, "a", "no-files"),  # the quiet time has passed
    ]
    for now, change, name in raises:
        if live.worth_telling(change, "/repo", name, now):
            live.alert(change, "/repo", name, f"{name} on {change} at {now}")
    bodies = [body["alert"]["text"] for body in iter_json_lines(told)]
    assert bodies == [
        "calls-remaining on a at 10",
        "no-files on a at 20",
        "no-files on b at 90",
        "no-files on a at 1820",
    ]


def test_the_escalation_card_says_each_alert_once() -> None:
    from orchestra._report import LoopFacts, build_report, render_html, render_markdown
    from orchestra._state import AlertCleared, AlertRaised, RunStarted, RunStopped

    run = "20261130T220000Z-ab12"
    events = [
        RunStarted(run_id=run, supervised=True),
        AlertRaised(run_id=run, iteration=1, alert="calls-remaining", detail="2 of 10 left"),
        AlertCleared(run_id=run, iteration=2, alert="calls-remaining"),
        AlertRaised(run_id=run, iteration=3, alert="calls-remaining", detail="1 of 10 left"),
        AlertCleared(run_id=run, iteration=3, alert="calls-remaining"),
        AlertRaised(run_id=run, iteration=3, alert="no-files", detail="3 idle iterations"),
        RunStopped(run_id=run, reason="circuit-open", iterations=3),
    ]
    report = build_report(run, None, [LoopFacts("c", "/repo", events)], root="/repo")
    markdown = render_markdown(report)
    # The loop's own alert on its card; the batch-wide one once, for the batch.
    assert "- Alerts: no-files: raised, at iteration 3, still holding (3 idle iterations)\n" in (
        markdown
    )
    assert "- Batch alert: calls-remaining: raised 2× (by c), cleared\n" in markdown
    assert markdown.count("calls-remaining") == 1
    html = render_html(report)
    assert "<dd>calls-remaining: raised 2× (by c), cleared</dd>" in html
    assert "<dd>no-files: raised, at iteration 3, still holding (3 idle iterations)</dd>" in html
