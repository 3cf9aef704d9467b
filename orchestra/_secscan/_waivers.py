"""Waivers: a person's decision that a finding is not a leak, for a while or for good.

``.forge/secscan-waivers.yaml`` is a list of entries::

    - fingerprint: 3f1c9a0e5b7d2c44
      reason: test fixture, revoked key
      who: alice
      created: "2025-01-31T09:12:00.000Z"
      expires: "2025-03-02T09:12:00.000Z"   # optional

A waiver names a finding's fingerprint, so it survives edits elsewhere in the
file and lapses when the secret itself changes. Once ``expires`` has passed it
no longer waives anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import yaml

from .._durations import Duration, parse_duration
from .._errors import CorruptStateError
from .._state import atomic_write, exclusive_lock, move_aside, read_state_bytes
from ._findings import Finding

WAIVERS_FILE = ".forge/secscan-waivers.yaml"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no time zone")
    return parsed


def _format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.frozen
class Waiver:
    """One waived fingerprint, who waived it, why, and until when."""

    fingerprint: str
    reason: str
    who: str
    created: str
    expires: str | None = None

    def active(self, now: datetime) -> bool:
        """Whether the waiver still waives at ``now`` (an aware datetime)."""
        return self.expires is None or now < _parse_time(self.expires)

    def as_dict(self) -> dict[str, str]:
        """The entry as the waivers file holds it."""
        data = {
            "fingerprint": self.fingerprint,
            "reason": self.reason,
            "who": self.who,
            "created": self.created,
        }
        if self.expires is not None:
            data["expires"] = self.expires
        return data


@attrs.frozen
class WaiverOutcome:
    """Findings split by the waivers: those still standing and those waived."""

    kept: tuple[Finding, ...]
    waived: tuple[Finding, ...]


def _lock_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.lock")


def load_waivers(path: Path) -> tuple[Waiver, ...]:
    """Read the waivers file; a missing or empty file has none.

    Raises:
        CorruptStateError: the file is not a list of waivers; it has been moved
            aside to ``<name>.corrupt-<timestamp>``.
        StateError: it exists but cannot be read.
    """
    with exclusive_lock(_lock_path(path)):
        return _load_locked(path)


def _load_locked(path: Path) -> tuple[Waiver, ...]:
    raw = read_state_bytes(path)
    if raw is None:
        return ()
    try:
        return _parse(raw)
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, TypeError, RecursionError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        moved = move_aside(path)
        raise CorruptStateError(
            f"the secret-scan waivers file {path.name} is corrupt ({reason})",
            path=str(path),
            moved_to=str(moved),
            hint="restore the waivers from the moved-aside file or version control",
        ) from exc


def _parse(raw: bytes) -> tuple[Waiver, ...]:
    data: Any = yaml.load(raw.decode("utf-8"), Loader=_LOADER)  # a safe loader
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ValueError(f"expected a list of waivers, found {type(data).__name__}")
    waivers: list[Waiver] = []
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            raise ValueError(f"waiver {index}: expected a mapping")
        expires = item.get("expires")
        waivers.append(
            Waiver(
                fingerprint=_text(item, "fingerprint", index),
                reason=_text(item, "reason", index),
                who=_text(item, "who", index),
                created=_text(item, "created", index, timestamp=True),
                expires=None if expires is None else _text(item, "expires", index, timestamp=True),
            )
        )
    return tuple(waivers)


def _text(item: dict[Any, Any], key: str, index: int, *, timestamp: bool = False) -> str:
    value = item.get(key)
    if timestamp and isinstance(value, date):
        # An unquoted timestamp in hand-written YAML arrives as a date or datetime.
        if not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day)
        return _format_time(value if value.tzinfo else value.replace(tzinfo=UTC))
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"waiver {index}: {key}: expected a non-empty string, got {value!r}")
    if timestamp:
        try:
            _parse_time(value)
        except ValueError as exc:
            raise ValueError(f"waiver {index}: {key}: {exc}") from exc
    return value


def add_waiver(
    path: Path,
    *,
    fingerprint: str,
    reason: str,
    who: str,
    expires_in: Duration | str | None = None,
    now: datetime | None = None,
) -> Waiver:
    """Record a waiver (replacing one for the same fingerprint), atomically and under a lock.

    Args:
        path: The waivers file.
        fingerprint: The finding's fingerprint.
        reason: Why it is not a leak.
        who: The person deciding.
        expires_in: How long it holds (``"30d"``), or None for good.
        now: The current time (aware); defaults to the wall clock.

    Raises:
        ValueError: ``expires_in`` is not a duration, or a field is empty.
        CorruptStateError: the existing file is corrupt (moved aside; nothing recorded).
        StateError: the file cannot be written.
    """
    for name, value in (("fingerprint", fingerprint), ("reason", reason), ("who", who)):
        if not value.strip():
            raise ValueError(f"a waiver needs a {name}")
    moment = now or datetime.now(UTC)
    expires: str | None = None
    if expires_in is not None:
        span = expires_in if isinstance(expires_in, Duration) else parse_duration(expires_in)
        expires = _format_time(moment + timedelta(seconds=span.seconds))
    waiver = Waiver(fingerprint, reason, who, _format_time(moment), expires)
    with exclusive_lock(_lock_path(path)):
        kept = [w for w in _load_locked(path) if w.fingerprint != fingerprint]
        entries = [w.as_dict() for w in (*kept, waiver)]
        text = yaml.dump(entries, Dumper=_DUMPER, sort_keys=False, allow_unicode=True)
        atomic_write(path, text.encode("utf-8"), journal=True)
    return waiver


def apply_waivers(
    findings: Iterable[Finding], waivers: Iterable[Waiver], *, now: datetime | None = None
) -> WaiverOutcome:
    """Split findings into those still standing and those an active waiver covers."""
    moment = now or datetime.now(UTC)
    active = {waiver.fingerprint for waiver in waivers if waiver.active(moment)}
    kept: list[Finding] = []
    waived: list[Finding] = []
    for finding in findings:
        (waived if finding.fingerprint in active else kept).append(finding)
    return WaiverOutcome(tuple(kept), tuple(waived))
