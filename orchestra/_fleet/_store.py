"""A change's state on the fleet's Redis server: the engine's store, for many hosts.

Per change: a hash with the loop circuit, the verify streak and the spend
(JSON, the same fields as the files under ``.forge/``), and a stream that is
its timeline (one entry per event, the same JSON line a ``timeline.jsonl``
holds), capped at ``[fleet] timeline_max`` events: past it the oldest tenth
is dropped and a ``timeline.trimmed`` event says how many, and which seqs.
What a loop that starts folds from its timeline (the stagnation history, the
calls refused, the iterations started, the alerts held) is folded from that
stream when a loop starts, as from the file: the fold of the events a trim
dropped is kept in the hash (``resume``), and the fold goes on from it.

Every write is one Lua script that first checks the change's fencing token:
a host whose lease lapsed and whose loop another host took over can no
longer write anything (:class:`LeaseLost`). A write whose answer was lost to
a dropped connection is sent again with the same commit id, which the script
recognises, so it is applied once.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from .._circuit import CircuitState
from .._engine import (
    Decision,
    LoopState,
    Resumed,
    Resuming,
    circuit_read,
    resume,
)
from .._engine import IterationRecord as _Record
from .._spend import SpendTotals
from .._state import (
    ONCE,
    STATE_CONVERTER,
    UNTIL_CLEARED,
    Event,
    Guidance,
    GuidanceState,
    IterationStarted,
    LoopControls,
    Request,
    decode_event,
    event_record,
)
from .._verify import VerifyAttempts
from ._config import Keys
from ._connection import Connection, FleetUnavailable, LeaseLost

# Lua, after a write whose events took the timeline past its cap (the hash's
# ``timeline_max``, which every write sets): the writer has read the oldest
# tenth (so a marker comes once per tenth, not per event) and folded it onto
# the hash's ``resume`` (the fold of what earlier trims dropped): one script
# drops exactly those entries, keeps the new fold and notes what went in a
# ``timeline.trimmed`` event, counted in the hash too. The fold is Python's
# (:func:`resume`, one home); the script only checks the stream still starts
# where the writer read it. The marker takes the next seq; its time and
# change are the last event's.
# KEYS: fence, change hash, timeline stream.
# ARGV: token, first dropped id, first kept id, number dropped, the new fold.
TRIM = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local first = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 1)[1]
if first == nil or first[1] ~= ARGV[2] then return 0 end
redis.call('XTRIM', KEYS[3], 'MINID', ARGV[3])
local kept = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 1)[1]
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
last = cjson.decode(last[2][2])
local dropped = tonumber(ARGV[4])
local total = redis.call('HINCRBY', KEYS[2], 'trimmed', dropped)
local seq = tonumber(redis.call('HGET', KEYS[2], 'seq') or '0') + 1
local marker = {ts = last['ts'], seq = seq, change = last['change'],
  event = 'timeline.trimmed', dropped = dropped, dropped_total = total,
  cap = tonumber(redis.call('HGET', KEYS[2], 'timeline_max') or '0'),
  first_seq = cjson.decode(first[2][2])['seq'],
  last_seq = cjson.decode(kept[2][2])['seq'] - 1}
redis.call('XADD', KEYS[3], '*', 'event', cjson.encode(marker))
redis.call('HSET', KEYS[2], 'seq', seq, 'resume', ARGV[5])
return 1
"""

# KEYS: fence, change hash, timeline stream.
# ARGV: token, commit id, number of fields, field/value pairs, then per event
# the JSON before and after its seq (the script numbers the events). Answers
# 2 when the timeline is past its cap (the writer trims it, :data:`TRIM`).
COMMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('HGET', KEYS[2], 'commit') == ARGV[2] then return 0 end
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local seq = tonumber(redis.call('HGET', KEYS[2], 'seq') or '0')
local appended = i <= #ARGV
while i <= #ARGV do
  seq = seq + 1
  redis.call('XADD', KEYS[3], '*', 'event', ARGV[i] .. seq .. ARGV[i + 1])
  i = i + 2
end
redis.call('HSET', KEYS[2], 'seq', seq, 'commit', ARGV[2])
local cap = tonumber(redis.call('HGET', KEYS[2], 'timeline_max') or '0')
if appended and cap > 0 and redis.call('XLEN', KEYS[3]) > cap then return 2 end
return 1
"""

# KEYS: fence, change hash. ARGV: token, the stop's time.
# Returns -1 when the fence has moved, 1 when the stop was removed (or this very
# stop was, by a call whose answer was lost), 0 when it was not there.
TAKE_STOP = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('HGET', KEYS[2], 'stop_taken') == ARGV[2] then return 1 end
local text = redis.call('HGET', KEYS[2], 'controls')
if not text then return 0 end
local ok, controls = pcall(cjson.decode, text)
if not ok or type(controls) ~= 'table' then return 0 end
local stop = controls['stop']
if stop == nil or stop == cjson.null or stop['at'] ~= ARGV[2] then return 0 end
controls['stop'] = nil
redis.call('HSET', KEYS[2], 'controls', cjson.encode(controls), 'stop_taken', ARGV[2])
return 1
"""

# The loop's take of a person's guidance (``forge steer``): the guidance as
# the loop read it is replaced by what stays (its until-cleared entries; none:
# the field goes), only if nobody changed it since (else the loop reads it
# again), so a person's guidance added meanwhile is never lost. A take whose
# answer was lost to a dropped connection is sent again with the same id,
# which the script recognises: applied once, its guidance delivered once.
# KEYS: fence, change hash. ARGV: token, take id, the guidance read, what stays ("": none).
# Returns -1 when the fence has moved, 1 when taken, 0 when the guidance changed since it was read.
TAKE_GUIDANCE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('HGET', KEYS[2], 'guidance_take') == ARGV[2] then return 1 end
if redis.call('HGET', KEYS[2], 'guidance') ~= ARGV[3] then return 0 end
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[2], 'guidance')
else
  redis.call('HSET', KEYS[2], 'guidance', ARGV[4])
end
redis.call('HSET', KEYS[2], 'guidance_take', ARGV[2])
return 1
"""

# What a change's hash says of guidance it cannot read: nothing is delivered until cleared.
GUIDANCE_UNREADABLE = "unreadable on the fleet's server"

_SEQ_MARK = -7_351_042_069  # stands for the seq until the script numbers the event
_STATE_FIELDS: dict[str, type] = {
    "circuit": CircuitState,
    "verify": VerifyAttempts,
    "spend": SpendTotals,
}


def state_json(state: object) -> str:
    """A state object as the JSON the change's hash keeps."""
    return json.dumps(STATE_CONVERTER.unstructure(state), sort_keys=False)


def state_from_json(text: str | None, cls: type[Any], default: Any) -> Any:
    """A state object read back from the change's hash (absent: ``default``)."""
    if text is None:
        return default
    return STATE_CONVERTER.structure(json.loads(text), cls)


def numbered_events(first: str) -> str:
    """Lua that appends the events :func:`event_pieces` made, each with the change's next seq.

    The pieces are ``ARGV[first]`` on (a number, or a variable the script
    counted up to them); the change's hash is ``KEYS[2]``, its timeline ``KEYS[3]``.
    """
    return f"""
local seq = tonumber(redis.call('HGET', KEYS[2], 'seq') or '0')
local at = {first}
while at <= #ARGV do
  seq = seq + 1
  redis.call('XADD', KEYS[3], '*', 'event', ARGV[at] .. seq .. ARGV[at + 1])
  at = at + 2
end
redis.call('HSET', KEYS[2], 'seq', seq)
"""


def event_pieces(events: Sequence[Event], stamp: str, change: str) -> list[str]:
    """Each event's JSON line before and after its seq, which the writing script numbers."""
    pieces: list[str] = []
    for event in events:
        stamped = attrs.evolve(event, ts=stamp, seq=_SEQ_MARK, change=change)
        line = json.dumps(
            event_record(stamped), ensure_ascii=False, separators=(",", ":"), default=str
        )
        head, _, tail = line.partition(f'"seq":{_SEQ_MARK}')
        pieces.extend((head + '"seq":', tail))
    return pieces


def read_state(client: Any, keys: Keys, change: str) -> tuple[LoopState, list[Event]]:
    """A change's state and timeline as they stand on the server (one read each)."""
    state, _fold, events = read_resumable(client, keys, change)
    return state, events


def read_resumable(
    client: Any, keys: Keys, change: str
) -> tuple[LoopState, Resuming | None, list[Event]]:
    """As :func:`read_state`, with the fold of what trims dropped (None: nothing dropped)."""
    fields: dict[str, str] = client.hgetall(keys.change(change))
    entries = client.xrange(keys.timeline(change), "-", "+")
    events = [decode_event(json.loads(data["event"])) for _id, data in entries]
    return _state_of(fields), fold_from_json(fields.get("resume")), events


def fold_json(fold: Resuming) -> str:
    """The fold of a timeline's events as the change's hash keeps it (``resume``)."""
    kept = {"supervised": fold.supervised, "resumed": STATE_CONVERTER.unstructure(fold.resumed)}
    return json.dumps(kept, sort_keys=False)


def fold_from_json(text: str | None) -> Resuming | None:
    """The fold kept by :func:`fold_json` (None: none kept)."""
    if text is None:
        return None
    kept = json.loads(text)
    resumed = STATE_CONVERTER.structure(kept["resumed"], Resumed)
    return Resuming.going_on(resumed, supervised=bool(kept["supervised"]))


def _state_of(fields: dict[str, str]) -> LoopState:
    base = LoopState()
    return LoopState(
        circuit=state_from_json(fields.get("circuit"), CircuitState, base.circuit),
        verify=state_from_json(fields.get("verify"), VerifyAttempts, base.verify),
        spend=state_from_json(fields.get("spend"), SpendTotals, base.spend),
    )


def controls_from_json(text: str | None) -> LoopControls:
    """The controls a change's hash holds (unreadable: blocked, so the loop holds)."""
    if text is None:
        return LoopControls()
    try:
        data = json.loads(text)
        return LoopControls(
            paused=_request(data.get("paused")), stop=_request(data.get("stop")), blocked=None
        )
    except (ValueError, TypeError, AttributeError, KeyError):
        return LoopControls(blocked="unreadable on the fleet's server")


def guidance_json(entries: Sequence[Guidance]) -> str:
    """The guidance a change's hash keeps (``guidance``): a JSON list of {text, by, at, keep}."""
    return json.dumps([attrs.asdict(given) for given in entries], ensure_ascii=False)


def guidance_from_json(text: str | None) -> GuidanceState:
    """The guidance a change's hash holds (unreadable: blocked, so nothing is delivered)."""
    if text is None:
        return GuidanceState()
    try:
        data = json.loads(text)
        if not isinstance(data, list):
            raise TypeError("not a list")
        entries = tuple(
            Guidance(
                text=_text(entry["text"]),
                by=_text(entry["by"]),
                at=_text(entry["at"]),
                keep=_text(entry.get("keep", ONCE)),
            )
            for entry in data
        )
    except (ValueError, TypeError, AttributeError, KeyError):
        return GuidanceState(blocked=GUIDANCE_UNREADABLE)
    return GuidanceState(entries=entries)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def read_guidance_text(client: Any, keys: Keys, change: str) -> str | None:
    """The change's guidance as the server holds it, unparsed (None: none)."""
    text: str | None = client.hget(keys.change(change), "guidance")
    return text


def _request(data: Any) -> Request | None:
    if data is None:
        return None
    return Request(by=str(data["by"]), at=str(data["at"]), reason=str(data.get("reason", "")))


def read_controls(client: Any, keys: Keys, change: str) -> LoopControls:
    """The change's controls as the server holds them."""
    return controls_from_json(client.hget(keys.change(change), "controls"))


def timeline_lines(client: Any, keys: Keys, change: str, after: str = "-") -> list[tuple[str, str]]:
    """The change's timeline entries after stream id ``after``: (id, JSON line)."""
    start = "-" if after == "-" else f"({after}"
    entries = client.xrange(keys.timeline(change), start, "+")
    return [(entry_id, data["event"]) for entry_id, data in entries]


class RedisChangeStore:
    """One change's state on the server, written only while this host holds its lease.

    Args:
        connection: The host's connection.
        keys: The batch's keys.
        change: The change.
        token: The fencing token this host received when it claimed the loop.
        iso: The server's wall clock as the timeline's timestamps.
        owns_circuit: The loop moves the loop circuit (always, in a fleet).
        after_commit: Called (in the committing thread) after each iteration's
            record is written, while the lease is still this host's.
        trusted: Asked before every write: False once this host's watchdog may
            have killed the loop's executor (then nothing more is written).
    """

    def __init__(
        self,
        connection: Connection,
        keys: Keys,
        change: str,
        token: int,
        iso: Callable[[], str],
        *,
        owns_circuit: bool = True,
        after_commit: Callable[[], None] | None = None,
        trusted: Callable[[], bool] | None = None,
    ) -> None:
        self._after_commit = after_commit
        self._trusted = trusted
        self._connection = connection
        self._keys = keys
        self.change = change
        self.token = token
        self._iso = iso
        self._owns_circuit = owns_circuit
        self._state = LoopState()
        self._revoked = threading.Event()
        self._lapsed = threading.Event()
        self._script = connection.script(COMMIT)
        self._trim_script = connection.script(TRIM)
        self._take_stop_script = connection.script(TAKE_STOP)
        self._take_guidance_script = connection.script(TAKE_GUIDANCE)

    def revoke(self) -> None:
        """Another host holds the change now: refuse every write from now on, at once."""
        self._revoked.set()

    def lapse(self) -> None:
        """The lease could not be renewed in time: stop waiting out outages.

        A write is then tried once: the fence still decides whether it lands
        (nobody may have claimed the change meanwhile), but no write waits for
        a server that is gone while the loop is being stopped.
        """
        self._lapsed.set()

    @property
    def revoked(self) -> bool:
        return self._revoked.is_set()

    # -- the Store protocol ---------------------------------------------------

    def load(self) -> LoopState:
        """The change's state and its detectors' history, from the server."""
        state, fold, events = self._connection.retrying(
            lambda client: read_resumable(client, self._keys, self.change), give_up=self._gone
        )
        # Folded on from what trims dropped: counted as if the timeline were whole.
        resumed = resume(events, fold)
        circuit = state.circuit
        if self._owns_circuit and resumed.started > circuit.iterations_used:
            # An iteration that started but was never committed was spent too
            # (a host that died mid-iteration): the next one goes on after it.
            circuit = attrs.evolve(circuit, iterations_used=resumed.started, finished=None)
        self._state = attrs.evolve(
            state,
            circuit=circuit,
            history=resumed.history,
            # Refused calls use no iteration: the loop that takes over counts without them.
            refused=resumed.refused if self._owns_circuit else 0,
            measured=resumed.measured,
            alerts=resumed.alerts,
        )
        return self._state

    def refresh(self) -> LoopState:
        """The state as the server holds it (only the lease holder writes it)."""
        state, _ = self._read()
        # A person's reset starts the loop afresh, by the same rule a replay folds.
        fresh = circuit_read(self._state, state.circuit)
        self._state = attrs.evolve(fresh, verify=state.verify, spend=state.spend)
        return self._state

    def append(self, *events: Event) -> None:
        """Append events to the change's timeline stream."""
        self._write({}, events)

    def save_circuit(self, circuit: CircuitState, *events: Event) -> LoopState:
        """Write the loop circuit (and record why) outside an iteration's commit."""
        self._write({"circuit": circuit}, events)
        self._state = attrs.evolve(self._state, circuit=circuit)
        return self._state

    def begin(self, event: IterationStarted) -> LoopState:
        """An iteration starts: count it as used, then record it, in one write."""
        state = self._state
        fields: dict[str, object] = {}
        if self._owns_circuit:
            circuit = attrs.evolve(state.circuit, iterations_used=event.iteration, finished=None)
            state = attrs.evolve(state, circuit=circuit)
            fields["circuit"] = circuit
        self._write(fields, [event])
        self._state = state
        return state

    def current(self) -> LoopState:
        """The state the lease holder last wrote: nobody else writes it while the lease holds."""
        return self._state

    def commit(self, record: _Record, decision: Decision) -> bool:
        """Write spend, streak, circuit and events in one script (the lease's fence decides)."""
        if decision.before is not self._state:
            return False
        after = decision.after
        fields: dict[str, object] = {"spend": after.spend}
        if record.verify is not None and not record.verify_read_only:
            fields["verify"] = after.verify
        if self._owns_circuit:
            fields["circuit"] = after.circuit
        self._write(fields, decision.events)
        self._state = after
        if self._after_commit is not None and not self._gone():
            self._after_commit()
        return True

    def stop(self, event: Event, *, finished: str | None = None) -> None:
        """Record how the loop ended; the circuit keeps the ending."""
        fields: dict[str, object] = {}
        if self._owns_circuit:
            circuit = self._state.circuit
            if finished is not None:
                circuit = attrs.evolve(circuit, finished=finished)
            self._state = attrs.evolve(self._state, circuit=circuit)
            fields["circuit"] = circuit
        # Called while a cancelled loop unwinds too: wait out an outage for one
        # lease at most, never for ever.
        deadline = time.monotonic() + self._connection.config.lease
        self._write(fields, [event], give_up=lambda: time.monotonic() > deadline)

    def controls(self) -> LoopControls:
        """A person's pause or stop of the loop, as the server holds them."""
        return self._connection.retrying(
            lambda client: read_controls(client, self._keys, self.change), give_up=self._gone
        )

    def take_stop(self, run_began: float) -> Request | None:
        """The stop meant for this run, removed on the server as the loop obeys it."""
        request = self.controls().stop_for(run_began)
        if request is None:
            return None
        keys = [self._keys.fence(self.change), self._keys.change(self.change)]
        args = [self.token, request.at]
        taken = int(
            self._connection.retrying(
                lambda _client: self._take_stop_script(keys=keys, args=args), give_up=self._gone
            )
        )
        if taken < 0:
            self._revoked.set()
            raise LeaseLost(self.change)
        return request if taken == 1 else None

    def guidance_waiting(self) -> bool:
        """Whether a person's readable guidance waits on the server for the next iteration."""
        waiting = guidance_from_json(self._guidance_text())
        return waiting.blocked is None and bool(waiting.entries)

    def take_guidance(self) -> tuple[Guidance, ...]:
        """The guidance an iteration starting now is given; ``once`` entries used up.

        Taken on the server by :data:`TAKE_GUIDANCE`, fenced: read, then
        replaced by what stays only if a person changed nothing meanwhile
        (else read again). Unreadable guidance gives none.
        """
        take = uuid.uuid4().hex
        keys = [self._keys.fence(self.change), self._keys.change(self.change)]
        while True:
            text = self._guidance_text()
            waiting = guidance_from_json(text)
            if waiting.blocked is not None or not waiting.entries:
                return ()
            kept = tuple(given for given in waiting.entries if given.keep == UNTIL_CLEARED)
            if kept == waiting.entries:
                return kept  # nothing used up: nothing to write
            args = [self.token, take, text or "", guidance_json(kept) if kept else ""]

            def send(_client: Any, args: list[Any] = args) -> Any:
                return self._take_guidance_script(keys=keys, args=args)

            taken = int(self._connection.retrying(send, give_up=self._gone))
            if taken < 0:
                self._revoked.set()
                raise LeaseLost(self.change)
            if taken == 1:
                return waiting.entries

    def _guidance_text(self) -> str | None:
        return self._connection.retrying(
            lambda client: read_guidance_text(client, self._keys, self.change), give_up=self._gone
        )

    # -- the server -----------------------------------------------------------

    def _trim(self) -> None:
        """Drop the timeline's oldest tenth, its fold kept (see :data:`TRIM`)."""
        cap = self._connection.config.timeline_max
        left = cap - cap // 10 - 1
        keys = [
            self._keys.fence(self.change),
            self._keys.change(self.change),
            self._keys.timeline(self.change),
        ]

        def trim(client: Any) -> Any:
            length = int(client.xlen(keys[2]))
            if length <= cap:
                return 1  # trimmed already (an answer lost to a dropped connection)
            dropped = length - left
            fold = fold_from_json(client.hget(keys[1], "resume"))
            entries = client.xrange(keys[2], "-", "+", count=dropped + 1)
            gone = [decode_event(json.loads(data["event"])) for _id, data in entries[:dropped]]
            fold = (Resuming() if fold is None else fold).through(gone)
            args = [self.token, entries[0][0], entries[dropped][0], dropped, fold_json(fold)]
            # 0: the stream no longer starts where it was read; read it again.
            return self._trim_script(keys=keys, args=args)

        for _ in range(3):
            if self._gone() or (self._trusted is not None and not self._trusted()):
                return  # the next write finds out
            try:
                result = int(self._connection.once(trim))
            except FleetUnavailable:
                return  # the write landed: the trim is tried again after the next
            if result < 0:
                self._revoked.set()
                return
            if result == 1:
                return

    def _read(self) -> tuple[LoopState, list[Event]]:
        return self._connection.retrying(
            lambda client: read_state(client, self._keys, self.change), give_up=self._gone
        )

    def _write(
        self,
        fields: dict[str, object],
        events: Sequence[Event],
        *,
        give_up: Callable[[], bool] | None = None,
    ) -> None:
        if self.revoked:
            raise LeaseLost(self.change)
        stamp = self._iso()
        # The cap goes with every write: the script reads it from the hash.
        args: list[Any] = [self.token, uuid.uuid4().hex, len(fields) + 1]
        args.extend(("timeline_max", self._connection.config.timeline_max))
        for name, state in fields.items():
            args.extend((name, state_json(state)))
        args.extend(event_pieces(events, stamp, self.change))
        keys = [
            self._keys.fence(self.change),
            self._keys.change(self.change),
            self._keys.timeline(self.change),
        ]

        def stop_trying() -> bool:
            return self._gone() or (give_up is not None and give_up())

        def send(client: Any) -> Any:
            # Asked at every try: a write waiting out an outage may outlive the trust.
            if self._trusted is not None and not self._trusted():
                self._revoked.set()
                raise LeaseLost(self.change)
            return self._script(keys=keys, args=args)

        result = self._connection.retrying(send, give_up=stop_trying)
        if int(result) < 0:
            self._revoked.set()
            raise LeaseLost(self.change)
        if int(result) == 2:
            self._trim()

    def _gone(self) -> bool:
        return self._revoked.is_set() or self._lapsed.is_set()
