"""A cost ceiling that cannot be counted is refused, not assumed closed.

An executor whose CLI reports no cost and whose model has no price in its
``[prices]`` cannot feed ``[budget] max_cost_usd``: ``forge run --yes`` and
``forge supervise`` refuse to start (exit 2, naming the executor and the
way out), and an iteration whose output names a model without a price stops
the loop as a gate error — unless ``[budget] allow_unpriced = true`` accepts
the run without it.
"""

from __future__ import annotations

import json

import yaml

from .support import Repo
from .test_agents_replay_e2e import CASES, call, install

BARE_CODEX = 'argv = ["codex", "exec", "--json", "{prompt}"]\noutput = "codex-json"\n'
# A Gemini definition that prices another model than the one the recording names.
OTHER_PRICE = (
    'argv = ["gemini", "-p", "{prompt}", "-o", "json"]\noutput = "gemini-json"\n'
    'price_model = "some-model"\n[prices."some-model"]\ninput = 1.0\noutput = 2.0\n'
)
UNPRICED_GEMINI = next(c for c in CASES if c.name == "consensus.json")


def test_forge_run_refuses_a_cost_ceiling_it_cannot_count(repo: Repo) -> None:
    repo.write("forge.toml", "[budget]\nmax_cost_usd = 5.0\n")
    repo.write("executors/bare.toml", BARE_CODEX)
    plan = repo.forge("run", "--change", "c", "--executor", "bare")
    assert plan.code == 0
    assert any(
        "cannot be counted; running refuses it unless [budget] allow_unpriced = true" in line
        for line in plan.lines
    )
    refused = repo.forge("run", "--change", "c", "--executor", "bare", "--yes")
    assert refused.code == 2, refused
    assert "the cost ceiling cannot be counted" in refused.err
    assert "executor 'bare' reports no cost" in refused.err
    assert "allow_unpriced = true" in refused.err
    assert "Traceback" not in refused.err
    assert not repo.change_dir("c").joinpath("timeline.jsonl").exists()  # nothing ran


def test_forge_supervise_refuses_it_per_loop(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[budget]\nmax_cost_usd = 5.0\n[[loop]]\nchange = "a"\nexecutor = "bare"\n',
    )
    repo.write("executors/bare.toml", BARE_CODEX)
    refused = repo.forge("supervise")
    assert refused.code == 2, refused
    assert "loop a: [budget] max_cost_usd is set but executor 'bare'" in refused.err


def test_an_iteration_of_an_unpriced_model_stops_the_loop_as_a_gate_error(repo: Repo) -> None:
    repo.write("forge.toml", "[budget]\nmax_cost_usd = 5.0\n[run]\nmax_iterations = 3\n")
    repo.write("executors/other.toml", OTHER_PRICE)
    repo.commit()
    env = install(repo, [call(UNPRICED_GEMINI)] * 3)
    done = repo.forge("run", "--change", "c", "--executor", "other", "--yes", env=env)
    assert done.code == 1, done
    assert "run: STOPPED after 1 iteration(s) — gate-error" in done.lines
    assert "  gate:   spend budget" in done.lines
    assert any("the cost of 1 iteration(s) is unknown" in line for line in done.lines)
    spend = yaml.safe_load(repo.change_dir("c").joinpath("spend.yaml").read_text())
    assert spend["unpriced"] == 1


def test_allow_unpriced_accepts_the_run(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        "[budget]\nmax_cost_usd = 5.0\nallow_unpriced = true\n[run]\nmax_iterations = 2\n",
    )
    repo.write("executors/other.toml", OTHER_PRICE)
    repo.commit()
    env = install(repo, [call(UNPRICED_GEMINI)] * 4)
    done = repo.forge("run", "--change", "c", "--executor", "other", "--yes", "--json", env=env)
    summary = json.loads(done.out)
    assert summary["reason"] != "gate-error", summary
    assert summary["iterations"] == 2
    shown = repo.forge("run", "--change", "d", "--executor", "other", "--yes", env=env)
    note = (
        "  note: no price for model gemini-3.1-pro-preview in the executor's price table: "
        "no cost estimate"
    )
    assert shown.lines.count(note) == 1  # said once, whatever the number of iterations


def test_a_price_table_without_the_executors_own_model_cannot_count_it(repo: Repo) -> None:
    # Codex's output names no model: without price_model, no row of the table is its.
    repo.write("forge.toml", "[budget]\nmax_cost_usd = 5.0\n")
    repo.write(
        "executors/tabled.toml",
        BARE_CODEX + '[prices."gpt-x"]\ninput = 1.0\noutput = 2.0\n',
    )
    refused = repo.forge("run", "--change", "c", "--executor", "tabled", "--yes")
    assert refused.code == 2, refused
    assert "the cost ceiling cannot be counted" in refused.err
