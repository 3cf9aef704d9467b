"""The loop shell decides nothing; its store commits a decision made on the state as it stands."""

from __future__ import annotations

import ast
from pathlib import Path

import attrs

import orchestra
from orchestra._circuit import CircuitState, reset_circuit, save_circuit
from orchestra._engine import (
    ChangeStore,
    Decision,
    IterationRecord,
    decided,
    supervised_rules,
)
from orchestra._policy import Policy
from orchestra._state import ChangePaths, read_timeline

SHELL = Path(orchestra.__file__).parent / "_engine" / "_loop.py"


def test_the_loop_shell_reads_no_rule() -> None:
    """``forge run`` and ``forge supervise`` differ in their rules, read by pure functions alone.

    The shell may hand ``LoopRules`` to them, never look inside: no
    ``rules.supervised``, ``settings.rules.max_iterations`` ... in ``_loop.py``.
    """
    tree = ast.parse(SHELL.read_text(encoding="utf-8"))
    reads = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "rules")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "rules")
        )
    ]
    assert reads == []


def _store(tmp_path: Path) -> tuple[ChangePaths, ChangeStore]:
    paths = ChangePaths(tmp_path, "c")
    paths.folder.mkdir(parents=True)
    save_circuit(paths, attrs.evolve(CircuitState(), opens=2, iterations_used=4))
    store = ChangeStore(paths, owns_circuit=True)
    store.load()
    return paths, store


def _decision(store: ChangeStore, policy: Policy) -> Decision:
    record = IterationRecord(run_id="r", iteration=5, failure="exit 1", exit=1)
    return decided(
        store.current(),
        record,
        policy,
        supervised_rules(policy),
        run_id="r",
        now=1_000.0,
        now_iso="2026-12-02T00:00:00.000Z",
    )


def test_a_decision_on_the_state_as_it_stands_is_committed(tmp_path: Path) -> None:
    paths, store = _store(tmp_path)
    policy = Policy()
    decision = _decision(store, policy)
    record = IterationRecord(run_id="r", iteration=5, failure="exit 1", exit=1)
    assert store.commit(record, decision)
    assert [e.kind for e in read_timeline(paths.timeline).typed()][-1] == "iteration.finished"


def test_a_decision_made_before_a_persons_reset_is_refused_and_made_again(tmp_path: Path) -> None:
    """A reset written between the decision and its commit is never overwritten."""
    paths, store = _store(tmp_path)
    policy = Policy()
    stale = _decision(store, policy)
    reset_circuit(paths, reason="reviewed")  # a person, in another terminal
    record = IterationRecord(run_id="r", iteration=5, failure="exit 1", exit=1)
    assert not store.commit(record, stale)
    assert not any(e.kind == "iteration.finished" for e in read_timeline(paths.timeline).typed())
    # Decided again on the fresh state: the reset started the loop afresh.
    fresh = store.current()
    assert fresh.circuit.opens == 0
    again = _decision(store, policy)
    assert store.commit(record, again)
    assert store.current().circuit.opens == 0
