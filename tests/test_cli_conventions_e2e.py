"""What any command-line tool does, through the real ``forge``: version, help, "did you mean"."""

from __future__ import annotations

import os
from pathlib import Path

from orchestra import __version__

from .support import Repo


def _path_with(repo: Repo, name: str, version: str) -> dict[str, str]:
    """PATH holding a stand-in agent CLI that prints ``version`` for ``--version``."""
    bin_dir = repo.root.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    cli = bin_dir / name
    cli.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n")
    cli.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_version_names_forge_python_and_the_agent_clis_found(repo: Repo) -> None:
    done = repo.forge("--version", env=_path_with(repo, "claude", "9.8.7"))
    assert done.code == 0, done
    assert done.lines[0] == f"forge {__version__}"
    assert done.lines[1].startswith("python 3.")
    [claude] = [line for line in done.lines if line.startswith("claude: ")]
    assert str(Path(repo.root.parent / "bin" / "claude")) in claude
    assert "9.8.7 (proven with " in claude
    assert repo.forge("-V").lines[0] == f"forge {__version__}"


def test_a_bare_forge_prints_its_help(repo: Repo) -> None:
    done = repo.forge()
    assert done.code == 0, done
    assert done.lines[0].startswith("usage: forge")
    assert any(line.split()[:1] == ["status"] for line in done.lines)


def test_a_mistyped_command_action_or_option_gets_the_nearest(repo: Repo) -> None:
    done = repo.forge("stauts")
    assert done.code == 2
    assert "forge: error: unknown command 'stauts'; did you mean 'status'?" in done.err
    done = repo.forge("policy", "simulat")
    assert done.code == 2
    assert "unknown policy action 'simulat'; did you mean 'simulate'?" in done.err
    done = repo.forge("verify", "--chnage", "c")
    assert done.code == 2
    # The command's own usage, not forge's.
    assert done.err.startswith("usage: forge verify")
    assert "forge verify: error: unknown option '--chnage'; did you mean '--change'?" in done.err
    assert "Traceback" not in done.err


def test_an_unknown_change_is_exit_2_for_timeline_as_for_spend(repo: Repo) -> None:
    for command in ("timeline", "spend"):
        done = repo.forge(command, "nosuch")
        assert done.code == 2, (command, done)
        assert 'no change "nosuch"' in done.err
