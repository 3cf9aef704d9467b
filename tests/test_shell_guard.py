"""The ``bash`` Forge puts in front of an agent's shell (``shell_guard = true``), run for real."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from orchestra._guard._wrapper import shell_guard_environment

from .support import Repo


def bash_c(repo: Repo, env: dict[str, str], command: str) -> subprocess.CompletedProcess[str]:
    # As Gemini CLI runs a command: `bash -c COMMAND`, bash found on PATH.
    return run_bash(repo, env, "-c", command)


def test_a_command_harming_a_protected_path_is_refused_before_it_runs(
    repo: Repo, tmp_path: Path
) -> None:
    repo.write("forge.toml", "[run]\nmax_iterations = 1\n")
    repo.commit("policy")
    env = shell_guard_environment(tmp_path / "state", os.environ)
    refused = bash_c(repo, env, "rm forge.toml")
    assert refused.returncode == 2
    assert "forge guard: refused" in refused.stderr
    assert (repo.root / "forge.toml").is_file()


def test_any_other_command_runs_in_the_real_bash(repo: Repo, tmp_path: Path) -> None:
    env = shell_guard_environment(tmp_path / "state", os.environ)
    ran = bash_c(repo, env, 'echo "$BASH_VERSION" > version.txt; echo ok; exit 3')
    assert ran.returncode == 3
    assert ran.stdout == "ok\n"
    assert (repo.root / "version.txt").read_text().strip()
    # Arguments other than -c COMMAND go to bash untouched.
    script = repo.write("script.sh", 'echo "args: $*"\n')
    direct = subprocess.run(
        ["bash", str(script), "a", "b"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert direct.stdout == "args: a b\n"


def test_without_a_bash_on_the_path_there_is_nothing_to_guard(tmp_path: Path) -> None:
    assert shell_guard_environment(tmp_path / "state", {"PATH": str(tmp_path)}) == {}
    assert not (tmp_path / "state").exists()


def test_the_wrapper_is_found_first_and_written_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = shell_guard_environment(state, os.environ)
    wrapper = state / "shell-guard" / "bash"
    assert env["PATH"].split(os.pathsep)[0] == str(wrapper.parent)
    before = wrapper.stat().st_mtime_ns
    # Again, with the wrapper's folder already first: it never wraps itself.
    again = shell_guard_environment(state, env)
    assert wrapper.stat().st_mtime_ns == before
    assert str(wrapper.parent) not in again["PATH"].split(os.pathsep)[1:]
    assert str(wrapper) not in wrapper.read_text()


def run_bash(repo: Repo, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``bash ARGS`` in the repository, with the guarding bash first on PATH."""
    return subprocess.run(
        ["bash", *args],
        cwd=repo.root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_command_is_found_after_other_options_and_in_a_cluster(
    repo: Repo, tmp_path: Path
) -> None:
    repo.write("forge.toml", "[run]\nmax_iterations = 1\n")
    env = shell_guard_environment(tmp_path / "state", os.environ)
    for args in (("-lc", "rm forge.toml"), ("-o", "pipefail", "-c", "rm forge.toml")):
        refused = run_bash(repo, env, *args)
        assert refused.returncode == 2, args
        assert "forge guard: refused" in refused.stderr
    ran = run_bash(repo, env, "--norc", "-ec", "echo fine")
    assert (ran.returncode, ran.stdout) == (0, "fine\n")


def test_a_guard_that_cannot_run_refuses(repo: Repo, tmp_path: Path) -> None:
    env = shell_guard_environment(tmp_path / "state", os.environ)
    # The guard made unable to start (no such module: exit 1, not the refusal's 2).
    script = tmp_path / "state" / "shell-guard" / "bash"
    script.write_text(script.read_text().replace(" -I -m orchestra", " -I -m no_such_forge"))
    refused = run_bash(repo, env, "-c", "echo never")
    assert refused.returncode == 2
    assert "the guard could not run" in refused.stderr
    assert refused.stdout == ""


def test_a_folder_named_orchestra_in_the_tree_is_not_forges_guard(
    repo: Repo, tmp_path: Path
) -> None:
    repo.write("forge.toml", "[run]\nmax_iterations = 1\n")
    repo.write("orchestra/__init__.py", "")
    repo.write("orchestra/__main__.py", "raise SystemExit(0)\n")  # an agent's 'guard' that allows
    env = shell_guard_environment(tmp_path / "state", os.environ)
    refused = run_bash(repo, env, "-c", "rm forge.toml")
    assert refused.returncode == 2
    assert (repo.root / "forge.toml").is_file()


def test_the_wrapper_itself_is_protected(repo: Repo, tmp_path: Path) -> None:
    state = repo.root / ".forge" / "changes" / "c"
    env = shell_guard_environment(state, os.environ)
    wrapper = state / "shell-guard" / "bash"
    before = wrapper.read_text()
    for command in ("cp /bin/sh .forge/changes/c/shell-guard/bash", "rm -rf .forge/changes/c"):
        refused = run_bash(repo, env, "-c", command)
        assert refused.returncode == 2, command
    assert wrapper.read_text() == before
