"""Forge's guard in front of an agent's shell, for a CLI with no per-invocation hook.

Gemini CLI runs every ``run_shell_command`` as ``bash -c COMMAND``, ``bash``
found on its ``PATH``. Its BeforeTool hooks would be the natural place for
Forge's guard, but this release reads hooks only from settings files: the
user's and the project's (which are not Forge's to rewrite) and the system's
(which it skips unless the file and every folder above it are owned by root
and writable by nobody else). So the executor puts a ``bash`` of Forge's
first on the agent's ``PATH``: it asks ``forge guard`` about ``bash -c``'s
command, refuses it with exit 2 and the guard's reasons on stderr (which the
CLI hands back to the model as the command's output), and otherwise runs the
real ``bash`` with the same arguments. (Gemini CLI 0.61.0 hands bash the
agent's command inside a few lines of its own: ``shopt``, a subshell with a
``trap`` that lists background jobs; the guard reads them all.)

The wrapper lives in the change's state folder, which the guard protects: the
agent cannot rewrite it.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

from .._hook_passing import forge_command

_FOLDER = "shell-guard"

_TEMPLATE = """#!/bin/sh
# Written by Forge for this change's executor: the guard checks what `bash -c`
# would run (-c alone or in a cluster such as -lc, after any other options),
# then the real bash runs it. Refused: exit 2, the reasons on stderr. A guard
# that cannot run refuses too: a broken guard must never let a command through.
command_mode=0
command=
skip=0
for arg do
  if [ "$skip" -eq 1 ]; then skip=0; continue; fi
  case $arg in
    --rcfile|--init-file) skip=1 ;;
    --*) ;;
    -o|+o|-O|+O) skip=1 ;;
    -*c*) command_mode=1 ;;
    -*|+*) ;;
    *) command=$arg; break ;;
  esac
done
if [ "$command_mode" -eq 1 ]; then
  printf '%s' "$command" | {forge} guard --stdin
  status=$?
  if [ "$status" -ne 0 ]; then
    [ "$status" -eq 2 ] || echo "forge: the guard could not run (exit $status): refused" >&2
    exit 2
  fi
fi
exec {bash} "$@"
"""


def shell_guard_environment(state_dir: Path, environment: Mapping[str, str]) -> dict[str, str]:
    """Write the guarding ``bash`` under ``state_dir``; the ``PATH`` that puts it first.

    Args:
        state_dir: The change's state folder (the wrapper goes in a folder of its own).
        environment: The agent's environment so far (its ``PATH`` is searched
            for the real ``bash``).

    Returns:
        The variables to add: ``PATH`` with the wrapper's folder first; nothing
        when no ``bash`` is on the path (then the agent has no shell to guard).
    """
    folder = state_dir / _FOLDER
    path = _without(environment.get("PATH", os.defpath), folder)
    bash = shutil.which("bash", path=path)
    if bash is None:
        return {}
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "bash"
    forge = forge_command()
    text = _TEMPLATE.format(forge=forge, bash=shlex.quote(bash))
    if not script.is_file() or script.read_text(encoding="utf-8") != text:
        temporary = folder / "bash.tmp"
        temporary.write_text(text, encoding="utf-8")
        temporary.chmod(0o755)
        temporary.replace(script)
    return {"PATH": os.pathsep.join([str(folder), path])}


def _without(path: str, folder: Path) -> str:
    return os.pathsep.join(part for part in path.split(os.pathsep) if Path(part) != folder)
