"""What the server keeps of a batch, and for how long.

- A batch whose loops have all ended expires ``[fleet] keep`` later: every
  key of it gets that expiry (a lease, and the limiter's keys that expire
  sooner, keep their own),
  set by each host that sees the batch ended and again by every control that
  touches it, so all its keys go together. A control that puts a loop back in
  the queue makes the batch live again: the expiry ``keep`` gave is lifted
  (a lease and the limiter's keys with an expiry of their own keep it).
- With ``[fleet] export`` (or ``forge fleet work --export DIR``) the host that
  sees the batch ended writes its export first, and a failed export leaves
  the batch without expiry.
- A host that left (finished, interrupted) is dropped from the host list a
  lease after its last heartbeat; a lost one (no heartbeat) after ``[fleet]
  forget_hosts``. Every host's heartbeat prunes, in one script.

A loop's stream entry is deleted when it ends (:mod:`._queue`), and its
timeline is capped (:mod:`._store`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._config import Keys
from ._connection import Connection
from ._queue import batch_keys

# KEYS: hosts. ARGV: the server's time (seconds), lease, forget_hosts (seconds).
# Returns the hosts dropped.
PRUNE_HOSTS = """
local now, lease, forget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local dropped = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local ok, beat = pcall(cjson.decode, all[i + 1])
  local gone = not ok
  if ok then
    local ago = now - (tonumber(beat['seen']) or 0)
    local left = beat['finished'] == true or beat['interrupted'] == true
    gone = (left and ago > lease) or ago > forget
  end
  if gone then
    redis.call('HDEL', KEYS[1], all[i])
    table.insert(dropped, all[i])
  end
end
return dropped
"""

_LIMITER = "limiter:"
_LEASE = "lease:"


def _own_expiry(keys: Keys, name: str) -> bool:
    """Whether the key expires by itself while the batch runs: a lease, a limiter key but seq.

    ``limiter:seq`` is a counter that never expires: were it to, its numbers
    would start again and the log's members collide.
    """
    if name.startswith(keys.prefix + _LEASE):
        return True
    return name.startswith(keys.prefix + _LIMITER) and name != keys.limiter_seq


def expire_batch(client: Any, keys: Keys, keep: float) -> int:
    """Give every key of the batch the expiry ``keep`` (seconds) from now; returns how many.

    The limiter's keys that already expire sooner keep their own expiry (the
    window's): a permit's log is never kept longer than it means anything. A
    lease (a cancelled loop's, left to lapse) keeps its own: a longer one would
    keep a requeued loop from being claimed.
    """
    keep_ms = max(1, int(keep * 1000))
    names = batch_keys(client, keys)
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.pttl(name)
    ttls = pipe.execute()
    pipe = client.pipeline(transaction=False)
    count = 0
    for name, ttl in zip(names, ttls, strict=True):
        if name.startswith(keys.prefix + _LEASE):
            continue
        if name.startswith(keys.prefix + _LIMITER) and 0 < int(ttl) < keep_ms:
            continue
        pipe.pexpire(name, keep_ms)
        count += 1
    pipe.execute()
    return count


def revive_batch(client: Any, keys: Keys) -> None:
    """Lift the batch's expiry: a loop is back in the queue.

    Only the expiry :func:`expire_batch` gave goes: a lease, and the limiter's
    keys that expire by themselves, keep theirs (a lease without one would
    hold its loop forever once its host died). The batch's end was told: its
    notice's key goes, so that the batch's next end is told again.
    """
    told = keys.notified("batch")
    pipe = client.pipeline(transaction=False)
    for name in batch_keys(client, keys):
        if not _own_expiry(keys, name) and name != told:
            pipe.persist(name)
    pipe.delete(told)
    pipe.execute()


def prune_hosts(client: Any, keys: Keys, now: float, lease: float, forget: float) -> list[str]:
    """Drop the hosts that left a lease ago, and those lost ``forget`` seconds ago."""
    dropped = client.eval(PRUNE_HOSTS, 1, keys.hosts, now, lease, forget)
    return [str(host) for host in dropped or ()]


def retire_batch(connection: Connection, export: str = "") -> Path | None:
    """The batch has ended: write its export (when asked), then set its expiry.

    The export is the batch's state and its summary, as ``forge fleet export``
    writes them: ``forge report --from`` the folder reads it.

    Returns the folder exported into, if any.

    Raises:
        OSError: the export could not be written (the batch is then left without expiry).
    """
    from ._status import batch_record, export_state, export_summary

    config = connection.config
    folder = None
    if export:
        folder = Path(export).expanduser().resolve()
        export_state(connection, folder)
        # The summary too: ``forge report --from`` the folder finds the batch by it.
        record = batch_record(connection)
        if record is not None:
            export_summary(record, folder)
    connection.once(lambda client: expire_batch(client, config.keys, config.keep))
    return folder
