"""The decision log (one JSON line per decision), its retention, and the counters of SPEC §10.

Each line of a call that parsed carries ``replay``: the inputs the decision read (the actor
and session as the host passed them, the decision time, the records each look-up found, the
arguments' provenance), masked as the arguments are, and what steps 1–4 decided before any
execution. ``callgate replay`` decides each line again from them (``harness.replay``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from callgate_rules.errors import InputError
from callgate_rules.taxonomy import ErrorClass, Route

ARGUMENT_ERRORS = frozenset({ErrorClass.MALFORMED, ErrorClass.UNKNOWN_TOOL,
                             ErrorClass.UNEXPECTED_ARGUMENT, ErrorClass.INVALID_ARGUMENT})
LOGGER = logging.getLogger("callgate")
# Purging reads and rewrites the whole file: at most once per this share of the retention,
# so a line is kept at most 1.1 times the retention, and a busy log is not rewritten on
# every line.
PURGE_SHARE = 10


def count(counters: Counter[str], log: Mapping[str, Any]) -> None:
    """Add one decision to the counters: each category of SPEC §10 counted separately."""
    error_class = log.get("error_class")
    route = log.get("route")
    counters["decisions"] += 1
    if error_class in ARGUMENT_ERRORS:
        counters["argument_errors"] += 1
    if error_class == ErrorClass.FORBIDDEN:
        counters["denials"] += 1
    if log.get("unknown_outcome"):
        counters["unknown_outcomes"] += 1
    if log.get("reconciled"):
        counters["reconciliations"] += 1
    if error_class == ErrorClass.DUPLICATE:
        counters["suppressed_duplicates"] += 1
    if route == Route.REGENERATE:
        counters["regenerations"] += 1
    counters["retries"] += int(log.get("retries", 0))
    if route == Route.REVIEW:
        counters["hand_overs"] += 1
    if error_class == ErrorClass.BUDGET_EXHAUSTED:
        counters["budget_exhausted"] += 1
    for shadow in log.get("shadow", ()):
        counters[f"shadow_{shadow.get('mode', 'audit')}"] += 1


@dataclass(frozen=True)
class Decided:
    """What steps 1–4 decided about a call, before execution changed the route."""

    route: str
    error_class: str | None
    rule: str | None


@dataclass(frozen=True)
class RecordedLookup:
    """What a look-up found: a record, a list of them (``many: list``), or None (skipped)."""

    collection: str
    found: Any


@dataclass(frozen=True)
class ReplayInputs:
    """A log line's ``replay``: everything the decision read besides the call itself (which
    is the line's ``tool`` and ``arguments``). ``masked``: the argument paths whose values
    are ``***`` here and in the arguments; ``now`` is None when the call was refused before
    the time was read."""

    now: str | None
    actor: Mapping[str, Any]
    session: Mapping[str, Any]
    records: Mapping[str, RecordedLookup]
    provenance: Any
    masked: tuple[str, ...]
    decided: Decided
    # a tool whose rules read them: each argument's origins and the run's reads
    origins: Any = None
    reads: Any = None

    def as_dict(self) -> dict[str, Any]:
        return replay_record(
            now=self.now, actor=self.actor, session=self.session,
            records={name: (found.collection, found.found)
                     for name, found in self.records.items()},
            provenance=self.provenance, masked=self.masked,
            decided=(self.decided.route, self.decided.error_class, self.decided.rule),
            origins=self.origins, reads=self.reads)

    @classmethod
    def of(cls, value: Any) -> ReplayInputs:
        """A log line's ``replay`` read back; ``ValueError`` says what is wrong with it."""
        if not isinstance(value, Mapping):
            raise ValueError("replay is not a mapping")
        try:
            decided = value["decided"]
            records = value.get("records") or {}
            return cls(
                now=value.get("now"), actor=dict(value["actor"]),
                session=dict(value.get("session") or {}),
                records={str(name): RecordedLookup(str(found["collection"]), found.get("found"))
                         for name, found in records.items()},
                provenance=value.get("provenance"),
                masked=tuple(str(path) for path in value.get("masked") or ()),
                decided=Decided(str(decided["route"]), decided.get("error_class"),
                                decided.get("rule")),
                origins=value.get("origins"), reads=value.get("reads"))
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"replay is incomplete ({type(error).__name__}: {error})") \
                from None


def replay_record(*, now: str | None, actor: Mapping[str, Any], session: Mapping[str, Any],
                  records: Mapping[str, tuple[str, Any]], provenance: Any,
                  masked: tuple[str, ...], decided: tuple[str, str | None, str | None],
                  origins: Any = None, reads: Any = None) -> dict[str, Any]:
    """A log line's ``replay`` as JSON, what ``ReplayInputs.of`` reads back (``records``:
    look-up name → (collection, what it found); ``decided``: route, error class, rule;
    ``origins`` and ``reads`` only where the tool's rules read them).
    Made without the dataclasses: every logged decision writes one."""
    route, error_class, rule = decided
    made = {"now": now, "actor": dict(actor), "session": dict(session),
            "records": {name: {"collection": collection, "found": found}
                        for name, (collection, found) in records.items()},
            "provenance": provenance, "masked": list(masked),
            "decided": {"route": route, "error_class": error_class, "rule": rule}}
    if origins is not None:
        made["origins"], made["reads"] = origins, reads
    return made


def utc_now() -> datetime:
    return datetime.now(UTC)


class DecisionLog:
    """Appends one JSON line per decision to a file or a stream.

    With a file and a ``retention``, lines whose ``ts`` is older than the retention are
    dropped when the log is opened, and then as it writes: at the first write after a line
    may have aged out, at most once per tenth of the retention (``purge_every`` to change
    that). ``clock`` tells the time (the UTC wall clock by default); ``now`` is the time at
    opening, for a log opened in a test. A line whose ``ts`` is missing, unreadable or has
    no time zone cannot be dated: it is kept, and reported as a warning of the ``callgate``
    logger (again only when there are more of them). ``purge()`` purges at once.

    Purging rewrites the file (to a new file, then renamed over it): one process should
    write a given file; give each process its own, or log to a stream and rotate outside.
    """

    def __init__(self, target: str | Path | TextIO, *, retention: timedelta | None = None,
                 now: datetime | None = None, clock: Callable[[], datetime] = utc_now,
                 purge_every: timedelta | None = None) -> None:
        self._lock = threading.Lock()
        self.retention = retention
        self.clock = clock
        self.purge_every = purge_every if purge_every is not None else (
            retention / PURGE_SHARE if retention is not None else None)
        self.path: Path | None = None
        self._next_purge: datetime | None = None
        self._undated_reported = 0
        if isinstance(target, str | Path):
            self.path = Path(target)
            if retention is not None:
                self._purge(now or clock())
            self._stream: TextIO = self._open()
            self._owned = True
        else:
            self._stream = target
            self._owned = False

    def write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        with self._lock:
            if self._next_purge is not None:
                now = self.clock()
                if now >= self._next_purge:
                    self._purge_open_file(now)
            self._stream.write(line + "\n")
            self._stream.flush()

    def purge(self, now: datetime | None = None) -> int:
        """Drop records older than the retention from the file; return how many went."""
        if self.path is None or self.retention is None:
            return 0
        with self._lock:
            return self._purge_open_file(now or self.clock())

    def close(self) -> None:
        if self._owned:
            self._stream.close()

    # -- the file -----------------------------------------------------------------------

    def _open(self) -> TextIO:
        """The file for appending, after a newline if its last line was cut short (a crash
        mid-write), so that the next line starts a line of its own."""
        assert self.path is not None
        cut_short = False
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open("rb") as raw:
                raw.seek(-1, os.SEEK_END)
                cut_short = raw.read(1) != b"\n"
        stream = self.path.open("a", encoding="utf-8")
        if cut_short:
            stream.write("\n")
        return stream

    def _purge_open_file(self, now: datetime) -> int:
        self._stream.close()
        try:
            return self._purge(now)
        finally:
            self._stream = self._open()

    def _purge(self, now: datetime) -> int:
        """Rewrite the file without the lines older than the retention; schedule the next
        purge for when the oldest line kept may age out."""
        assert self.path is not None and self.retention is not None
        if now.tzinfo is None or now.utcoffset() is None:
            raise ValueError(f"the time to purge the decision log at must have a time zone, "
                             f"not {now.isoformat()}")
        if not self.path.exists():
            self._schedule(now, None)
            return 0
        cutoff = now - self.retention
        dropped, undated, first_undated, oldest = 0, 0, 0, None
        temporary = self.path.with_suffix(self.path.suffix + ".tmp")
        with self.path.open(encoding="utf-8", newline="") as source, \
                temporary.open("w", encoding="utf-8", newline="") as kept:
            for number, line in enumerate(source, start=1):
                ts = _timestamp(line)
                if ts is None:
                    undated += 1
                    first_undated = first_undated or number
                elif ts < cutoff:
                    dropped += 1
                    continue
                else:
                    oldest = ts if oldest is None else min(oldest, ts)
                kept.write(line if line.endswith("\n") else line + "\n")
        os.replace(temporary, self.path)
        if undated > self._undated_reported:  # each such line reported once, not per purge
            self._undated_reported = undated
            LOGGER.warning("decision log %s: kept %d line(s) whose ts is missing, unreadable "
                           "or without a time zone (the first is line %d); they cannot be "
                           "dated, so retention never drops them", self.path, undated,
                           first_undated)
        self._schedule(now, oldest)
        return dropped

    def _schedule(self, now: datetime, oldest: datetime | None) -> None:
        assert self.retention is not None and self.purge_every is not None
        ages_out = (oldest or now) + self.retention
        self._next_purge = max(ages_out, now + self.purge_every)


def _timestamp(line: str) -> datetime | None:
    """The line's ``ts`` as an aware datetime, or None when it cannot be dated."""
    try:
        record = json.loads(line)
        ts = datetime.fromisoformat(record["ts"]) if isinstance(record, dict) else None
    except (ValueError, KeyError, TypeError):
        return None
    if ts is None or ts.tzinfo is None or ts.utcoffset() is None:
        return None
    return ts


def open_decision_log(path: str | Path | None) -> DecisionLog | None:
    """The decision log a ``--decision-log PATH`` option names (``None`` for none), or an
    ``InputError`` saying why the file cannot be written."""
    if path is None:
        return None
    try:
        return DecisionLog(path)
    except OSError as error:
        raise InputError(f"--decision-log {path}: cannot write: {error.strerror}") from None
