"""A person's controls of one loop of a fleet batch: reset, requeue, cancel, read spend.

Each control is one Lua script, so it sees the loop's state and changes it
in one step, whatever the hosts do meanwhile; each is journalled on the
change's timeline stream with its reason and who ran it.

- **cancel** stops a loop wherever it is. Queued: its stream entry is
  deleted before any host reads it. Running: the change's fencing token is
  bumped, so the host's next renewal (within a heartbeat) or write is
  refused and that host stops the loop's executor, as when a loop is taken
  over. Its lease is left to lapse (that host cannot renew it): a requeue is
  accepted at once, but no host claims the loop before the lease has lapsed,
  by when the old agent is gone. The loop ends ``cancelled`` (escalated: the
  batch exits 1).
- **requeue** puts an ended loop (done, escalated, cancelled) back in the
  queue with its state kept: iterations used, spend and the timeline go on.
  A person's stop the ended run never took is dropped (a pause stands).
  A loop whose circuit escalated, or that used all its iterations, would
  stop again at once: reset it instead (its iterations counted afresh).
- **reset** (``forge circuit --reset``) closes the loop circuit and clears
  the verify streak, in the server's state; an escalated loop is put back in
  the queue. Refused while a host runs the loop: its writes would race the
  person's (cancel it first, or let it end).
- **spend reset** (``forge spend --reset``) starts the totals again; refused
  while a host runs the loop, for the same reason.

The batch's expiry follows: a requeue lifts it, a control that leaves every
loop ended sets it again (:mod:`._retention`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import attrs

from .._circuit import CLOSED_CIRCUIT, CircuitState
from .._errors import UsageError
from .._operator import operator as operator
from .._spend import SpendTotals
from .._state import Event, OtherEvent
from ._config import GROUP, Keys
from ._connection import Connection
from ._queue import ESCALATED, QUEUED, LoopSpec, all_ended, status_json
from ._retention import expire_batch, revive_batch
from ._store import event_pieces, numbered_events, read_state, state_json

CANCELLED = "cancelled"
"""The reason a cancelled loop ended with (its state: escalated)."""

# The modes of CONTROL: what the loop's state must be, and whether it is queued again.
RESET = "reset"  # not while running; an escalated loop is queued again
REQUEUE = "requeue"  # only once ended; always queued again
WRITE = "write"  # not while running; never queued
CANCEL = "cancel"  # only while queued or running; ends it

# KEYS: status, change hash, timeline, loops, specs, fence.
# ARGV: change, mode, status JSON when queued again, status JSON when cancelled,
# group, number of fields, field/value pairs, then the events' JSON pieces.
# Returns {1, state before, queued again (0/1)} or {0, why, the state or host}.
CONTROL = (
    """
local change, mode = ARGV[1], ARGV[2]
local current = redis.call('HGET', KEYS[1], change)
if not current then return {0, 'unknown', ''} end
local loop = cjson.decode(current)
local state = loop['state']
local ended = state ~= 'queued' and state ~= 'running'
if mode == 'cancel' and ended then return {0, 'ended', state} end
if mode == 'requeue' and not ended then return {0, 'not-ended', state} end
if (mode == 'reset' or mode == 'write') and state == 'running' then
  return {0, 'running', tostring(loop['host'] or '')}
end
local again = mode == 'requeue' or (mode == 'reset' and state == 'escalated')
local spec = redis.call('HGET', KEYS[5], change)
if again and not spec then return {0, 'no-spec', state} end
local i = 7
for _ = 1, tonumber(ARGV[6]) do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
"""
    + numbered_events("i")
    + """
if mode == 'cancel' then
  -- The host running it is fenced out: its next renewal or write is refused.
  -- Its lease stays until it lapses: deleted, a requeue could be claimed while
  -- that host's agent still runs (it stops only at its next renewal, plus grace).
  redis.call('INCR', KEYS[6])
  local entries = redis.call('XRANGE', KEYS[4], '-', '+')
  for _, entry in ipairs(entries) do
    local ok, spec_of = pcall(cjson.decode, entry[2][2])
    if ok and spec_of['change'] == change then
      redis.call('XACK', KEYS[4], ARGV[5], entry[1])
      redis.call('XDEL', KEYS[4], entry[1])
    end
  end
  redis.call('HSET', KEYS[1], change, ARGV[4])
end
if again then
  -- A person's stop the ended run never took is not for the next one.
  local text = redis.call('HGET', KEYS[2], 'controls')
  local ok, controls = pcall(cjson.decode, text or '')
  if ok and type(controls) == 'table' and controls['stop'] ~= nil then
    controls['stop'] = nil
    redis.call('HSET', KEYS[2], 'controls', cjson.encode(controls))
  end
  redis.call('XADD', KEYS[4], '*', 'loop', spec)
  redis.call('HSET', KEYS[1], change, ARGV[3])
end
return {1, state, again and 1 or 0}
"""
)


@attrs.frozen
class Applied:
    """What a control did: the loop's state before, and whether it is queued again."""

    change: str
    was: str
    requeued: bool


def requeued_circuit(circuit: CircuitState) -> CircuitState:
    """The circuit of a loop put back in the queue: its ending forgotten, the rest kept."""
    return attrs.evolve(circuit, finished=None)


def requeue_refusal(circuit: CircuitState, max_iterations: int | None) -> str | None:
    """Why a requeue would be pointless (the loop would stop at once), or None."""
    if circuit.escalated:
        return "its circuit escalated: it would stop again at once"
    if max_iterations is not None and circuit.iterations_used >= max_iterations:
        return f"it has used all {max_iterations} of its iterations: it would stop again at once"
    return None


def cancelled_by(client: Any, keys: Keys, change: str) -> str | None:
    """``cancelled by user@host: reason`` when a person cancelled the loop, else None."""
    text = client.hget(keys.status, change)
    loop = {} if text is None else json.loads(text)
    return str(loop.get("detail")) if loop.get("reason") == CANCELLED else None


def loop_state(connection: Connection, change: str) -> dict[str, Any] | None:
    """The loop's status entry (state, host, ending), or None when the batch has no such loop."""
    keys = connection.config.keys
    text = connection.once(lambda client: client.hget(keys.status, change))
    return None if text is None else dict(json.loads(text))


def reset_circuit(connection: Connection, change: str, *, reason: str) -> tuple[Applied, Any]:
    """Close the loop circuit, clear the verify streak; returns what was done, the state before.

    Raises:
        UsageError: no such loop, or a host runs it now.
    """
    from .._state import LOOP_CIRCUIT, VERIFY_BREAKER, BreakerReset
    from .._verify import holds, reset

    keys = connection.config.keys
    before, _ = connection.once(lambda client: read_state(client, keys, change))
    now = connection.server_time()
    by = operator()
    events: list[Event] = [
        BreakerReset(
            breaker=LOOP_CIRCUIT,
            was=before.circuit.state,
            opens=before.circuit.opens,
            iterations_used=before.circuit.iterations_used,
            was_blocked=before.circuit.blocked,
            reason=reason,
            extra={"by": by},
        )
    ]
    fields: dict[str, object] = {"circuit": CLOSED_CIRCUIT}
    if holds(before.verify):
        fields["verify"] = reset(before.verify, now=server_iso(now))
        events.append(
            BreakerReset(
                breaker=VERIFY_BREAKER,
                cleared_consecutive_failures=before.verify.consecutive_failures,
                was_open=before.verify.open,
                was_blocked=before.verify.blocked,
                reason=reason,
                extra={"by": by},
            )
        )
    applied = _control(connection, change, RESET, fields, events, now=now, by=by, reason=reason)
    return applied, before


def requeue(connection: Connection, change: str, *, reason: str) -> Applied:
    """Put an ended loop back in the queue, its state kept.

    Raises:
        UsageError: no such loop, it has not ended, or it would stop again at once.
    """
    keys = connection.config.keys
    before, _ = connection.once(lambda client: read_state(client, keys, change))
    spec = read_spec(connection, change)
    refusal = requeue_refusal(before.circuit, None if spec is None else _max_iterations(spec))
    if refusal is not None:
        raise UsageError(
            f'change "{change}" is not requeued: {refusal}',
            hint=f"forge circuit {change} --reset --reason '...' closes it and requeues the loop",
        )
    by = operator()
    event = OtherEvent(name="fleet.requeued", fields={"by": by, "reason": reason})
    fields: dict[str, object] = {"circuit": requeued_circuit(before.circuit)}
    return _control(connection, change, REQUEUE, fields, [event], by=by, reason=reason)


def cancel(connection: Connection, change: str, *, reason: str) -> Applied:
    """Stop a queued or running loop wherever it is; it ends ``cancelled``.

    Raises:
        UsageError: no such loop, or it has already ended.
    """
    by = operator()
    event = OtherEvent(name="fleet.cancelled", fields={"by": by, "reason": reason})
    return _control(connection, change, CANCEL, {}, [event], by=by, reason=reason)


def reset_spend(connection: Connection, change: str) -> tuple[Applied, SpendTotals]:
    """Start the change's spend totals again; returns what was done and the totals cleared.

    Raises:
        UsageError: no such loop, or a host runs it now.
    """
    keys = connection.config.keys
    before, _ = connection.once(lambda client: read_state(client, keys, change))
    by = operator()
    event = OtherEvent(
        name="spend.reset",
        fields={
            "by": by,
            "tokens": before.spend.tokens,
            "tool_calls": before.spend.tool_calls,
            "cost_usd": before.spend.cost_usd,
        },
    )
    fields: dict[str, object] = {"spend": SpendTotals()}
    applied = _control(connection, change, WRITE, fields, [event], by=by, reason="")
    return applied, before.spend


def read_spend(connection: Connection, change: str | None = None) -> dict[str, SpendTotals]:
    """Each loop's spend as the server holds it (one change, or every loop of the batch)."""
    keys = connection.config.keys

    def read(client: Any) -> dict[str, SpendTotals]:
        changes = [change] if change is not None else sorted(client.hkeys(keys.status))
        totals: dict[str, SpendTotals] = {}
        for name in changes:
            state, _ = read_state(client, keys, name)
            totals[name] = state.spend
        return totals

    return connection.once(read)


def _control(
    connection: Connection,
    change: str,
    mode: str,
    fields: dict[str, object],
    events: Sequence[Event],
    *,
    by: str,
    reason: str,
    now: float | None = None,
) -> Applied:
    config = connection.config
    keys = config.keys
    when = server_iso(connection.server_time() if now is None else now)
    queued = status_json(QUEUED, since=when, requeued_by=by, reason=reason or None)
    cancelled = status_json(
        ESCALATED, reason=CANCELLED, detail=f"cancelled by {by}: {reason}", ended=when
    )
    args: list[Any] = [change, mode, queued, cancelled, GROUP, len(fields)]
    for name, state in fields.items():
        args.extend((name, state_json(state)))
    args.extend(event_pieces(events, when, change))
    script = connection.script(CONTROL)
    script_keys = [
        keys.status,
        keys.change(change),
        keys.timeline(change),
        keys.loops,
        keys.specs,
        keys.fence(change),
    ]
    ok, why, detail = connection.once(lambda _client: script(keys=script_keys, args=args))
    if int(ok) != 1:
        raise _refused(config.name, change, mode, str(why), str(detail))
    applied = Applied(change, str(why), bool(int(detail)))
    connection.once(lambda client: _settle(client, keys, config.keep, applied.requeued))
    return applied


def _settle(client: Any, keys: Keys, keep: float, requeued: bool) -> None:
    """Keep the batch's expiry consistent: lifted when live again, set when all ended."""
    if requeued:
        revive_batch(client, keys)
    elif all_ended(client, keys):
        expire_batch(client, keys, keep)


def _refused(name: str, change: str, mode: str, why: str, detail: str) -> UsageError:
    if why == "unknown":
        return UsageError(
            f'the fleet batch "{name}" has no loop for change "{change}"',
            hint="forge fleet status lists its loops",
        )
    if why == "running":
        return UsageError(
            f'change "{change}" is running on {detail or "a host"}: not while it runs',
            hint=f"let it end, or stop it first: forge fleet cancel {change} --reason '...'",
        )
    if why == "ended":
        return UsageError(
            f'change "{change}" has already ended ({detail}): nothing to cancel',
            hint=f"forge fleet requeue {change} runs it again",
        )
    if why == "not-ended":
        return UsageError(
            f'change "{change}" is {detail}, not ended: only an ended loop is requeued',
            hint=f"forge fleet cancel {change} stops it",
        )
    if why == "no-spec":
        return UsageError(
            f'change "{change}" cannot be queued again: the batch was submitted without '
            "its loops' specs (by an older forge)",
            hint="forge fleet submit --replace submits the batch again",
        )
    return UsageError(f'change "{change}": {mode} refused ({why})')


def server_iso(epoch: float) -> str:
    """The server's time as the timeline's timestamps (as :meth:`ServerClock.iso`)."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))
    return f"{whole}.{int((epoch % 1) * 1000):03d}Z"


def _max_iterations(spec: LoopSpec) -> int:
    from .._policy import structure_policy

    return structure_policy(spec.policy, f"fleet loop {spec.change}").run.max_iterations


def read_spec(connection: Connection, change: str) -> LoopSpec | None:
    """The loop as submitted (its effective policy among it), or None."""
    keys = connection.config.keys
    text = connection.once(lambda client: client.hget(keys.specs, change))
    return None if text is None else LoopSpec.from_json(str(text))
