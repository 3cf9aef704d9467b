"""A person's pause, resume, stop and guidance of a fleet loop, kept on the server.

The change's hash holds them in its ``controls`` field (JSON: ``paused`` and
``stop``, each ``{by, at, reason}``), as ``controls.yaml`` holds them for a
loop of this host; the host running the loop reads them between iterations
through its store, whichever host that is. A person's guidance
(``forge steer``) waits in its ``guidance`` field (a JSON list of
``{text, by, at, keep}``), as ``guidance.yaml`` holds it, until the loop's
next iteration takes it. A person's write and the loop's removal of the stop
it obeys (or the guidance it takes) are each one Lua script, so neither
overwrites the other. The times are the server's. The loop's side (reading
them, removing the stop it obeys, taking the guidance) is its store's
(:mod:`._store`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from .._errors import StateError, UsageError
from .._state import (
    GUIDANCE_CLEARED,
    GUIDANCE_GIVEN,
    STATE_CONVERTER,
    Event,
    Guidance,
    GuidanceState,
    LoopControls,
    OtherEvent,
    Request,
)
from ._connection import Connection
from ._store import (
    controls_from_json,
    event_pieces,
    guidance_from_json,
    guidance_json,
    numbered_events,
    read_guidance_text,
)

# Where a loop must be for a control to apply: running (a stop), or anywhere
# but unknown (a pause and a resume stand for the loop's next run too).
RUNNING = "running"
ANY = "any"

# KEYS: status, change hash, timeline.
# ARGV: change, member (paused | stop), request JSON ("" removes it),
# where the loop must be (running | any), keep an existing member (1/0), then
# the events' JSON pieces. Returns {1, controls before} when written,
# {2, controls before} when kept as it was, {0, why, state} when refused.
SET = (
    """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return {0, 'unknown', ''} end
local state = cjson.decode(current)['state']
if ARGV[4] == 'running' and state ~= 'running' then return {0, 'not-running', state} end
local text = redis.call('HGET', KEYS[2], 'controls') or '{}'
local ok, controls = pcall(cjson.decode, text)
-- As the hosts read it: an entry that is no request makes the whole value unreadable.
local function request(entry)
  if entry == nil or entry == cjson.null then return true end
  return type(entry) == 'table' and type(entry['by']) == 'string'
    and type(entry['at']) == 'string'
end
if ok and type(controls) ~= 'table' then ok = false end
if ok and not (request(controls['paused']) and request(controls['stop'])) then ok = false end
if not ok then controls = {} end
local had = controls[ARGV[2]] ~= nil and controls[ARGV[2]] ~= cjson.null
if (ARGV[5] == '1' and had) or (ARGV[3] == '' and not had and ok) then return {2, text} end
if ARGV[3] == '' then controls[ARGV[2]] = nil else controls[ARGV[2]] = cjson.decode(ARGV[3]) end
controls['blocked'] = nil
redis.call('HSET', KEYS[2], 'controls', cjson.encode(controls))
"""
    + numbered_events("6")
    + """
return {1, text}
"""
)


# A person's guidance replaced whole, if it is still what they read (else
# they read it again): a loop's take meanwhile is never undone, nor undoes it.
# KEYS: status, change hash, timeline.
# ARGV: change, the guidance was there (1/0), the guidance read, the guidance
# after ("": none), then the events' JSON pieces.
# Returns 1 when written, 0 when the batch has no such loop, 2 when the guidance changed.
GUIDE = (
    """
if not redis.call('HGET', KEYS[1], ARGV[1]) then return 0 end
local current = redis.call('HGET', KEYS[2], 'guidance')
if ARGV[2] == '1' then
  if current ~= ARGV[3] then return 2 end
elseif current then return 2 end
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[2], 'guidance')
else
  redis.call('HSET', KEYS[2], 'guidance', ARGV[4])
end
"""
    + numbered_events("5")
    + """
return 1
"""
)


def request_json(request: Request) -> str:
    """A request as the hash's ``controls`` holds it."""
    return json.dumps(STATE_CONVERTER.unstructure(request))


@attrs.frozen
class ControlSet:
    """What setting a control did.

    Attributes:
        written: The control was written (False: it stood as asked already,
            or the loop is not where the control needs it).
        before: The controls before.
        state: The loop's state when it is not where the control needs it, else None.
    """

    written: bool
    before: LoopControls
    state: str | None = None


def set_control(
    connection: Connection,
    change: str,
    member: str,
    request: Request | None,
    *,
    where: str,
    keep: bool,
    events: list[Event],
    when: str,
) -> ControlSet:
    """Set (or with ``None`` remove) one control, with its events, in one script.

    Raises:
        UsageError: the batch has no loop for the change.
    """
    keys = connection.config.keys
    script = connection.script(SET)
    args: list[Any] = [change, member, "" if request is None else request_json(request), where]
    args.extend(("1" if keep else "0", *event_pieces(events, when, change)))
    script_keys = [keys.status, keys.change(change), keys.timeline(change)]
    written, *rest = connection.once(lambda _client: script(keys=script_keys, args=args))
    if int(written) == 0 and str(rest[0]) == "unknown":
        raise _no_loop(connection, change)
    if int(written) == 0:
        return ControlSet(False, LoopControls(), state=str(rest[1]))
    return ControlSet(int(written) == 1, controls_from_json(str(rest[0])))


# -- a person's guidance (forge steer) ----------------------------------------


def read_fleet_guidance(connection: Connection, change: str) -> GuidanceState:
    """The guidance waiting on the server for the loop's next iteration (unreadable: blocked)."""
    keys = connection.config.keys
    return guidance_from_json(connection.once(lambda c: read_guidance_text(c, keys, change)))


def give_fleet_guidance(connection: Connection, change: str, given: Guidance) -> GuidanceState:
    """Add ``given`` for the loop's next iteration (``guidance.given`` recorded); the state after.

    Raises:
        UsageError: the batch has no loop for the change.
        StateError: the guidance on the server is unreadable: it is not
            added to (``forge steer --clear`` removes what is there).
    """
    event = OtherEvent(
        name=GUIDANCE_GIVEN, fields={"by": given.by, "keep": given.keep, "text": given.text}
    )

    def change_it(before: GuidanceState) -> tuple[GuidanceState, list[Event]] | None:
        if before.blocked is not None:
            raise StateError(
                f'the guidance waiting for "{change}" on the fleet\'s server is unreadable: '
                "nothing is delivered, and nothing can be added to it",
                hint=f"forge steer {change} --clear --fleet removes it; then give yours again",
            )
        return GuidanceState(entries=(*before.entries, given)), [event]

    _, after = _replace_guidance(connection, change, change_it, when=given.at)
    return after


def clear_fleet_guidance(
    connection: Connection, change: str, *, by: str, when: str
) -> GuidanceState:
    """Remove every piece of the loop's guidance (unreadable too); what there was.

    Records ``guidance.cleared`` when there was any.

    Raises:
        UsageError: the batch has no loop for the change.
    """

    def change_it(before: GuidanceState) -> tuple[GuidanceState, list[Event]] | None:
        if before == GuidanceState():
            return None
        fields = {"by": by, "count": len(before.entries)}
        return GuidanceState(), [OtherEvent(name=GUIDANCE_CLEARED, fields=fields)]

    before, _ = _replace_guidance(connection, change, change_it, when=when)
    return before


_Change = Callable[[GuidanceState], tuple[GuidanceState, list[Event]] | None]


def _replace_guidance(
    connection: Connection, change: str, change_it: _Change, *, when: str
) -> tuple[GuidanceState, GuidanceState]:
    """Read the guidance, then write what ``change_it`` makes of it if nobody changed it meanwhile.

    ``change_it(before)`` gives the guidance after and its events, or None
    to write nothing. Returns the guidance before and after.
    """
    keys = connection.config.keys
    while True:
        text = connection.once(lambda client: read_guidance_text(client, keys, change))
        before = guidance_from_json(text)
        changed = change_it(before)
        if changed is None:
            _require_loop(connection, change)
            return before, before
        after, events = changed
        value = guidance_json(after.entries) if after.entries else ""
        written = _write_guidance(
            connection, change, text, value, event_pieces(events, when, change)
        )
        if written == 0:
            raise _no_loop(connection, change)
        if written == 1:
            return before, after


def _write_guidance(
    connection: Connection, change: str, read: str | None, value: str, pieces: list[str]
) -> int:
    """:data:`GUIDE`: 1 written, 0 no such loop, 2 the guidance is no longer ``read``."""
    keys = connection.config.keys
    script = connection.script(GUIDE)
    script_keys = [keys.status, keys.change(change), keys.timeline(change)]
    args: list[Any] = [change, "0" if read is None else "1", read or "", value, *pieces]
    return int(connection.once(lambda _client: script(keys=script_keys, args=args)))


def _require_loop(connection: Connection, change: str) -> None:
    keys = connection.config.keys
    if not connection.once(lambda client: client.hexists(keys.status, change)):
        raise _no_loop(connection, change)


def _no_loop(connection: Connection, change: str) -> UsageError:
    return UsageError(
        f'the fleet batch "{connection.config.name}" has no loop for change "{change}"',
        hint="forge fleet status lists its loops",
    )
