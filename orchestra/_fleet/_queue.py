"""Handing out loops: a Redis stream, its consumer group, leases and fencing tokens.

``forge fleet submit`` adds one stream entry per loop. Each host reads new
entries through the consumer group ``workers`` and claims a loop with a
script that sets the change's lease (a key that expires) and hands out the
next fencing token. While the loop runs, the host renews the lease and
re-claims its stream entry (so the entry never looks idle). A host that
stops renewing loses both: after a lease its entry is idle long enough for
``XAUTOCLAIM`` on another host, whose claim hands out a newer token; from
then on every write of the old host is refused. When a loop ends, one script
records its ending, acknowledges and deletes the entry (the stream holds
only the loops still to run) and drops the lease.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from .._errors import UsageError
from ._config import GROUP, Keys

# KEYS: lease, fence, status. ARGV: host, lease ms, change, status JSON.
# Returns {1, token} or {0, why}.
CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, redis.call('GET', KEYS[1])} end
local current = redis.call('HGET', KEYS[3], ARGV[3])
if current then
  local state = cjson.decode(current)['state']
  if state ~= 'queued' and state ~= 'running' then return {0, 'ended'} end
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token, 'PX', ARGV[2])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
return {1, tostring(token)}
"""

# KEYS: fence, lease, loops. ARGV: token, host, lease ms, entry id, group.
RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2] .. ' ' .. ARGV[1], 'PX', ARGV[3])
redis.call('XCLAIM', KEYS[3], ARGV[5], ARGV[2], 0, ARGV[4], 'JUSTID')
return 1
"""

# KEYS: fence, lease, loops, status. ARGV: token, group, entry id, change, status JSON.
FINISH = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[4], ARGV[4], ARGV[5])
redis.call('XACK', KEYS[3], ARGV[2], ARGV[3])
redis.call('XDEL', KEYS[3], ARGV[3])
redis.call('DEL', KEYS[2])
return 1
"""

# KEYS: fence, lease, loops, status. ARGV: token, group, entry id, host, lease ms, change,
# status JSON. A host that stops gives its loop back: the entry looks idle at once.
RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
redis.call('XCLAIM', KEYS[3], ARGV[2], ARGV[4], 0, ARGV[3], 'IDLE', ARGV[5], 'JUSTID')
redis.call('HSET', KEYS[4], ARGV[6], ARGV[7])
return 1
"""

QUEUED = "queued"
RUNNING = "running"
DONE_STATE = "done"
ESCALATED = "escalated"
ENDED = (DONE_STATE, ESCALATED)


@attrs.frozen
class LoopSpec:
    """One loop of a submitted batch, as every host reads it.

    Attributes:
        change: The change.
        policy: The loop's effective policy (``policy_as_dict``).
        dir: Its folder, present at this path on every host ("" for a repo).
        repo: A git URL each host clones ("" for a dir).
        ref: The base a repo loop's branch starts from.
        push: Push the loop's branch ``forge/<change>`` when it ends.
        worktree: A dir loop works in its own worktree of ``dir``.
        base: The worktree's base.
    """

    change: str
    policy: dict[str, Any]
    dir: str = ""
    repo: str = ""
    ref: str = "HEAD"
    push: bool = False
    worktree: bool = False
    base: str = "HEAD"

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> LoopSpec:
        return cls(**json.loads(text))


@attrs.frozen
class BatchInfo:
    """What ``forge fleet submit`` recorded about the batch."""

    loops: int
    calls: int
    window: float
    warn_at: float
    submitted_at: float
    source: str

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> BatchInfo:
        return cls(**json.loads(text))


def submit(
    client: Any,
    keys: Keys,
    batch: BatchInfo,
    specs: list[LoopSpec],
    now_iso: str,
    *,
    replace: bool,
) -> None:
    """Enqueue a batch's loops (one pipeline, applied as one transaction).

    Raises:
        UsageError: a batch is already submitted under this name (without ``replace``).
    """
    if client.exists(keys.batch) and not replace:
        raise UsageError(
            f'a batch is already submitted under the name "{keys.name}"',
            hint="pick another [fleet] name, or pass --replace to drop it and its state",
        )
    if replace:
        drop_all(client, keys)
    pipe = client.pipeline(transaction=True)
    pipe.xgroup_create(keys.loops, GROUP, id="0", mkstream=True)
    for spec in specs:
        pipe.xadd(keys.loops, {"loop": spec.to_json()})
        # Kept after its stream entry is deleted: a requeue adds it again.
        pipe.hset(keys.specs, spec.change, spec.to_json())
        pipe.hset(keys.status, spec.change, status_json(QUEUED, since=now_iso))
        # The hashes keep no order: ``forge land`` lands the loops as they were submitted.
        pipe.rpush(keys.order, spec.change)
    pipe.set(keys.batch, batch.to_json())
    pipe.execute()


def batch_keys(client: Any, keys: Keys) -> list[str]:
    """Every key of the batch on the server."""
    where: dict[str, Any] = {}
    node_of = getattr(client, "get_node_from_key", None)
    if node_of is not None:
        # A cluster: every key of the batch is in its slot (the hash tag), so
        # only the node holding it is scanned, not every primary.
        where["target_nodes"] = node_of(keys.batch)
    return [str(key) for key in client.scan_iter(match=f"{keys.prefix}*", count=500, **where)]


def drop_all(client: Any, keys: Keys) -> int:
    """Delete every key of the batch (its loops, state and limiter); returns how many."""
    return sum(int(client.delete(key)) for key in batch_keys(client, keys))


def read_batch(client: Any, keys: Keys) -> BatchInfo | None:
    text = client.get(keys.batch)
    return None if text is None else BatchInfo.from_json(text)


def status_json(state: str, **fields: Any) -> str:
    return json.dumps({"state": state, **fields})


def read_status(client: Any, keys: Keys) -> dict[str, dict[str, Any]]:
    """Every loop's state: ``{change: {"state": …, "host": …, …}}``."""
    raw: dict[str, str] = client.hgetall(keys.status)
    return {change: json.loads(text) for change, text in raw.items()}


def all_ended(client: Any, keys: Keys) -> bool:
    """Whether every loop of the batch has ended (done or escalated)."""
    statuses = read_status(client, keys)
    return bool(statuses) and all(s.get("state") in ENDED for s in statuses.values())


def forget_entry(client: Any, keys: Keys, entry_id: str) -> None:
    """Acknowledge and delete a loop's stream entry: the loop has ended."""
    pipe = client.pipeline(transaction=True)
    pipe.xack(keys.loops, GROUP, entry_id)
    pipe.xdel(keys.loops, entry_id)
    pipe.execute()


def next_entry(
    client: Any, keys: Keys, host: str, *, min_idle_ms: int | None
) -> tuple[str, LoopSpec] | None:
    """A loop for this host: first one a quiet host left (idle past a lease), then a new one."""
    if min_idle_ms is not None:
        # XAUTOCLAIM looks at a few pending entries per call: follow its cursor
        # through the whole pending list until one is idle long enough.
        cursor = "0-0"
        while True:
            reply = client.xautoclaim(
                keys.loops, GROUP, host, min_idle_ms, start_id=cursor, count=1
            )
            claimed = [entry for entry in reply[1] if entry and entry[1]]
            if claimed:
                entry_id, fields = claimed[0]
                return entry_id, LoopSpec.from_json(fields["loop"])
            cursor = reply[0]
            if cursor == "0-0":
                break
    reply = client.xreadgroup(GROUP, host, {keys.loops: ">"}, count=1)
    for _stream, entries in reply or ():
        for entry_id, fields in entries:
            return entry_id, LoopSpec.from_json(fields["loop"])
    return None
