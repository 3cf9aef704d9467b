"""Every reader of Forge's state survives any byte sequence in any state file.

A change is given real state by the real ``forge run`` (an agent, a failing
verify, a breaker, a timeline, an iteration log). Then each of its files, and
the project's shared ones, is replaced in turn by hostile bytes (random, not
UTF-8, NUL bytes, cut in half, a byte flipped, a YAML alias bomb, nesting ten
thousand deep, the wrong types) and every command that reads state is run on
it. Each must end with one of Forge's exit codes and a message, never a
traceback, never a hang; the file it could not read is left for a person, not
silently reset (moved aside, or left as it was).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestra._cli._main import main

from .support import FAKE_AGENT, Repo

_EXIT_CODES = {0, 1, 2}

# Commands that read a change's state (and one that writes it after reading it).
_READERS = (
    ("status",),
    ("status", "--json"),
    ("timeline", "c"),
    ("timeline", "c", "--json"),
    ("spend", "c"),
    ("circuit", "c"),
    ("report",),
    ("verify", "--change", "c"),
    ("resume", "--change", "c"),
)


_MAYBE_VALID = {"half", "flipped", "empty"}


def _bomb() -> bytes:
    """A YAML alias bomb: a few hundred bytes that expand to 2**20 strings."""
    lines = ['a0: &a0 ["lol", "lol"]']
    lines += [f"a{n}: &a{n} [*a{n - 1}, *a{n - 1}]" for n in range(1, 21)]
    return ("\n".join(lines) + "\n").encode()


def _hostile(original: bytes) -> dict[str, bytes]:
    rng = random.Random(len(original))  # the same bytes on every run
    middle = len(original) // 2
    flipped = bytearray(original or b"x")
    flipped[len(flipped) // 2] ^= 0x5A
    return {
        "random": rng.randbytes(700),
        "not-utf8": b"\xff\xfe\xfa\x80 \xc3\x28 consecutive_failures: \xa0\xa1\n",
        "nul": original[:middle] + b"\x00\x00\x00" + original[middle:],
        "half": original[:middle],
        "flipped": bytes(flipped),
        "alias-bomb": _bomb(),
        "nested": b"[" * 10_000 + b"]" * 10_000 + b"\n",
        "nested-json": b'{"a":' * 5_000 + b"1" + b"}" * 5_000 + b"\n",
        "wrong-types": b"- 1\n- [2]\n- {x: y}\n",
        "json-wrong-types": b'{"seq": "one", "event": 5, "ts": null}\n[1, 2]\n"text"\n',
        "huge-number": b"consecutive_failures: 1" + b"0" * 5_000 + b"\nseq: 1e99999\n",
        "empty": b"",
    }


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The state files of a change after two real iterations, by path under the repo."""
    root = tmp_path_factory.mktemp("fuzz")
    repo = _repo(root)
    script = repo.write(
        "agent.json",
        json.dumps({"steps": [{"write": {"notes.txt": "one\n"}, "print": "working"}]}),
    )
    repo.commit("agent")
    done = repo.forge(
        "run",
        "--change",
        "c",
        "--cmd",
        f"python3 {FAKE_AGENT} {script}",
        "--yes",
        "--max-iterations",
        "2",
    )
    assert done.code in _EXIT_CODES, done.err
    repo.forge("verify", "--change", "c")
    files = {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted((root / ".forge").rglob("*"))
        if path.is_file() and not path.name.endswith(("-wal", "-shm", ".lock"))
    }
    # The files the run is known to leave: if it stops leaving one, say so here.
    assert {f"{_CHANGE}/verify-attempts.yaml", f"{_CHANGE}/timeline.jsonl"} <= set(files)
    files["__root__"] = str(root).encode()
    return files


def _repo(root: Path) -> Repo:
    repo = Repo(root)
    repo.git("init", "-q")
    repo.git("config", "user.email", "fuzz@example.invalid")
    repo.git("config", "user.name", "fuzz")
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "false"\nspecs = []\nmax_failures = 5\n',
    )
    repo.commit("policy")
    return repo


# Every state file the real run left, and those an agent could plant (a
# breaker, a circuit, waivers, a checkpoint) although this change has none yet.
_CHANGE = ".forge/changes/c"
_TARGETS = (
    f"{_CHANGE}/verify-attempts.yaml",
    f"{_CHANGE}/timeline.jsonl",
    f"{_CHANGE}/spend.yaml",
    f"{_CHANGE}/commits.journal",
    f"{_CHANGE}/secscan-markers.json",
    f"{_CHANGE}/.forge-writes",
    f"{_CHANGE}/protect/.clock",
    f"{_CHANGE}/breaker.yaml",
    f"{_CHANGE}/circuit.yaml",
    f"{_CHANGE}/checkpoint.json",
    f"{_CHANGE}/status.md",
    ".forge/secscan-waivers.yaml",
    ".forge/cache/protect.json",
    ".forge/ratelimit.sqlite3",
    ".forge/cache/secscan.sqlite3",
)


@contextlib.contextmanager
def _restored(root: Path, pristine: dict[str, bytes]) -> Iterator[None]:
    """Put the state back as it was after the case (files moved aside go)."""
    try:
        yield
    finally:
        forge = root / ".forge"
        for path in sorted(forge.rglob("*"), reverse=True):
            relative = str(path.relative_to(root))
            if path.is_file() and relative not in pristine:
                path.unlink()
        for relative, data in pristine.items():
            if relative == "__root__":
                continue
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def _kept(path: Path, data: bytes) -> bool:
    """Whether what was in the file is still there (appended to, at most) or moved aside."""
    beside = [path, *path.parent.glob(f"{path.name}.corrupt-*")]
    return any(
        candidate.is_file() and candidate.read_bytes().startswith(data) for candidate in beside
    )


def _run_in_process(args: tuple[str, ...]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code if isinstance(exit_.code, int) else 2
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("relative", [*_TARGETS, "iteration log"])
def test_every_reader_survives_hostile_bytes(
    relative: str, pristine: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(pristine["__root__"].decode())
    if relative == "iteration log":
        relative = next(name for name in pristine if name.endswith("/iteration-1.log"))
    monkeypatch.chdir(root)
    monkeypatch.setenv("NO_COLOR", "1")
    failures = []
    for kind, data in _hostile(pristine.get(relative, b"")).items():
        with _restored(root, pristine):
            (root / relative).write_bytes(data)
            for args in _READERS:
                try:
                    code, said = _run_in_process(args)
                except Exception as exc:  # any escape is the finding
                    failures.append(f"{relative} [{kind}] forge {' '.join(args)}: {exc!r}")
                    continue
                if code not in _EXIT_CODES or "Traceback" in said:
                    failures.append(f"{relative} [{kind}] forge {' '.join(args)}: exit {code}")
            # A cut or a flipped byte may leave a valid state, which a writer
            # then rightly updates; every other kind is no state at all.
            if kind not in _MAYBE_VALID and data and not _kept(root / relative, data):
                failures.append(f"{relative} [{kind}]: the bytes were neither kept nor moved aside")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("relative", _TARGETS)
def test_a_run_on_hostile_state_ends_with_a_message(
    relative: str, pristine: dict[str, bytes]
) -> None:
    """The real ``forge run`` reads every state file it gates on: each ends in words."""
    root = Path(pristine["__root__"].decode())
    data = random.Random(relative).randbytes(700)
    with _restored(root, pristine):
        (root / relative).write_bytes(data)
        done = Repo(root).forge(
            "run", "--change", "c", "--cmd", "true", "--yes", "--max-iterations", "1"
        )
        assert done.code in _EXIT_CODES, (done.code, done.err)
        assert "Traceback" not in done.out + done.err, done.err
        assert _kept(root / relative, data), "the bytes were neither kept nor moved aside"
