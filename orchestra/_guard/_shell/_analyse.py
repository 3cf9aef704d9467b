"""The two questions the agent hooks ask: would this command, or this file write, harm?

:func:`analyse_command` reads a shell command (:mod:`._parse`) and runs it in
the mind (:mod:`._evaluate`); :func:`check_file_write` judges one path an
agent's Write/Edit tool would write (:mod:`._harm`). Both guard Forge's own
state whatever the spec says (:mod:`._forge_state`). A command longer than
:data:`~._evaluate.MAX_COMMAND` characters is refused unread.

This runs on every tool call of an agent: it imports only :mod:`os` and its
sibling modules.
"""

from __future__ import annotations

import os

from ._evaluate import MAX_COMMAND, analyse_text
from ._forge_state import check_forge_folder, with_forge_state
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
    analysis = Analysis(root, with_forge_state(spec), os.environ if env is None else env)
    if len(command) > MAX_COMMAND:
        # Unread: past this size the analysis would cost the agent more than it waits.
        analysis.refuse_command(
            f"the command is {len(command)} characters long, more than the {MAX_COMMAND} "
            "the guard analyses (write long content with a file tool, or split the command)"
        )
        return analysis.refusals
    try:
        # A NUL cannot reach a shell; dropping it keeps what surrounds it in view.
        analyse_text(analysis, command.replace("\0", ""), State(os.path.abspath(cwd)))
    except RecursionError:  # nesting within the limits, compounded (sh -c in $( … ) …)
        analysis.refuse_command("the command nests too deeply to analyse")
    return analysis.refusals


def check_file_write(file_path: str, *, cwd: str, root: str, spec: ProtectSpec) -> Refusal | None:
    """Whether writing ``file_path`` (an agent's Write/Edit tool) would change a frozen path."""
    analysis = Analysis(root, with_forge_state(spec), os.environ)
    file_path = file_path.partition("\0")[0]
    path = lexical_target(os.path.join(os.path.abspath(cwd), os.path.expanduser(file_path)))
    check_path_write(analysis, "writing", path, follow=True, recursive=False)
    if not analysis.refusals:
        check_forge_folder(analysis, "writing", path)
    return analysis.refusals[0] if analysis.refusals else None
