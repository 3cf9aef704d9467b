"""Provider limits: telling a provider's refusal from the agent's own failure, and when it ends.

An agent CLI that hits its account's usage limit says so in words that change
from release to release (``Claude AI usage limit reached|1753441200``,
``You've hit your session limit · resets 12:50am (Europe/Paris)``, ``try again
in 2 days 3 hours 4 minutes``, ``Your quota will reset after 18h1m4s``) or in
structured fields (``rate_limit_event`` with ``resetsAt``, ``usage_limit_reached``
with ``resets_at``, ``retryDelay``). :func:`detect_limit` reads them all and
the reset time wherever the message carries one: an epoch, a clock time with
or without a zone, or a duration.

Only the providers' own phrasings count. An agent whose error text merely
contains "limit reached" (a retry limit, a turn limit, a recursion limit) has
failed on its own account: that iteration is judged like any other.

An overloaded provider (HTTP 529, ``overloaded_error``) is transient: the loop
waits and tries again, without counting it as a failure.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ._observation import RateLimitEvent

REJECTED = "rejected"
OVERLOADED = "overloaded"

# Without a reset time, the first wait; each further refusal in a row doubles it.
FIRST_BACKOFF = 60.0

# The phrasings of real provider limits, as the CLIs print them, and the
# structured errors they serialize. Never a bare word that an agent's answer
# or a tool's output could carry ("limit reached", "429 Too Many Requests" in
# a test log, an enum name like RESOURCE_EXHAUSTED or rate_limit_error).
_LIMIT_PHRASES = re.compile(
    r"Claude AI usage limit reached"
    r"|Claude usage limit reached"
    # "You've hit your session limit · resets …", "You've hit your usage limit. …"
    # — never "You've reached your limit of 5 retries for this tool".
    r"|You(?:'|’)ve (?:hit|reached) your (?:session |weekly |daily |usage |5-hour |opus )?limit"
    r"(?=\s*(?:[·.,;:!(]|$)|\s+(?:resets?|try|until)\b)"
    r"|\"type\"\s*:\s*\"usage_limit_reached\""
    r"|The usage limit has been reached"
    r"|exhausted your (?:daily )?quota"
    r"|exhausted your capacity"
    r"|TerminalQuotaError"
    r"|RetryableQuotaError"
    r"|\"status\"\s*:\s*\"RESOURCE_EXHAUSTED\""
    r"|Quota exceeded for quota metric"
    r"|You exceeded your current quota"
    r"|\"type\"\s*:\s*\"rate_limit_error\""
    r"|would exceed your account(?:'|’)s rate limit"
    r"|Usage limit reached for"
    # Codex, once its retries are spent: "exceeded retry limit, last status: 429 …"
    r"|last status: 429 Too Many Requests",
    re.IGNORECASE | re.MULTILINE,
)
# Claude's API error object ({"type":"error","error":{"type":"overloaded_error"}})
# and its message for it ("API Error: 529 …"); Codex's words once its retries of
# a 503 or a 500 are spent ("unexpected status 503 Service Unavailable: …",
# "We're currently experiencing high demand, …"): the provider's outage, not
# the agent's failure. Never a line that merely says "overloaded".
_OVERLOAD_PHRASES = re.compile(
    r"\"type\"\s*:\s*\"overloaded_error\"|API Error: 529\b"
    r"|^unexpected status 503 Service Unavailable\b"
    r"|^We(?:'|’)re currently experiencing high demand\b",
    re.IGNORECASE | re.MULTILINE,
)
_EPOCH_AFTER_BAR = re.compile(r"usage limit reached\|(\d{9,11})", re.IGNORECASE)
_RESETS_AT_FIELD = re.compile(r"\"?resets_?at\"?\s*[:=]\s*(\d{9,11}(?:\.\d+)?)", re.IGNORECASE)
_RESETS_IN_FIELD = re.compile(
    r"\"?resets_in_seconds\"?\s*[:=]\s*(\d+(?:\.\d+)?)|\"?retry[_-]?after\"?\s*[:=]\s*\"?(\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_RETRY_DELAY = re.compile(r"\"retryDelay\"\s*:\s*\"(\d+(?:\.\d+)?)s\"")
_DURATION_PART = re.compile(
    r"(\d+(?:\.\d+)?)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)(?![a-z])",
    re.IGNORECASE,
)
_DURATION = re.compile(
    r"(?:try again in|reset after|resets? in|retry in|reset in|retry after)\s+"
    r"((?:\d+(?:\.\d+)?\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)(?![a-z])[\s,]*(?:and\s+)?)+)",
    re.IGNORECASE,
)
_CLOCK = re.compile(
    r"(?:resets?|try again|reset)\s+(?:at\s+)?"
    r"(?:(?P<month>[A-Z][a-z]{2,8})\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<year>\d{4})\s+)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?"
    r"(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z_+-]+)*)\)|\s+(?P<abbr>(?-i:[A-Z]{2,4}))\b)?",
    re.IGNORECASE,
)
_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
# The kind of limit, from the message's own words: "session limit", "daily
# quota", "rateLimitType": "five_hour" — never a field name ("session_id").
_KIND_WORDS = re.compile(r"(?<![\w-])(weekly|daily|session|five_hour|5-hour)(?![\w-])")
_KINDS = {"5-hour": "five_hour"}
# A clock time names a minute, not a second: a reset "at 11:22 PM" read at
# 11:22:05 is due by the end of that minute, not tomorrow; one that passed a
# few minutes ago says only that the clocks are apart (not a limit almost a
# day long): no reset time, so the wait backs off from a minute.
_MINUTE = 60.0
_RECENT_PAST = 5 * 60.0
_ABBREVIATIONS = {
    "UTC": 0,
    "GMT": 0,
    "PST": -8,
    "PDT": -7,
    "MST": -7,
    "MDT": -6,
    "CST": -6,
    "CDT": -5,
    "EST": -5,
    "EDT": -4,
    "CET": 1,
    "CEST": 2,
    "BST": 1,
    "IST": 5.5,
    "JST": 9,
}
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}


_LIMIT_AS_ANSWER = re.compile(
    r"\s*(?:Claude AI usage limit reached|Claude usage limit reached"
    r"|You(?:'|’)ve (?:hit|reached) your (?:\w+ |5-hour )?limit)",
    re.IGNORECASE,
)


def is_limit_answer(text: str) -> bool:
    """Whether an answer that claims success is in fact the CLI's limit message.

    Some releases end a refused run with ``subtype: success`` and the limit
    as the whole answer: only an answer that begins with it counts, never an
    agent's answer that mentions a limit.
    """
    return bool(_LIMIT_AS_ANSWER.match(text))


def is_provider_limit(text: str) -> bool:
    """Whether ``text`` is a provider's limit message (not an agent's own "limit reached")."""
    return bool(_LIMIT_PHRASES.search(text))


def is_overload(text: str) -> bool:
    """Whether ``text`` says the provider is overloaded (HTTP 529): a transient refusal."""
    return bool(_OVERLOAD_PHRASES.search(text))


def detect_limit(text: str, now: float | None = None) -> RateLimitEvent | None:
    """The provider limit ``text`` reports, with its reset time when it carries one.

    Args:
        text: An error message, or a structured error serialized as text.
        now: Wall-clock epoch seconds to read durations and clock times against.

    Returns:
        A rejected :class:`RateLimitEvent`, an overloaded one for a 529, or
        None when the text is no provider's limit.
    """
    if not text:
        return None
    if is_provider_limit(text):
        return RateLimitEvent(status=REJECTED, resets_at=reset_time(text, now), kind=_kind(text))
    if is_overload(text):
        return RateLimitEvent(status=OVERLOADED, kind="overloaded")
    return None


def limit_from_status(status: object, text: str, now: float | None = None) -> RateLimitEvent | None:
    """The limit a provider's HTTP status in a structured error says (429, 529), or None.

    ``text`` is the error's own message, read for the reset time.
    """
    if isinstance(status, str) and status.strip().isdigit():
        status = int(status)
    if status == 529:
        return RateLimitEvent(status=OVERLOADED, kind="overloaded")
    if status == 429:
        return RateLimitEvent(status=REJECTED, resets_at=reset_time(text, now), kind=_kind(text))
    return None


def reset_time(text: str, now: float | None = None) -> float | None:
    """When the limit in ``text`` resets, as wall-clock epoch seconds, if it says."""
    now = time.time() if now is None else now
    if match := _EPOCH_AFTER_BAR.search(text):
        return float(match.group(1))
    if match := _RESETS_AT_FIELD.search(text):
        return float(match.group(1))
    if match := _RESETS_IN_FIELD.search(text):
        return now + float(match.group(1) or match.group(2))
    if match := _RETRY_DELAY.search(text):
        return now + float(match.group(1))
    if match := _DURATION.search(text):
        seconds = parse_duration_words(match.group(1))
        if seconds is not None:
            return now + seconds
    for match in _CLOCK.finditer(text):
        if (when := _clock_time(match, now)) is not None:
            return when
    return None


def parse_duration_words(text: str) -> float | None:
    """``2 days 3 hours 4 minutes``, ``18h1m4s``, ``3h 20m`` as seconds (None: none found)."""
    total = 0.0
    found = False
    for amount, unit in _DURATION_PART.findall(text):
        total += float(amount) * _UNITS[unit[0].lower()]
        found = True
    return total if found else None


def backoff_pause(refusals_in_a_row: int, cap: float) -> float:
    """Seconds to wait after a refusal without a reset time: 1 min, doubling, up to ``cap``."""
    exponent = max(0, min(refusals_in_a_row - 1, 30))
    return min(FIRST_BACKOFF * (1 << exponent), max(cap, FIRST_BACKOFF))


def _kind(text: str) -> str | None:
    found = _KIND_WORDS.search(text.lower())
    if found is None:
        return None
    return _KINDS.get(found.group(1), found.group(1))


def _clock_time(match: re.Match[str], now: float) -> float | None:
    hour = int(match.group("hour"))
    minute = int(match.group("minute") or 0)
    ampm = (match.group("ampm") or "").replace(".", "").lower()
    if not ampm and match.group("minute") is None:
        return None  # a bare number ("try again 3") is no clock time
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    zone = _zone(match.group("zone"), match.group("abbr"))
    if match.group("abbr") and zone is None:
        return None
    current = (
        datetime.fromtimestamp(now, zone) if zone else datetime.fromtimestamp(now).astimezone()
    )
    if match.group("year"):
        month = _MONTHS.get(match.group("month").lower())
        if month is None:
            return None
        try:
            when = current.replace(
                year=int(match.group("year")),
                month=month,
                day=int(match.group("day")),
                hour=hour,
                minute=minute,
                second=0,
                microsecond=0,
            )
        except ValueError:
            return None
        return when.timestamp()
    today = current.replace(hour=hour, minute=minute, second=0, microsecond=0)
    at = today.timestamp()
    if at > now:
        return at
    if now - at < _MINUTE:
        return at + _MINUTE  # the named minute is still running
    if now - at < _RECENT_PAST:
        return None
    return (today + timedelta(days=1)).timestamp()  # long past today: tomorrow's


def _zone(name: str | None, abbreviation: str | None) -> tzinfo | None:
    """A named zone (``Europe/Paris``) or a known abbreviation (``PST``); None: local time."""
    from datetime import timezone

    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            return None
    if abbreviation:
        offset = _ABBREVIATIONS.get(abbreviation.upper())
        if offset is None:
            return None
        return timezone(timedelta(hours=offset))
    return None
