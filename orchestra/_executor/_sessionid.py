"""What an agent session id may be before Forge puts it on a command line.

The id comes from the agent's own output (``session_id``, a Codex thread id),
so it is data from outside: an id with a newline, a space or a shell
character is no id Forge resumes. The charset is conservative: letters,
digits and ``.``, ``_``, ``:``, ``-``, at most 128 of them (every CLI Forge
runs uses UUIDs or words of that kind).
"""

from __future__ import annotations

import re

_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
SESSION_ID_CHARSET = "[A-Za-z0-9._:-]{1,128}"


def valid_session_id(session: str) -> bool:
    """Whether ``session`` is an id Forge passes to a resume command."""
    return _SESSION_ID.fullmatch(session) is not None
