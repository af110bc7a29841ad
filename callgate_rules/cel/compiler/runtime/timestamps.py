"""Timestamps and durations: ``timestamp()``, ``duration()`` and the ``get*`` accessors, in
UTC or a named time zone, read and printed as cel-python reads and prints them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Any

from celpy import celtypes

from callgate_rules.cel.compiler.runtime.kinds import checked_duration, kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError

# Texts other than RFC 3339 go through cel-python's own parser (pendulum: lenient, slow, and
# reading "now" as the current time, so such texts are never folded at compile time).
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})",
)


def is_rfc3339(text: str) -> bool:
    return _RFC3339.fullmatch(text) is not None


def to_timestamp(value: Any) -> datetime:
    if type(value) is str and len(value) >= 20 and value[10] == "T" and value[16] == ":":
        # The common case, an RFC 3339 text: Python's ISO reader is twenty times faster
        # than cel-python's and reads any such text with an offset to the same instant.
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    value_kind = kind(value)
    if value_kind == "timestamp":
        return value  # type: ignore[no-any-return]
    if value_kind != "string":
        raise no_overload("timestamp", value)
    try:
        parsed = celtypes.TimestampType(str(value))
    except Exception as error:  # pendulum raises its own exception classes
        raise CelEvaluationError(f"invalid timestamp {value!r}: {error}") from None
    return datetime(
        parsed.year, parsed.month, parsed.day, parsed.hour, parsed.minute, parsed.second,
        parsed.microsecond, tzinfo=parsed.tzinfo,
    )


def to_duration(value: Any) -> timedelta:
    value_kind = kind(value)
    if value_kind == "duration":
        return checked_duration(value)
    if value_kind != "string":
        raise no_overload("duration", value)
    try:
        parsed = celtypes.DurationType(str(value))
    except ValueError as error:
        raise CelEvaluationError(f"invalid duration {value!r}: {error}") from None
    return timedelta(days=parsed.days, seconds=parsed.seconds, microseconds=parsed.microseconds)


_UTC = UTC


@lru_cache(maxsize=128)
def _timezone(name: str) -> tzinfo:
    try:
        found = celtypes.TimestampType.tz_parse(name)
    except Exception as error:  # pendulum's lookup raises its own exception classes
        raise CelEvaluationError(f"unknown time zone {name!r}") from error
    if not isinstance(found, tzinfo):
        raise CelEvaluationError(f"unknown time zone {name!r}")
    return found


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
