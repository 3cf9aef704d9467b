"""A person's pause, resume and stop of a fleet loop, kept on the server.

The change's hash holds them in its ``controls`` field (JSON: ``paused`` and
``stop``, each ``{by, at, reason}``), as ``controls.yaml`` holds them for a
loop of this host; the host running the loop reads them between iterations
through its store, whichever host that is. A person's write and the loop's
removal of the stop it obeys are each one Lua script, so neither overwrites
the other. The times are the server's. The loop's side (reading them, removing the
stop it obeys) is its store's (:mod:`._store`).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from .._errors import UsageError
from .._state import STATE_CONVERTER, Event, LoopControls, Request
from ._connection import Connection
from ._store import controls_from_json, event_pieces

# Where a loop must be for a control to apply: running (a stop), or anywhere
# but unknown (a pause and a resume stand for the loop's next run too).
RUNNING = "running"
ANY = "any"

# KEYS: status, change hash, timeline.
# ARGV: change, member (paused | stop), request JSON ("" removes it),
# where the loop must be (running | any), keep an existing member (1/0), then
# the events' JSON pieces. Returns {1, controls before} when written,
# {2, controls before} when kept as it was, {0, why, state} when refused.
SET = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return {0, 'unknown', ''} end
local state = cjson.decode(current)['state']
if ARGV[4] == 'running' and state ~= 'running' then return {0, 'not-running', state} end
local text = redis.call('HGET', KEYS[2], 'controls') or '{}'
local ok, controls = pcall(cjson.decode, text)
if not ok or type(controls) ~= 'table' then controls = {} end
local had = controls[ARGV[2]] ~= nil and controls[ARGV[2]] ~= cjson.null
if (ARGV[5] == '1' and had) or (ARGV[3] == '' and not had and ok) then return {2, text} end
if ARGV[3] == '' then controls[ARGV[2]] = nil else controls[ARGV[2]] = cjson.decode(ARGV[3]) end
controls['blocked'] = nil
local seq = tonumber(redis.call('HGET', KEYS[2], 'seq') or '0')
local i = 6
while i <= #ARGV do
  seq = seq + 1
  redis.call('XADD', KEYS[3], '*', 'event', ARGV[i] .. seq .. ARGV[i + 1])
  i = i + 2
end
redis.call('HSET', KEYS[2], 'controls', cjson.encode(controls), 'seq', seq)
return {1, text}
"""


def request_json(request: Request) -> str:
    """A request as the hash's ``controls`` holds it."""
    return json.dumps(STATE_CONVERTER.unstructure(request))


@attrs.frozen
class Applied:
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
) -> Applied:
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
        raise UsageError(
            f'the fleet batch "{connection.config.name}" has no loop for change "{change}"',
            hint="forge fleet status lists its loops",
        )
    if int(written) == 0:
        return Applied(False, LoopControls(), state=str(rest[1]))
    return Applied(int(written) == 1, controls_from_json(str(rest[0])))
