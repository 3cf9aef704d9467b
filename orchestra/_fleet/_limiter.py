"""The fleet's one rate limiter: the sliding log on the Redis server.

A :class:`~orchestra._ratelimit.RateLimitBackend` whose every call is one Lua
script, timed by the server's ``TIME``, on a log that is a sorted set of
unique members scored by their grant time: trim what left the window by score,
count, and (when the caller is first in line and a permit is free) add a
member and set the key's expiry. It answers with a bounded summary (see
:class:`~orchestra._ratelimit.BackendReading`), never the log: every step is
a count or a range read by rank or score, O(log n) in the live permits, so a
full window costs what an empty one does. Hosts' clocks play no part, so
hosts whose clocks differ by minutes still share one exact window.

First come, first served across hosts: a host refused a permit takes a
ticket in a waiter queue (a sorted set in arrival order); a permit goes to the
head of that queue only. A ticket whose host stopped asking (it died, or gave
up) expires a little after the time the host was told to ask again, so a dead
host never holds the line. Within one host the :class:`RateLimiter` already
serves its tasks in order, so one ticket per host is enough.

An unreachable server grants nothing (the limiter fails closed): the reading
says ``unavailable`` and the limiter asks again shortly.
"""

from __future__ import annotations

from typing import Any

from .._errors import StateError
from .._ratelimit import OLDEST_REPORTED, BackendReading, SlidingWindow
from ._config import Keys
from ._connection import Connection, FleetUnavailable
from ._deployment import redact

# KEYS: log, queue, deadlines, seq, pause.
# ARGV: calls, window, permits, ticket, grace, poll, mode ("take" | "peek"), oldest.
# Returns: granted, wait, paused_for, pause reason, used, next_free, then for
# each of the `oldest` oldest grant instants its age and its permits: a
# summary, never the log. Every step on the log is O(log n) in its live
# permits (`oldest` of them for the instants); the waiter queue holds one
# ticket per waiting host.
ACQUIRE = """
-- Every key of the limiter has had one type since the fleet began (the log and
-- the queue sorted sets, the deadlines and the pause hashes, seq a counter):
-- one of another type was not written by Forge, and is named rather than
-- overwritten.
local types = {'zset', 'zset', 'hash', 'string', 'hash'}
for i, want in ipairs(types) do
  local kind = redis.call('TYPE', KEYS[i]).ok
  if kind ~= want and kind ~= 'none' then
    return redis.error_reply('FORGE_LIMITER_KEY ' .. KEYS[i] .. ' ' .. kind .. ' ' .. want)
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local calls = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local permits = tonumber(ARGV[3])
local ticket = ARGV[4]
local grace = tonumber(ARGV[5])
local poll = tonumber(ARGV[6])
local take = ARGV[7] == 'take'
local oldest = tonumber(ARGV[8])
local function num(x) return string.format('%.6f', x) end

-- Trim: a permit granted at `at` is live while at + window > now.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', num(now - window))
-- A server clock that went back: a permit from "the future" counts from now.
-- (Empty but for that: a range read of the index.)
local ahead_of_now = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. num(now), '+inf')
for _, member in ipairs(ahead_of_now) do redis.call('ZADD', KEYS[1], num(now), member) end

local paused_for, reason = 0, ''
local pause_end = tonumber(redis.call('HGET', KEYS[5], 'until') or '0')
if pause_end > now then
  paused_for = pause_end - now
  reason = redis.call('HGET', KEYS[5], 'reason') or ''
else
  redis.call('DEL', KEYS[5])
end

-- The waiter queue: tickets whose host stopped asking leave it.
for _, waiter in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local deadline = tonumber(redis.call('HGET', KEYS[3], waiter) or '0')
  if deadline < now then
    redis.call('ZREM', KEYS[2], waiter)
    redis.call('HDEL', KEYS[3], waiter)
  end
end
local rank = redis.call('ZRANK', KEYS[2], ticket)
local ahead = rank or redis.call('ZCARD', KEYS[2])

local used = redis.call('ZCARD', KEYS[1])

-- The grant time of the permit of rank `index` (0: the oldest), by one range read.
local function stamp(index)
  local found = redis.call('ZRANGE', KEYS[1], index, index, 'WITHSCORES')
  return tonumber(found[2])
end

-- Seconds until `k` more permits fit in the window: the permit of rank
-- used + k - calls - 1 must leave it first.
local function wait_for(k)
  if used + k <= calls then return 0 end
  local index = used + k - calls
  if index > used then return window end
  return math.max(0, stamp(index - 1) + window - now)
end

local granted = 0
local wait
if not take then
  wait = math.max(wait_for(1), paused_for)
elseif paused_for == 0 and ahead == 0 and used + permits <= calls then
  local last = redis.call('INCRBY', KEYS[4], permits)
  for n = last - permits + 1, last do
    redis.call('ZADD', KEYS[1], num(now), ticket .. ':' .. n)
  end
  used = used + permits
  redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000) + 1000)
  redis.call('ZREM', KEYS[2], ticket)
  redis.call('HDEL', KEYS[3], ticket)
  granted = 1
  wait = 0
else
  if not rank then
    redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[4]), ticket)
  end
  wait = math.max(wait_for(ahead + permits), paused_for)
  -- Behind another host's ticket: ask again soon, the head may be served any moment.
  if ahead > 0 and wait < poll then wait = poll end
  redis.call('HSET', KEYS[3], ticket, num(now + wait + grace))
  local keep = math.ceil((window + wait + grace) * 1000)
  redis.call('PEXPIRE', KEYS[2], keep)
  redis.call('PEXPIRE', KEYS[3], keep)
end

local reply = {granted, num(wait), num(paused_for), reason, used, num(wait_for(1))}
-- The oldest instants, each found past the last by a range read and counted by
-- ZCOUNT on its own score (the string the server wrote it with: the same double).
local after = '-inf'
for _ = 1, oldest do
  local found = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #found == 0 then break end
  local at = found[2]
  reply[#reply + 1] = num(now - tonumber(at))
  reply[#reply + 1] = redis.call('ZCOUNT', KEYS[1], at, at)
  after = '(' .. at
end
return reply
"""

# KEYS: pause. ARGV: seconds, reason. A pause is never shortened.
PAUSE = """
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'hash' and kind ~= 'none' then
  return redis.error_reply('FORGE_LIMITER_KEY ' .. KEYS[1] .. ' ' .. kind .. ' hash')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local pause_end = now + tonumber(ARGV[1])
local current = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if pause_end > current then
  redis.call('HSET', KEYS[1], 'until', string.format('%.6f', pause_end), 'reason', ARGV[2])
  redis.call('PEXPIREAT', KEYS[1], math.ceil(pause_end * 1000) + 1000)
end
return 1
"""


class ForeignLimiterKey(StateError):
    """A key of the limiter holds a value of another type: Forge did not write it.

    Attributes:
        key: The key.
        kind: Its type on the server (``list``, ``string`` …).
    """

    def __init__(self, key: str, kind: str, want: str, url: str) -> None:
        super().__init__(
            f"the fleet limiter's key {key} holds a {kind}, where Forge keeps a {want}",
            context=(f"server: {redact(url)}",),
            hint=f"it was not written by Forge: check what did, then delete it (DEL {key})",
        )
        self.key = key
        self.kind = kind


_FOREIGN = "FORGE_LIMITER_KEY "


def foreign_key(reason: str, url: str) -> ForeignLimiterKey | None:
    """The error the acquire script's type check answered with, if ``reason`` is one."""
    at = reason.find(_FOREIGN)
    if at < 0:
        return None
    # The key may hold spaces (a batch's name); the two types never do.
    key, kind, want = reason[at + len(_FOREIGN) :].strip().rsplit(" ", 2)
    return ForeignLimiterKey(key, kind, want, url)


# How soon a host asks again while the server cannot be reached.
OUTAGE_RETRY = 0.5


class RedisBackend:
    """The sliding log of every host of a fleet, on its Redis server.

    Args:
        connection: The host's connection.
        keys: The batch's keys.
        ticket: This host's place in the waiter queue (unique per host process).
        grace: Seconds a ticket outlives the time its host was told to ask again.
        poll: Seconds a host behind another host's ticket waits before asking again.
    """

    name = "redis"
    blocking = True

    def __init__(
        self,
        connection: Connection,
        keys: Keys,
        ticket: str,
        *,
        grace: float = 2.0,
        poll: float = 0.1,
    ) -> None:
        self._connection = connection
        self._keys = keys
        self._ticket = ticket
        self._grace = grace
        self._poll = poll
        self._acquire = connection.script(ACQUIRE)
        self._pause = connection.script(PAUSE)

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        """See :meth:`RateLimitBackend.try_acquire`; never raises for an outage."""
        rule.check_request(permits)
        return self._run(rule, permits, "take")

    def peek(self, rule: SlidingWindow) -> BackendReading:
        """See :meth:`RateLimitBackend.peek`."""
        return self._run(rule, 1, "peek")

    def pause(self, seconds: float, reason: str) -> None:
        """See :meth:`RateLimitBackend.pause`.

        Raises:
            FleetUnavailable: the server cannot be reached.
            ForeignLimiterKey: the pause key holds another type than Forge's.
        """
        try:
            self._connection.once(
                lambda client: self._pause(keys=[self._keys.limiter_pause], args=[seconds, reason])
            )
        except FleetUnavailable as exc:
            if not exc.outage and (foreign := foreign_key(exc.reason, exc.url)) is not None:
                raise foreign from exc
            raise

    def _run(self, rule: SlidingWindow, permits: int, mode: str) -> BackendReading:
        keys = self._keys
        args: list[Any] = [
            rule.calls,
            repr(rule.window),
            permits,
            self._ticket,
            repr(self._grace),
            repr(self._poll),
            mode,
            OLDEST_REPORTED,
        ]
        try:
            reply = self._connection.once(
                lambda client: self._acquire(
                    keys=[
                        keys.limiter_log,
                        keys.limiter_queue,
                        keys.limiter_deadlines,
                        keys.limiter_seq,
                        keys.limiter_pause,
                    ],
                    args=args,
                )
            )
        except FleetUnavailable as exc:
            if exc.outage:
                return BackendReading(granted=False, wait=OUTAGE_RETRY, unavailable=exc.reason)
            if (foreign := foreign_key(exc.reason, exc.url)) is not None:
                raise foreign from exc
            raise
        granted, wait, paused_for, reason, used, next_free, *oldest = reply
        return BackendReading(
            granted=int(granted) == 1,
            wait=float(wait),
            used=int(used),
            next_free=float(next_free),
            oldest=tuple(
                (float(age), int(count))
                for age, count in zip(oldest[::2], oldest[1::2], strict=True)
            ),
            paused_for=float(paused_for),
            pause_reason=str(reason),
        )
