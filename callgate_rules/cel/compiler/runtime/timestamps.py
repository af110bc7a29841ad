"""Timestamps and durations: ``timestamp()``, ``duration()``, their texts and the ``get*``
accessors, in UTC or a named time zone, as cel-go reads and prints them: timestamps are
RFC 3339 texts from year 1 to 9999 (fractions to the microsecond: Python's ``datetime``
holds no nanoseconds), durations are Go duration texts (``1h30m``, ``-1.5s``, ``250ms``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from callgate_rules.cel.compiler.runtime.kinds import checked_duration, kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError

# The digits spelled out, as ``[0-9][0-9]`` rather than ``\d{2}``: a repetition costs the
# matcher more than its characters (a sixth of what timestamp() costs, together).
_RFC3339 = re.compile(
    r"[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]"
    r"(?:\.[0-9]{1,9})?(?:Z|[+-][0-9][0-9]:[0-9][0-9])",
)
_DURATION = re.compile(r"([+-]?)((?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h))+|0)")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNIT_NANOSECONDS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 10**9,
                     "m": 60 * 10**9, "h": 3600 * 10**9}
_OFFSET = re.compile(r"([+-]?)(\d{2}):(\d{2})", re.ASCII)


def is_rfc3339(text: str) -> bool:
    return _RFC3339.fullmatch(text) is not None


# Bound once: timestamp() runs on every call of a rule that reads a date.
_rfc3339_match, _from_iso_format = _RFC3339.fullmatch, datetime.fromisoformat


def to_timestamp(value: Any) -> datetime:
    if type(value) is str and _rfc3339_match(value) is not None:
        try:
            parsed = _from_iso_format(value)
            # Year 1 at +01:00 is before year 1 in UTC: Python finds out on conversion. Only
            # years 1 and 9999 can leave the range so; the first digit (years 0xxx and 9xxx)
            # is a cheaper test that takes them in.
            if value[0] in "09":
                parsed.astimezone(UTC)
        except (ValueError, OverflowError):
            raise CelEvaluationError(f"timestamp out of range or invalid: {value!r}") from None
        return parsed
    value_kind = kind(value)
    if value_kind == "timestamp":
        return value  # type: ignore[no-any-return]
    if value_kind == "int":
        try:
            return datetime.fromtimestamp(int(value), tz=UTC)
        except (ValueError, OverflowError, OSError):
            raise CelEvaluationError(f"timestamp out of range: {value}") from None
    if value_kind != "string":
        raise no_overload("timestamp", value)
    raise CelEvaluationError(f"invalid timestamp {value!r}: expected an RFC 3339 text such "
                             "as 2026-01-31T09:30:00Z")


def timestamp_text(value: datetime) -> str:
    """RFC 3339 in UTC, the fraction without trailing zeros, as cel-go prints a timestamp."""
    utc = value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if len(text) < 19:  # years below 1000 lose their zeros in some C libraries
        text = f"{utc.year:04d}" + text[text.index("-"):]
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def to_duration(value: Any) -> timedelta:
    value_kind = kind(value)
    if value_kind == "duration":
        return checked_duration(value)
    if value_kind != "string":
        raise no_overload("duration", value)
    match = _DURATION.fullmatch(value)
    if match is None:
        raise CelEvaluationError(f"invalid duration {value!r}: expected a text such as "
                                 "1h30m, 90s, 1.5s or 250ms")
    nanoseconds = Decimal(0)
    for number, unit in _DURATION_PART.findall(match.group(2)):
        nanoseconds += Decimal(number) * _UNIT_NANOSECONDS[unit]
    if match.group(1) == "-":
        nanoseconds = -nanoseconds
    if abs(nanoseconds) > Decimal(2**63 - 1):
        raise CelEvaluationError(f"duration out of range: {value!r}")
    microseconds = int(nanoseconds / 1000)
    return checked_duration(timedelta(microseconds=microseconds))


def duration_text(value: timedelta) -> str:
    """Seconds with the fraction they need (``90s``, ``1.5s``), as cel-go prints them."""
    microseconds = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    seconds = Decimal(microseconds) / 1_000_000
    text = format(seconds.normalize(), "f") if microseconds else "0"
    return text + "s"


_UTC = UTC


@lru_cache(maxsize=128)
def _timezone(name: str) -> tzinfo:
    offset = _OFFSET.fullmatch(name)
    if offset is not None:
        sign, hours, minutes = offset.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes))
        return timezone(-delta if sign == "-" else delta)
    if name in ("UTC", "Z", "utc"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, LookupError):
        raise CelEvaluationError(f"unknown time zone {name!r}") from None


def _local_time(function: str, value: Any, zone: Any) -> datetime:
    if kind(value) != "timestamp":
        raise no_overload(function, value)
    if zone is None:
        return value.astimezone(_UTC)  # type: ignore[no-any-return]
    if not isinstance(zone, str):
        raise no_overload(function, value, zone)
    return value.astimezone(_timezone(zone))  # type: ignore[no-any-return]


def _timestamp_accessor(name: str, read: Callable[[datetime], int]) -> Callable[..., int]:
    def accessor(value: Any, zone: Any = None) -> int:
        return read(_local_time(name, value, zone))

    accessor.__name__ = name
    return accessor


def _duration_or_timestamp_accessor(
    name: str, of_timestamp: Callable[[datetime], int], of_duration: Callable[[timedelta], int]
) -> Callable[..., int]:
    def accessor(value: Any, zone: Any = None) -> int:
        if kind(value) == "duration" and zone is None:
            return of_duration(value)
        return of_timestamp(_local_time(name, value, zone))

    accessor.__name__ = name
    return accessor


# Months and days of month/year count from 0 except getDate; Sunday is day 0 of the week.
get_full_year = _timestamp_accessor("getFullYear", lambda t: t.year)
get_month = _timestamp_accessor("getMonth", lambda t: t.month - 1)
get_day_of_year = _timestamp_accessor("getDayOfYear", lambda t: t.timetuple().tm_yday - 1)
get_day_of_month = _timestamp_accessor("getDayOfMonth", lambda t: t.day - 1)
get_date = _timestamp_accessor("getDate", lambda t: t.day)
get_day_of_week = _timestamp_accessor("getDayOfWeek", lambda t: t.isoweekday() % 7)
# Duration accessors give the whole duration in that unit, truncated (as cel-python does).
get_hours = _duration_or_timestamp_accessor(
    "getHours", lambda t: t.hour, lambda d: int(d.total_seconds() / 60 / 60)
)
get_minutes = _duration_or_timestamp_accessor(
    "getMinutes", lambda t: t.minute, lambda d: int(d.total_seconds() / 60)
)
get_seconds = _duration_or_timestamp_accessor(
    "getSeconds", lambda t: t.second, lambda d: int(d.total_seconds())
)
get_milliseconds = _duration_or_timestamp_accessor(
    "getMilliseconds", lambda t: t.microsecond // 1000, lambda d: int(d.total_seconds() * 1000)
)
