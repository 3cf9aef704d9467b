"""Bad input never crashes Forge: a clear error (exit 2) or a gate that blocks.

Hypothesis generates policy files and state files of every wrong shape; the
invariant is that loading either succeeds or fails with Forge's own error.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import tomli_w
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestra._errors import ConfigError
from orchestra._policy import LoadedPolicy, Policy, load_policy, policy_as_toml
from orchestra._state import ChangePaths
from orchestra._verify import read_breaker

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(max_size=20),
    st.lists(st.one_of(st.text(max_size=8), st.integers()), max_size=3),
)
keys = st.sampled_from(
    ["command", "lint", "specs", "tests", "max_failures", "timeout", "max_failurs", "x"]
)
tables = st.dictionaries(keys, scalars, max_size=6)
documents = st.dictionaries(
    st.sampled_from(["verify", "verfy", "extends", "run"]),
    st.one_of(tables, scalars),
    max_size=3,
)


@SETTINGS
@given(documents)
def test_any_policy_document_loads_or_fails_clearly(document: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        config = root / "forge.toml"
        config.write_text(tomli_w.dumps(document))
        outcome = _load(config, root)
        if isinstance(outcome, ConfigError):
            assert outcome.problems
            for problem in outcome.problems:
                assert problem.startswith(("forge.toml: ", "forge.toml -> "))
        else:
            assert isinstance(outcome.policy, Policy)


@SETTINGS
@given(st.binary(max_size=200))
def test_any_policy_bytes_load_or_fail_clearly(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "forge.toml").write_bytes(raw)
        outcome = _load(root / "forge.toml", root)
        assert isinstance(outcome, ConfigError | LoadedPolicy)


relative_paths = st.from_regex(r"[a-z][a-z0-9_/*-]{0,10}", fullmatch=True)
valid_verify = st.fixed_dictionaries(
    {},
    optional={
        "command": st.text(max_size=30),
        "lint": st.text(max_size=30),
        "specs": st.lists(relative_paths, max_size=3),
        "tests": st.lists(relative_paths, max_size=3),
        "max_failures": st.integers(min_value=1, max_value=10**6),
        "timeout": st.one_of(
            st.integers(min_value=1, max_value=10**7),
            st.sampled_from(["90s", "30m", "1h30m", "2d", "0.5s"]),
        ),
    },
)


@SETTINGS
@given(valid_verify)
def test_dump_round_trips_any_valid_policy(verify: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "forge.toml").write_text(tomli_w.dumps({"verify": verify}))
        original = load_policy(root / "forge.toml", root=root).policy
        (root / "dumped.toml").write_text(policy_as_toml(original))
        assert load_policy(root / "dumped.toml", root=root).policy == original


state_values = st.one_of(
    st.integers(min_value=-5, max_value=10**20),
    st.booleans(),
    st.none(),
    st.text(max_size=10),
    st.sampled_from(["PASS", "FAIL"]),
)
state_documents = st.dictionaries(
    st.sampled_from(
        ["consecutive_failures", "open", "last_verdict", "total_attempts", "max_failures", "x"]
    ),
    state_values,
    max_size=6,
)


@SETTINGS
@given(st.one_of(st.binary(max_size=120), state_documents.map(lambda d: _yaml(d))))
def test_any_state_file_reads_or_blocks(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        paths = ChangePaths(Path(folder), "fuzz")
        paths.folder.mkdir(parents=True)
        paths.verify_attempts.write_bytes(raw)
        update = read_breaker(paths)
        if update.corrupt is not None:
            assert update.after.gate_open  # unreadable state is never assumed closed
            assert Path(update.corrupt.moved_to).read_bytes() == raw  # evidence kept
        else:
            assert update.after.consecutive_failures >= 0


def _yaml(document: dict[str, Any]) -> bytes:
    return yaml.safe_dump(document).encode()


def _load(config: Path, root: Path) -> LoadedPolicy | ConfigError:
    """The loaded policy, or the ConfigError it raised (any other exception escapes)."""
    try:
        return load_policy(config, root=root)
    except ConfigError as exc:
        return exc
