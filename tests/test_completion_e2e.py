"""``forge completion bash|zsh|fish``: each script loaded in its real shell, asked to complete.

The scripts come from the real ``forge completion``; bash and fish complete a
command line through their own completion machinery (bash's ``COMP_WORDS``
protocol, fish's ``complete -C``); zsh calls the function as its bashcompinit
does (sh emulation, bash's arrays). ``make test`` installs zsh and fish.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from .support import Repo

# What a person types (a trailing space: a new word), and what must be offered.
_CASES = [
    ("forge pol", {"policy"}),
    ("forge policy s", {"show", "schema", "simulate"}),
    ("forge policy simulate --ch", {"--change"}),
    ("forge spend ", {"billing", "search"}),
    ("forge attach ", {"billing", "search"}),
    ("forge run --change b", {"billing"}),
    ("forge completion ", {"bash", "zsh", "fish"}),
    # The value of --change is not taken for a command.
    ("forge run --change policy --max-i", {"--max-iterations"}),
    ("forge -", {"--help", "--version"}),
]

# Completes "$1" as bash does: the words split, the cursor on the last one.
_BASH = """
source "$0"
read -ra COMP_WORDS <<< "$1"
case "$1" in *" ") COMP_WORDS+=("") ;; esac
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_forge
printf '%s\\n' "${COMPREPLY[@]}"
"""

# As bashcompinit's compgen -F calls the function: in sh emulation.
_ZSH = """
source "$0"
emulate -L sh
COMP_WORDS=(${=1})
case "$1" in *" ") COMP_WORDS+=("") ;; esac
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_forge
printf '%s\\n' "${COMPREPLY[@]}"
"""


@pytest.fixture
def project(repo: Repo) -> Repo:
    for change in ("billing", "search"):
        repo.change_dir(change).mkdir(parents=True)
    return repo


def _script(repo: Repo, shell: str) -> Path:
    done = repo.forge("completion", shell)
    assert done.code == 0, done.err
    path = repo.root.parent / f"forge.{shell}"
    path.write_text(done.out)
    return path


def _offered(shell: str, script: Path, line: str, cwd: Path) -> set[str]:
    if shell == "fish":
        argv = ["fish", "--no-config", "-c", f"source {script}; complete -C {line!r}"]
    else:
        argv = [shell, "-c", _BASH if shell == "bash" else _ZSH, str(script), line]
        if shell == "zsh":
            argv.insert(1, "-f")
    # In a session of its own: a script that hangs is stopped with every child.
    shell_process = subprocess.Popen(
        argv,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = shell_process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(shell_process.pid, signal.SIGKILL)
        shell_process.communicate()
        raise
    assert shell_process.returncode == 0, (argv, err)
    assert not err, (argv, err)
    # fish prints "word<TAB>description".
    return {row.split("\t")[0] for row in out.splitlines() if row}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_completes_commands_actions_options_and_changes(
    project: Repo, shell: str
) -> None:
    script = _script(project, shell)
    # From a subfolder too: the changes are the nearest project's.
    below = project.root / "src"
    below.mkdir()
    for line, wanted in _CASES:
        offered = _offered(shell, script, line, below)
        assert wanted <= offered, (shell, line, offered)
        assert "init" not in offered or line == "forge pol", (shell, line, offered)


def test_an_unknown_shell_is_refused(project: Repo) -> None:
    done = project.forge("completion", "tcsh")
    assert done.code == 2
    assert "invalid choice: 'tcsh'" in done.err
