"""A person's guidance for a loop's next iteration: ``.forge/changes/<c>/guidance.yaml``.

``forge steer`` adds an entry; the loop takes every entry as its next
iteration starts — a ``once`` entry is removed then, an ``until-cleared`` one
stays for every iteration after it until ``forge steer --clear``. The file is
written whole under the change's lock, so a loop taking the guidance and a
person adding to it never lose each other's write. A corrupt file is moved
aside and reported (``state.corrupt``): no guidance is delivered until a
person clears it, since the loop cannot know what it said.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ._change import ChangePaths
from ._events import Event
from ._files import exclusive_lock
from ._guarded import load_or_block
from ._timeline import append_event
from ._yamlstate import save_state

ONCE = "once"
UNTIL_CLEARED = "until-cleared"

# The timeline's events of guidance: given by a person, delivered to an
# iteration, cleared; and a loop's wait for an answer to its question.
GUIDANCE_GIVEN = "guidance.given"
GUIDANCE_DELIVERED = "guidance.delivered"
GUIDANCE_CLEARED = "guidance.cleared"
QUESTION_WAITED = "question.waited"


@attrs.frozen
class Guidance:
    """One piece of guidance.

    Attributes:
        text: What the person said.
        by: Who said it (``user@host``).
        at: When (UTC, ISO 8601).
        keep: ``once`` (the next iteration only) or ``until-cleared``.
    """

    text: str
    by: str
    at: str
    keep: str = attrs.field(default=ONCE, validator=attrs.validators.in_((ONCE, UNTIL_CLEARED)))


@attrs.frozen
class GuidanceState:
    """What ``guidance.yaml`` holds: the guidance not yet taken (and kept entries)."""

    entries: tuple[Guidance, ...] = ()
    blocked: str | None = None


NO_GUIDANCE = GuidanceState()


def read_guidance(paths: ChangePaths) -> GuidanceState:
    """The guidance waiting for the change's next iteration (a corrupt file: blocked)."""
    with exclusive_lock(paths.lock):
        state, _ = load_or_block(paths, paths.guidance, GuidanceState, NO_GUIDANCE)
    return state


def give_guidance(paths: ChangePaths, given: Guidance, said: Event | None = None) -> GuidanceState:
    """Add ``given`` for the change's next iteration; the state after it.

    ``said`` (its ``guidance.given``) goes to the timeline under the same lock:
    the loop never takes guidance before its record.
    """
    with exclusive_lock(paths.lock):
        state, _ = load_or_block(paths, paths.guidance, GuidanceState, NO_GUIDANCE)
        after = attrs.evolve(state, entries=(*state.entries, given))
        save_state(paths.guidance, after)
        if said is not None:
            append_event(paths.timeline, paths.name, said)
    return after


def clear_guidance(
    paths: ChangePaths, said: Callable[[GuidanceState], Event] | None = None
) -> GuidanceState:
    """Remove every entry (a moved-aside file's block too); what there was.

    ``said(before)`` (its ``guidance.cleared``) goes to the timeline under the same lock.
    """
    with exclusive_lock(paths.lock):
        before, _ = load_or_block(paths, paths.guidance, GuidanceState, NO_GUIDANCE)
        if before != NO_GUIDANCE:
            save_state(paths.guidance, NO_GUIDANCE)
        if said is not None:
            append_event(paths.timeline, paths.name, said(before))
    return before


def take_guidance(paths: ChangePaths) -> tuple[Guidance, ...]:
    """The guidance an iteration starting now is given; ``once`` entries are used up.

    A blocked file gives none: what it said is not known.
    """
    with exclusive_lock(paths.lock):
        state, _ = load_or_block(paths, paths.guidance, GuidanceState, NO_GUIDANCE)
        if state.blocked is not None or not state.entries:
            return ()
        kept = tuple(entry for entry in state.entries if entry.keep == UNTIL_CLEARED)
        if kept != state.entries:
            save_state(paths.guidance, attrs.evolve(state, entries=kept))
    return state.entries
