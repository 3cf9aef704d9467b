"""What any command-line tool does, through the real ``forge``: version, help, "did you mean"."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from orchestra import __version__
from orchestra._cli._main import _EXAMPLES, build_parser, parse_args

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


def test_every_command_says_what_it_does_and_its_examples_parse() -> None:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in commands.choices.items():
        assert sub.description, name
        for item in sub._actions:
            if item.dest == "change" and not item.option_strings:
                assert item.help, name
    for name, lines in _EXAMPLES.items():
        for line in lines:
            words = shlex.split(line.partition("<")[0])
            assert words[0] == "forge"
            assert parse_args(words[1:]).command == name, line


def test_a_commands_help_shows_its_description_and_examples(repo: Repo) -> None:
    done = repo.forge("timeline", "--help")
    assert done.code == 0
    assert "A change's session timeline." in done.lines
    assert "  forge timeline billing --follow" in done.lines
