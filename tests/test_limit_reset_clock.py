"""A provider's relative reset ("try again in N") counts from the loop's wall clock.

The loop's wall clock is the server's in a fleet (``ServerClock``): a host whose
own clock is off still pauses exactly N. Proven here for every structured
parser, for a supervised loop whose wall clock is far from this machine's, and
for a ``forge fleet work`` host whose clock runs an hour ahead (libfaketime): the
pause it writes on the server ends at the server's time + N.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from orchestra._engine import DONE
from orchestra._executor import make_parser
from orchestra._policy import Policy, RunPolicy, VerifyPolicy

from .fleet_support import fleet_of, git_repo, wait_for
from .redis_server import RedisServer
from .test_fleet_limiter import connect
from .test_supervised_loop import EPOCH, fake_claude, mock_limiter, result, supervise_one

# A clock of its own, years from this machine's: what a loop's wall clock is to it.
ELSEWHERE = 2_000_000_000.0
LIMIT = "Claude AI usage limit reached. Try again in 30 minutes."


@pytest.mark.parametrize(
    ("output_format", "lines"),
    [
        ("claude-stream-json", [json.dumps({"type": "result", "is_error": True, "result": LIMIT})]),
        (
            "codex-json",
            [
                json.dumps({"type": "thread.started", "thread_id": "t"}),
                json.dumps(
                    {"type": "error", "message": "You've hit your usage limit. Try again in 1800s."}
                ),
            ],
        ),
        (
            "gemini-json",
            [
                json.dumps(
                    {
                        "error": {
                            "code": 429,
                            "message": "You have exhausted your capacity. Retry in 1800s.",
                        }
                    }
                )
            ],
        ),
    ],
)
def test_every_parser_counts_a_relative_reset_from_its_clock(
    output_format: str, lines: list[str]
) -> None:
    parser = make_parser(output_format, "FORGE_DONE", clock=lambda: ELSEWHERE)
    parser.feed("".join(f"{line}\n" for line in lines).encode())
    limit = parser.finish().rate_limit
    assert limit is not None, output_format
    assert limit.resets_at == ELSEWHERE + 1800


def test_an_absolute_reset_is_the_provider_s_time_whatever_the_clock() -> None:
    parser = make_parser("claude-stream-json", "FORGE_DONE", clock=lambda: ELSEWHERE)
    text = "Claude AI usage limit reached|1753441200"
    parser.feed(f"{json.dumps({'type': 'result', 'is_error': True, 'result': text})}\n".encode())
    limit = parser.finish().rate_limit
    assert limit is not None
    assert limit.resets_at == 1753441200


async def test_a_loop_pauses_n_on_its_own_wall_clock_not_this_machine_s(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # The loop's wall clock (EPOCH + trio time) is months from this machine's
    # time.time(): counted from the machine's, "in 30 minutes" would be long past.
    claude = fake_claude(tmp_path, f"{result(LIMIT, is_error=True)}\n", f"{result('FORGE_DONE')}\n")
    loop_policy = Policy(
        verify=VerifyPolicy(command="true", specs=()), run=RunPolicy(max_iterations=1)
    )
    limiter = mock_limiter()
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, loop_policy, "", executor=claude, limiter=limiter
    )
    assert summary.reason == DONE
    assert summary.iterations == 2  # the refused call, then the counted one
    assert waited == [1800]
    timeline = (tmp_path / ".forge" / "changes" / "c" / "timeline.jsonl").read_text()
    (refused,) = [
        event
        for event in map(json.loads, timeline.splitlines())
        if event["event"] == "iteration.finished" and not event["judged"]
    ]
    assert refused["rate_limit"]["resets_at"] == EPOCH + 1800


def libfaketime() -> Path:
    """libfaketime's preload library; the package is installed when missing (as root)."""
    for found in sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1")):
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "faketime"], env=env, check=True)
        for found in sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1")):
            return found
    raise RuntimeError("libfaketime is needed: apt-get install faketime")


FAKE_AGENT = Path(__file__).parent / "fake_agent.py"
RESETS_IN = 2.0  # seconds: the provider's "try again in"


def test_a_fleet_host_an_hour_ahead_pauses_until_the_server_s_time_plus_n(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        loop = git_repo(tmp_path / "loops" / "a")
        script = tmp_path / "claude.json"
        refused = result(
            f"Claude AI usage limit reached. Try again in {RESETS_IN:g} seconds.", is_error=True
        )
        steps = [{"print": f"{refused}\n"}, {"print": f"{result('FORGE_DONE')}\n"}]
        script.write_text(json.dumps({"steps": steps}))
        argv = [sys.executable, str(FAKE_AGENT), str(script)]
        executors = loop / "executors"
        executors.mkdir()
        (executors / "fakeclaude.toml").write_text(
            f'argv = {json.dumps(argv)}\noutput = "claude-stream-json"\n'
        )
        batch = "\n".join(
            [
                "[verify]",
                'command = "true"',
                "specs = []",
                "[[loop]]",
                'change = "a"',
                f"dir = {json.dumps(str(loop))}",
                'executor = "fakeclaude"',
                "",
            ]
        )
        assert fleet.submit(batch).code == 0
        skewed = {
            "LD_PRELOAD": str(libfaketime()),
            # Every clock an hour ahead (the monotonic one too: only its differences
            # count, and Python's sleeps fail with EINVAL when it alone is left true).
            "FAKETIME": "+1h",
        }
        fleet.spawn("ahead", extra=skewed)
        client = redis_server.client()
        pause_key = connect(redis_server, "nightly").config.keys.limiter_pause
        seen: list[tuple[float, float]] = []

        def paused() -> bool:
            until = client.hget(pause_key, "until")
            if until is None:
                return False
            seconds, micros = client.time()
            seen.append((float(until), seconds + micros / 1e6))
            return True

        wait_for(paused, timeout=60, what="the provider's pause on the server")
        ((until, server_now),) = seen[:1]
        # Written moments ago for RESETS_IN from the server's clock; counted from
        # the host's, it would end an hour later.
        assert 0 < until - server_now <= RESETS_IN, fleet.output("ahead")
        assert fleet.wait_all() == [0], fleet.output("ahead")
        assert fleet.status()["counts"]["done"] == 1
