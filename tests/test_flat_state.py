"""Reading a flat state file without PyYAML gives what PyYAML and the converter give, or nothing."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from orchestra._circuit import CircuitState
from orchestra._errors import CorruptStateError
from orchestra._spend import SpendTotals
from orchestra._state import STATE_CONVERTER, load_state
from orchestra._state._flatyaml import parse_flat, structure_flat
from orchestra._state._yamlstate import render_state
from orchestra._verify import VerifyAttempts

_TEXT = st.text(max_size=30) | st.sampled_from(
    [
        "closed",
        "iterations-exhausted",
        "yes",
        "No",
        "on",
        "null",
        "~",
        "0x1f",
        "0b101",
        "0o17",
        "017",
        "5002aae6ac1048b335872b0b04e19efd9b5f0f22",
        "2026-12-01",
        "1e5",
        "1_000",
        ".inf",
        "a: b",
        "a #b",
        "sha256:4ec00d01ce6654d1",
        "moved aside to spend.yaml.corrupt-20261201T144117.540000Z",
        "x" * 100,
        "it's",
    ]
)
_OPT_TEXT = st.none() | _TEXT
_COUNT = st.integers(min_value=0, max_value=10**12)
_SPAN = st.none() | st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)

_STATES = st.one_of(
    st.builds(
        SpendTotals,
        tokens=_COUNT,
        tool_calls=_COUNT,
        cost_usd=st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False),
        iterations=_COUNT,
        blocked=_OPT_TEXT,
        updated_at=_OPT_TEXT,
    ),
    st.builds(
        CircuitState,
        state=st.sampled_from(["closed", "open", "half-open"]),
        reason=_OPT_TEXT,
        opened_at=_SPAN,
        cooldown=_SPAN,
        opens=_COUNT,
        escalated=st.booleans(),
        iterations_used=_COUNT,
        finished=_OPT_TEXT,
        blocked=_OPT_TEXT,
    ),
    st.builds(
        VerifyAttempts,
        consecutive_failures=_COUNT,
        open=st.booleans(),
        last_verdict=st.sampled_from([None, "PASS", "FAIL"]),
        total_attempts=_COUNT,
        max_failures=st.none() | st.integers(min_value=1, max_value=100),
        blocked=_OPT_TEXT,
        last_attempt_at=_OPT_TEXT,
        last_commit=_OPT_TEXT,
        last_tree=_OPT_TEXT,
    ),
)


def _full_way(text: str) -> Any:
    return yaml.load(text, Loader=yaml.SafeLoader)


@given(_STATES)
def test_what_forge_writes_reads_back_as_the_full_way_reads_it(state: Any) -> None:
    text = render_state(state).decode("utf-8")
    flat = parse_flat(text)
    if flat is not None:
        assert flat == _full_way(text)
        assert structure_flat(flat, type(state)) == STATE_CONVERTER.structure(
            _full_way(text), type(state)
        )


def test_the_usual_files_take_the_flat_way() -> None:
    for state in (
        SpendTotals(tokens=12, cost_usd=0.25, updated_at="2026-12-01T14:41:17.540Z"),
        CircuitState(state="open", reason="no progress", opened_at=1.5, cooldown=60.0, opens=1),
        VerifyAttempts(
            consecutive_failures=2,
            open=False,
            last_verdict="FAIL",
            total_attempts=2,
            max_failures=5,
            last_commit="5002aae6ac1048b335872b0b04e19efd9b5f0f22",
            last_tree="sha256:4ec00d01ce6654d1",
        ),
    ):
        flat = parse_flat(render_state(state).decode("utf-8"))
        assert flat is not None
        assert structure_flat(flat, type(state)) == state


_LINE = st.text(alphabet=st.sampled_from("ab01:'# -._\t\"xyeEnNoO~+\\é"), max_size=12)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "on", "null", "x_1"]), _LINE), max_size=4))
def test_any_document_it_reads_is_read_as_yaml_reads_it(lines: list[tuple[str, str]]) -> None:
    text = "".join(f"{key}: {value}\n" for key, value in lines)
    flat = parse_flat(text)
    if flat is not None:
        expected = _full_way(text)
        assert flat.keys() == expected.keys()
        for key, value in flat.items():
            assert type(value) is type(expected[key])
            assert value == expected[key] or (math.isnan(value) and math.isnan(expected[key]))


def test_what_does_not_fit_goes_the_full_way() -> None:
    assert parse_flat("tokens: 1") is None  # no final newline
    assert parse_flat("tokens: 1 # note\n") is None
    assert parse_flat("reason: yes\n") is None
    assert parse_flat("reason: a: b\n") is None
    assert parse_flat('reason: "quoted"\n') is None
    assert parse_flat("reason: long\n  folded\n") is None
    assert parse_flat("tokens: 1\ntokens: 2\n") is None
    assert parse_flat("") is None
    assert structure_flat({"tokens": True}, SpendTotals) is None  # a bool is not a count
    assert structure_flat({"tokens": 1.0}, SpendTotals) is None
    assert structure_flat({"tokens": -1}, SpendTotals) is None  # the validator refuses it
    assert structure_flat({"open": False}, VerifyAttempts) is None  # a required key missing
    assert structure_flat({"tokens": 3, "new_key": "x"}, SpendTotals) == SpendTotals(tokens=3)
    assert structure_flat({"cost_usd": 2}, SpendTotals) == SpendTotals(cost_usd=2.0)


def test_a_corrupt_file_is_still_moved_aside_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "spend.yaml"
    path.write_text("tokens: -1\n")
    with pytest.raises(CorruptStateError, match="tokens"):
        load_state(path, SpendTotals)
    assert not path.exists()
    assert [p.name.startswith("spend.yaml.corrupt-") for p in tmp_path.iterdir()] == [True]
