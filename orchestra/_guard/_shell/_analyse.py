"""The two questions the agent hooks ask: would this command, or this file write, harm?

:func:`analyse_command` reads a shell command (:mod:`._parse`) and runs it in
the mind (:mod:`._evaluate`); :func:`check_file_write` judges one path an
agent's Write/Edit tool would write (:mod:`._harm`).

This runs on every tool call of an agent: it imports only :mod:`os` and its
sibling modules.
"""

from __future__ import annotations

import os

from ._evaluate import analyse_text
from ._harm import check_path_write, lexical_target
from ._state import Analysis, Refusal, State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..._protect import ProtectSpec


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
