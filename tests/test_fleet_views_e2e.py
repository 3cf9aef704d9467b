"""A fleet batch seen as a batch: its report, status, notices and live view, on real Redis."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from .fleet_support import (
    Fleet,
    fleet_of,
    git_repo,
    kill_worker,
    read_stamps,
    stamping_agent,
    wait_for,
)
from .redis_server import RedisServer
from .support import FORGE, forge_env, run_forge


def two_loop_batch(fleet: Fleet, extra: str = "") -> str:
    """``v1`` ends done at its first iteration; ``v2`` uses up its two iterations (escalated)."""
    done = stamping_agent(fleet.tmp, "done", fleet.stamps, {"print": "FORGE_DONE\n"})
    busy = stamping_agent(
        fleet.tmp, "busy", fleet.stamps, {"print": "working\n"}, {"print": "working\n"}
    )
    lines = ["[verify]", 'command = "true"', "specs = []", extra]
    for change, agent, most in (("v1", done, 4), ("v2", busy, 2)):
        folder = git_repo(fleet.tmp / "loops" / change)
        lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
        lines += [f"cmd = {json.dumps(agent)}", f"max_iterations = {most}"]
    return "\n".join(lines) + "\n"


def run_batch(fleet: Fleet, batch: str, hosts: tuple[str, ...] = ("w1",)) -> list[int]:
    submitted = fleet.submit(batch)
    assert submitted.code == 0, submitted
    for host in hosts:
        fleet.spawn(host, max_parallel=2)
    return fleet.wait_all()


def test_the_report_of_a_fleet_batch_from_the_server_and_from_an_export(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        assert run_batch(fleet, two_loop_batch(fleet)) == [1], fleet.output("w1")
        endings = {c: loop["reason"] for c, loop in fleet.status()["loops"].items()}
        assert endings["v1"] == "done"
        assert endings["v2"] != "done"

        # forge status: every loop of the batch, from the server, with who needs a person.
        seen = fleet.forge("status", "--json")
        assert seen.code == 0, seen
        rows = {row["change"]: row for row in json.loads(seen.out)["changes"]}
        assert rows["v1"]["standing"] == "done"
        assert rows["v1"]["host"] == "w1"
        assert rows["v1"]["iterations_used"] == 1
        assert rows["v2"]["standing"] == "needs you"
        assert rows["v2"]["fleet_state"] == "escalated"
        assert rows["v2"]["iterations_used"] == 2
        assert json.loads(seen.out)["headline"].startswith("2 loops: 1 needs you")
        text_view = fleet.forge("status")
        assert 'fleet "nightly": 2 loops: 1 needs you' in text_view.out
        assert "v2  escalated on w1" in text_view.out
        assert "  blocker:  " in text_view.out

        # In the host's folder (its runs are a host's summaries): from the server.
        done = fleet.forge("report", "--json")
        assert done.code == 0, done
        shown = json.loads(done.out)
        assert shown["fleet"] == "nightly"
        html, markdown = Path(shown["html"]), Path(shown["markdown"])
        assert html.is_file()
        assert markdown.is_file()
        assert html.parent == fleet.host_dir / ".forge" / "runs" / shown["run_id"]
        text = markdown.read_text()
        assert "v1" in text
        assert "v2" in text
        assert endings["v2"] in text
        assert f"{tmp_path / 'loops' / 'v2'} (last on host w1)" in text
        assert "forge timeline --fleet v2\nforge status --fleet\n" in text
        # The fleet's own control runs it again: its reset puts it back in the queue.
        assert "forge circuit v2 --reset --reason WHY --fleet" in text
        assert "forge supervise --only" not in text
        assert {loop["change"]: loop["ending"] for loop in shown["loops"]} == endings
        assert shown["outcome"].startswith("NEEDS A PERSON — 1 of 2 loop(s) escalated, 1 done")
        # The loop's every iteration is in the page, read from the server's streams.
        assert "<html" in html.read_text()

        # On a machine that ran none of it: no .forge/ at all, the server named.
        laptop = tmp_path / "laptop"
        laptop.mkdir()
        (laptop / "forge.toml").write_text((fleet.host_dir / "forge.toml").read_text())
        fresh = run_forge(["report", "--json"], cwd=laptop, env=fleet.env(), timeout=60)
        assert fresh.code == 0, fresh
        assert json.loads(fresh.out)["run_id"] == shown["run_id"]
        assert (laptop / ".forge" / "runs" / shown["run_id"] / "report.md").is_file()

        # From an export, on a machine that never ran the batch (no server named).
        elsewhere = tmp_path / "morning"
        elsewhere.mkdir()
        exported = fleet.forge("fleet", "export", "--to", str(elsewhere))
        assert exported.code == 0, exported
        summaries = list((elsewhere / ".forge" / "runs").glob("*/summary.json"))
        assert [p.parent.name for p in summaries] == [shown["run_id"]]
        for where in (["--from", str(elsewhere)], []):
            local = run_forge(["report", "--json", *where], cwd=elsewhere, env={}, timeout=60)
            assert local.code == 0, local
            again = json.loads(local.out)
            assert again["run_id"] == shown["run_id"]
            assert {loop["change"]: loop["ending"] for loop in again["loops"]} == endings
            assert again["outcome"] == shown["outcome"]
            assert Path(again["html"]).is_file()
            assert Path(again["html"]).parent == elsewhere / ".forge" / "runs" / shown["run_id"]
            exported_text = Path(again["markdown"]).read_text()
            assert endings["v2"] in exported_text
            assert "forge timeline --fleet v2" in exported_text


def test_a_fleet_report_with_nothing_submitted_is_a_usage_error(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        done = fleet.forge("report", "--fleet")
        assert done.code == 2, done
        assert 'nothing is submitted under the fleet name "nightly"' in done.err
        missing = fleet.forge("report", "--from", str(tmp_path / "nowhere"))
        assert missing.code == 2, missing
        assert f"--from {tmp_path / 'nowhere'}: no such folder" in missing.err
        both = fleet.forge("report", "--fleet", "--from", str(tmp_path))
        assert both.code == 2, both
        assert "--fleet and --from: one or the other" in both.err
        for said in (done, missing, both):
            assert "Traceback" not in said.err
        # forge status with nothing submitted: this host's files (none).
        status = fleet.forge("status", "--fleet")
        assert status.code == 0, status
        assert 'fleet "nightly": nothing submitted' in status.out


def notify_table(folder: Path) -> str:
    """``[notify]`` commands that append each notice's JSON to a file of its event."""
    lines = ["[notify]", 'timeout = "10s"']
    for event in ("finish", "escalate", "alert"):
        lines.append(
            f'on_{event} = "cat >> {folder}/{event}.jsonl; echo >> {folder}/{event}.jsonl"'
        )
    return "\n".join(lines) + "\n"


def notices(folder: Path, event: str) -> list[dict[str, Any]]:
    path = folder / f"{event}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_end_of_a_fleet_batch_is_told_once_whatever_the_number_of_hosts(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    told = tmp_path / "told"
    told.mkdir()
    with fleet_of(tmp_path, redis_server) as fleet:
        with (fleet.host_dir / "forge.toml").open("a") as config:
            config.write(notify_table(told))
        codes = run_batch(fleet, two_loop_batch(fleet), hosts=("w1", "w2"))
        assert codes == [1, 1], [fleet.output(h) for h in ("w1", "w2")]
        [finish] = notices(told, "finish")
        assert finish["event"] == "finish"
        assert finish["fleet"] == "nightly"
        assert finish["exit_code"] == 1
        assert {e["change"]: e["state"] for e in finish["loops"]} == {
            "v1": "done",
            "v2": "escalated",
        }
        [escalate] = notices(told, "escalate")
        assert escalate["loop"]["change"] == "v2"
        # The report it names was written on the host that told, before telling.
        assert Path(finish["report"]["html"]).is_file()
        senders = [h for h in ("w1", "w2") if "report: " in fleet.output(h)]
        assert len(senders) == 1, [fleet.output(h) for h in ("w1", "w2")]


def test_a_lost_host_is_told_once_by_the_hosts_that_survive_it(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    told = tmp_path / "told"
    told.mkdir()
    with fleet_of(tmp_path, redis_server, lease="2s", heartbeat="0.3s") as fleet:
        with (fleet.host_dir / "forge.toml").open("a") as config:
            config.write(notify_table(told))
        agent = stamping_agent(tmp_path, "slow", fleet.stamps, {"hold": 3, "print": "FORGE_DONE\n"})
        lines = ["[verify]", 'command = "true"', "specs = []"]
        for change in ("l1", "l2", "l3"):
            folder = git_repo(tmp_path / "loops" / change)
            lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
            lines.append(f"cmd = {json.dumps(agent)}")
        assert fleet.submit("\n".join(lines) + "\n").code == 0
        doomed = fleet.spawn("w1", max_parallel=1)
        wait_for(lambda: bool(read_stamps(fleet.stamps)), what="w1's first iteration")
        fleet.spawn("w2", max_parallel=1)
        fleet.spawn("w3", max_parallel=1)
        kill_worker(doomed)
        wait_for(lambda: fleet.status()["hosts"]["w1"]["state"] == "lost", what="w1 lost")
        # The live view, in a log (not a terminal): whole frames, the notice among them.
        watched = fleet.forge("fleet", "status", "--watch", "--count", "2")
        assert watched.code == 0, watched
        assert watched.out.count("permits: ") >= 1
        assert "! host w1 is LOST: no heartbeat for " in watched.out
        assert any(line.startswith("  w1 ") and " LOST " in line for line in watched.lines)
        codes = fleet.wait_all()
        assert codes[1:] == [0, 0], [fleet.output(h) for h in ("w2", "w3")]
        alerts = [a for a in notices(told, "alert") if a["alert"]["name"] == "host-lost"]
        assert len(alerts) == 1, alerts
        assert alerts[0]["alert"]["text"].startswith("host w1 is lost: no heartbeat for ")
        # Each survivor said so on its own output; one of them told [notify].
        for host in ("w2", "w3"):
            assert "fleet: host w1 is lost" in fleet.output(host)
        assert len(notices(told, "finish")) == 1


def test_the_live_view_on_a_terminal_redraws_until_ctrl_c(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server, lease="2s", heartbeat="0.3s") as fleet:
        assert (
            fleet.submit(two_loop_batch(fleet, '[rate_limit]\ncalls = 7\nwindow = "1m"')).code == 0
        )
        leader, follower = pty.openpty()
        env = forge_env({**fleet.env(), "TERM": "xterm-256color", "COLUMNS": "120"})
        watcher = subprocess.Popen(
            [str(FORGE), "fleet", "status", "--watch"],
            cwd=fleet.host_dir,
            env=env,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            start_new_session=True,
        )
        os.close(follower)
        seen = b""
        try:
            deadline = time.monotonic() + 60
            # Two frames drawn: the view refreshes by itself.
            while seen.count(b"permits: 0/7 in use") < 2 and time.monotonic() < deadline:
                ready, _, _ = select.select([leader], [], [], 1.0)
                if ready:
                    try:
                        seen += os.read(leader, 65536)
                    except OSError:
                        break
            assert seen.count(b"permits: 0/7 in use") >= 2, seen.decode(errors="replace")
            text = seen.decode(errors="replace")
            assert "2 loop(s) — 2 queued" in text
            assert "\x1b[" in text  # drawn as a terminal's live view, not printed lines
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 130
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.wait()
            os.close(leader)


def test_watch_options_that_make_no_sense_are_usage_errors(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        alone = fleet.forge("fleet", "status", "--count", "2")
        assert alone.code == 2
        assert "--count: only with --watch" in alone.err
        zero = fleet.forge("fleet", "status", "--watch", "--count", "0")
        assert zero.code == 2
        assert "--count 0: expected a number of frames, 1 or more" in zero.err
        assert "Traceback" not in alone.err + zero.err
        assert fleet.submit(two_loop_batch(fleet)).code == 0
        streamed = fleet.forge("fleet", "status", "--watch", "--count", "2", "--json")
        assert streamed.code == 0, streamed
        frames = [json.loads(line) for line in streamed.lines]
        assert len(frames) == 2
        assert frames[-1]["counts"]["queued"] == 2
        assert frames[-1]["notices"] == []
