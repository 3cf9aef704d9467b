"""A fleet batch seen as a batch: its report, status, notices and live view, on real Redis."""

from __future__ import annotations

import json
from pathlib import Path

from .fleet_support import Fleet, fleet_of, git_repo, stamping_agent
from .redis_server import RedisServer
from .support import run_forge


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
        assert {loop["change"]: loop["ending"] for loop in shown["loops"]} == endings
        assert shown["outcome"].startswith("NEEDS A PERSON — 1 of 2 loop(s) escalated, 1 done")
        # The loop's every iteration is in the page, read from the server's streams.
        assert "<html" in html.read_text()

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
            assert endings["v2"] in Path(again["markdown"]).read_text()


def test_a_fleet_report_with_nothing_submitted_is_a_usage_error(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        done = fleet.forge("report", "--fleet")
        assert done.code == 2, done
        assert 'nothing is submitted under the fleet name "nightly"' in done.err
        assert "Traceback" not in done.err
