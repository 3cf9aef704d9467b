"""The agent session a loop carries from one iteration to the next: pure rules, no I/O.

An executor that continues sessions (``session = "continue"``) resumes the
session the previous iteration reported. :func:`resumable` says whether this
one may: the id must be one Forge puts on a command line (it comes from the
agent's output), and the session must be younger than ``[run]
session_max_age``; otherwise the iteration starts afresh and a note says why.
:func:`carried` is what the iteration hands the next.
"""

from __future__ import annotations

import attrs

from .._durations import brief_seconds, format_duration
from .._executor import SESSION_ID_CHARSET, valid_session_id


@attrs.frozen
class Session:
    """An agent session: its id, as the agent reported it, and when it began.

    Attributes:
        id: The id the agent reported (not yet checked: :func:`resumable` does).
        began: Wall-clock epoch seconds of the start of the iteration that began it.
    """

    id: str
    began: float


@attrs.frozen
class Resume:
    """Whether an iteration continues a session: the id it resumes, or why it does not."""

    session: str | None = None
    note: str | None = None


def resumable(session: Session | None, *, now: float, max_age: float) -> Resume:
    """The session an iteration starting at ``now`` continues, if any, and the note if not."""
    if session is None:
        return Resume()
    if not valid_session_id(session.id):
        shown = session.id if len(session.id) <= 60 else session.id[:60] + "…"
        return Resume(
            note=f"session id {shown!r} is not a valid id ({SESSION_ID_CHARSET}): "
            "not resumed, a fresh session"
        )
    age = now - session.began
    if age >= max_age:
        return Resume(
            note=f"session {session.id} began {brief_seconds(age)} ago, past [run] "
            f"session_max_age ({format_duration(max_age)}): not resumed, a fresh session"
        )
    return Resume(session=session.id)


def carried(
    previous: Session | None, reported: str | None, *, resumed: str | None, began: float
) -> Session | None:
    """The session after an iteration that began at ``began``, resumed ``resumed`` and
    reported ``reported``: the one it continued keeps its age; a new one begins now."""
    if not reported:
        return previous
    if previous is not None and reported == resumed == previous.id:
        return previous
    return Session(reported, began)
