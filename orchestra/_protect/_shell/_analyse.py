"""Would a shell command harm a protected path? The analysis behind ``forge guard``.

A command is read the way bash reads it, every word is expanded against the
real tree, and each command that runs is judged by what it would delete or
change. The work is done by these modules, in the order a command meets them:

- :mod:`._shparse`: the command line read into a tree (quotes, operators,
  groups, substitutions, here-documents), leniently.
- :mod:`._shrun`: the evaluator; runs the tree in the mind, command by command,
  and hands each to its rule by name. ``sh -c``, ``eval`` and substitutions
  are analysed too.
- :mod:`._shwords`: word expansion (``~``, ``$VAR``, ``{a,b}``, globs).
- :mod:`._shstate`: what the analysis carries (the refusals; per command list
  the working folder and variables) and ``cd``/``export``/… that change it.
- :mod:`._shwrappers`: ``sudo``, ``env``, ``xargs``, …, which run the command
  after them.
- :mod:`._shverbs`, :mod:`._shgit`, :mod:`._shfind`: the rules of the commands
  that delete or change files.
- :mod:`._shoptions`: a command's arguments read as options and operands.
- :mod:`._shharm`: whether deleting or changing a path harms a protected one,
  and the walk for protected paths on disk.

This is a seatbelt against an agent's accidents, not a sandbox against a
hostile one: scripts, interpreters (``python -c``), ``echo … | sh``, ``make``
targets and command names only known at run time are not followed.

This module and those run on every tool call of an agent: they import only
cheap parts of the standard library and :mod:`._spec`.
"""

from __future__ import annotations

import os

from ._shharm import check_path_write, lexical_target
from ._shrun import analyse_text
from ._shstate import Analysis, State
from ._shstate import Refusal as Refusal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._spec import ProtectSpec

__all__ = ["Refusal", "analyse_command", "check_file_write"]


def analyse_command(
    command: str,
    *,
    cwd: str,
    root: str,
    spec: ProtectSpec,
    env: Mapping[str, str] | None = None,
) -> list[Refusal]:
    """The protected paths a shell command would harm (empty: allow it).

    Args:
        command: the command line, as the agent's shell would run it.
        cwd: the folder it would run in.
        root: the project root the spec's entries are relative to.
        spec: the protected paths.
        env: the environment ``$VAR`` and ``~`` expand from (default: ours).
    """
    analysis = Analysis(root, spec, os.environ if env is None else env)
    try:
        # A NUL cannot reach a shell; dropping it keeps what surrounds it in view.
        analyse_text(analysis, command.replace("\0", ""), State(os.path.abspath(cwd)))
    except RecursionError:  # nesting within the limits, compounded (sh -c in $( … ) …)
        analysis.refuse_command("the command nests too deeply to analyse")
    return analysis.refusals


def check_file_write(file_path: str, *, cwd: str, root: str, spec: ProtectSpec) -> Refusal | None:
    """Whether writing ``file_path`` (an agent's Write/Edit tool) would change a frozen path."""
    analysis = Analysis(root, spec, os.environ)
    file_path = file_path.partition("\0")[0]
    path = os.path.join(os.path.abspath(cwd), os.path.expanduser(file_path))
    check_path_write(analysis, "writing", lexical_target(path), follow=True, recursive=False)
    return analysis.refusals[0] if analysis.refusals else None
