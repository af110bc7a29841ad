"""The decision log (one JSON line per decision), its retention, and the counters of SPEC §10.

Each line of a call that parsed carries ``replay``: the inputs the decision read (the actor
and session as the host passed them, the decision time, the records each look-up found, the
arguments' provenance), masked as the arguments are, and what steps 1–4 decided before any
execution. ``callgate replay`` decides each line again from them (``harness.replay``).

The log shows tampering. Every line carries ``chain``: its sequence number and the SHA-256
of the line before it (of its exact bytes, without the newline; 64 zeros before the first
line), so a line dropped, edited, inserted or moved breaks the chain at that place. With a
signing key (Ed25519), a *checkpoint* line is written every ``checkpoint_every`` lines and
when the log is closed: it signs its sequence number, the hash of the line before it, its
time and the key's ID, so lines edited and the chain recomputed after them are caught at
the next checkpoint. Rotation (``max_bytes``, or ``rotate()``) renames the file and starts
a new one whose first line chains to the last line of the old one. ``verify_log`` (and
``callgate log verify``) names the first line where the chain or a checkpoint breaks.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from callgate_rules.errors import InputError
from callgate_rules.taxonomy import ErrorClass, Route

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

ARGUMENT_ERRORS = frozenset({ErrorClass.MALFORMED, ErrorClass.UNKNOWN_TOOL,
                             ErrorClass.UNEXPECTED_ARGUMENT, ErrorClass.INVALID_ARGUMENT})
LOGGER = logging.getLogger("callgate")
# Purging reads and rewrites the whole file: at most once per this share of the retention,
# so a line is kept at most 1.1 times the retention, and a busy log is not rewritten on
# every line.
PURGE_SHARE = 10
GENESIS = "0" * 64  # what the first line of a log chains to
CHECKPOINT_EVERY = 1000  # lines between two signed checkpoints, by default
_TAIL_BLOCK = 1 << 16


# The counter an error class or a route adds one to, besides "decisions" (SPEC §10).
_COUNTED_ERROR_CLASSES: dict[str | None, str] = {
    **dict.fromkeys(ARGUMENT_ERRORS, "argument_errors"), ErrorClass.FORBIDDEN: "denials",
    ErrorClass.DUPLICATE: "suppressed_duplicates",
    ErrorClass.BUDGET_EXHAUSTED: "budget_exhausted"}
_COUNTED_ROUTES: dict[str | None, str] = {Route.REGENERATE: "regenerations",
                                          Route.REVIEW: "hand_overs"}


def count(counters: Counter[str], log: Mapping[str, Any]) -> None:
    """Add one decision to the counters: each category of SPEC §10 counted separately."""
    counters["decisions"] += 1
    by_error_class = _COUNTED_ERROR_CLASSES.get(log.get("error_class"))
    if by_error_class is not None:
        counters[by_error_class] += 1
    by_route = _COUNTED_ROUTES.get(log.get("route"))
    if by_route is not None:
        counters[by_route] += 1
    if log.get("unknown_outcome"):
        counters["unknown_outcomes"] += 1
    if log.get("reconciled"):
        counters["reconciliations"] += 1
    counters["retries"] += int(log.get("retries", 0))
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
            raise ValueError(
                f"replay is incomplete ({type(error).__name__}: {error})") from None


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
                 purge_every: timedelta | None = None,
                 signing_key: Ed25519PrivateKey | None = None,
                 checkpoint_every: int = CHECKPOINT_EVERY,
                 max_bytes: int | None = None) -> None:
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be at least 1, not {checkpoint_every}")
        self._lock = threading.Lock()
        self.signing_key = signing_key
        self.checkpoint_every = checkpoint_every
        self.max_bytes = max_bytes
        self._seq, self._head, self._since_checkpoint = 0, GENESIS, 0
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
            self._seq, self._head = _chain_end(self.path)
            self._owned = True
        else:
            self._stream = target
            self._owned = False

    def write(self, record: Mapping[str, Any]) -> str:
        """Append ``record`` as one chained line; returns the line's hash (``line_hash``),
        which the receipt of an executed write keeps (``Receipt.log_line``)."""
        with self._lock:
            if self._next_purge is not None:
                now = self.clock()
                if now >= self._next_purge:
                    self._purge_open_file(now)
            self._append(record)
            written = self._head
            self._since_checkpoint += 1
            if (self.signing_key is not None and
                    self._since_checkpoint >= self.checkpoint_every):
                self._checkpoint()
            if (self.max_bytes is not None and self.path is not None and
                    self._stream.tell() >= self.max_bytes):
                self._rotate()
            return written

    @property
    def head(self) -> tuple[int, str]:
        """The sequence number and the hash of the last line written (0 and ``GENESIS``
        before the first)."""
        with self._lock:
            return self._seq, self._head

    def checkpoint(self) -> None:
        """Write a signed checkpoint now (nothing without a signing key)."""
        with self._lock:
            if self.signing_key is not None:
                self._checkpoint()

    def rotate(self) -> Path:
        """Close the file (after a checkpoint, with a signing key), rename it to
        ``NAME.YYYYmmddTHHMMSSZ`` (and a number, if taken) and start a new file whose first
        line chains to the last line of the old one; returns the renamed file."""
        with self._lock:
            return self._rotate()

    def _append(self, record: Mapping[str, Any]) -> None:
        self._seq += 1
        chained = {**record, "chain": {"seq": self._seq, "prev": self._head}}
        line = json.dumps(chained, ensure_ascii=False, separators=(",", ":"), default=str)
        self._stream.write(line + "\n")
        self._stream.flush()
        self._head = line_hash(line)

    def _checkpoint(self) -> None:
        assert self.signing_key is not None
        from callgate_rules.signing import key_id

        signer = key_id(self.signing_key.public_key())
        ts = self.clock().isoformat()
        signature = self.signing_key.sign(
            checkpoint_message(self._seq + 1, self._head, ts, signer))
        self._append({"ts": ts, "checkpoint": {
            "key_id": signer, "signature": base64.b64encode(signature).decode("ascii")}})
        self._since_checkpoint = 0

    def _rotate(self) -> Path:
        if self.path is None:
            raise ValueError("a decision log written to a stream is rotated outside")
        if self.signing_key is not None and self._since_checkpoint:
            self._checkpoint()
        self._stream.close()
        stamp = self.clock().strftime("%Y%m%dT%H%M%SZ")
        rotated = self.path.with_name(f"{self.path.name}.{stamp}")
        number = 1
        while rotated.exists():
            number += 1
            rotated = self.path.with_name(f"{self.path.name}.{stamp}.{number}")
        os.replace(self.path, rotated)
        self._stream = self._open()
        return rotated

    def purge(self, now: datetime | None = None) -> int:
        """Drop records older than the retention from the file; return how many went."""
        if self.path is None or self.retention is None:
            return 0
        with self._lock:
            return self._purge_open_file(now or self.clock())

    def close(self) -> None:
        """Write a last checkpoint (with a signing key, when lines came after the last
        one) and close the file."""
        with self._lock:
            if self._stream.closed:
                return
            if self.signing_key is not None and self._since_checkpoint:
                self._checkpoint()
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
        with (self.path.open(encoding="utf-8", newline="") as source,
              temporary.open("w", encoding="utf-8", newline="") as kept):
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


def open_decision_log(path: str | Path | None, *, signing_key: str | Path | None = None,
                      checkpoint_every: int = CHECKPOINT_EVERY,
                      max_bytes: int | None = None) -> DecisionLog | None:
    """The decision log a ``--decision-log PATH`` option names (``None`` for none), with
    checkpoints signed by the Ed25519 key in the PEM file ``signing_key``, or an
    ``InputError`` saying why the file cannot be written."""
    if path is None:
        return None
    key = None
    if signing_key is not None:
        from callgate_rules.signing import load_private_key

        key = load_private_key(signing_key)
    try:
        return DecisionLog(path, signing_key=key, checkpoint_every=checkpoint_every,
                           max_bytes=max_bytes)
    except OSError as error:
        raise InputError(f"--decision-log {path}: cannot write: {error.strerror}") from None


# The chain ------------------------------------------------------------------------------


def line_hash(line: str) -> str:
    """The SHA-256 of a log line's bytes (UTF-8, without its newline), in hex."""
    return hashlib.sha256(line.encode("utf-8", "surrogatepass")).hexdigest()


def checkpoint_message(seq: int, prev: str, ts: str, key_id: str) -> bytes:
    """What a checkpoint's signature signs: its place in the chain, its time, its key."""
    return f"callgate decision log checkpoint\n{seq}\n{prev}\n{ts}\n{key_id}\n".encode()


def _last_line(path: Path) -> str | None:
    """The file's last non-blank line, read from its end."""
    with path.open("rb") as raw:
        end = raw.seek(0, os.SEEK_END)
        tail = b""
        while end > 0:
            start = max(0, end - _TAIL_BLOCK)
            raw.seek(start)
            tail = raw.read(end - start) + tail
            end = start
            stripped = tail.rstrip(b"\n")
            if b"\n" in stripped or end == 0:
                return (stripped.rsplit(b"\n", 1)[-1].decode("utf-8", "surrogateescape")
                    if stripped else None)
    return None


def _chain_end(path: Path) -> tuple[int, str]:
    """Where a log file's chain ends: its last line's sequence number and hash (0 and
    ``GENESIS`` for an empty file). A file written before chaining chains on from its
    last line, numbered from 1."""
    last = _last_line(path) if path.exists() else None
    if last is None:
        return 0, GENESIS
    try:
        seq = int(json.loads(last)["chain"]["seq"])
    except (ValueError, KeyError, TypeError):
        seq = 0
    return seq, line_hash(last)


@dataclass(frozen=True)
class LogVerification:
    """What ``verify_log`` found: lines and checkpoints checked, the first break (None
    when the chain holds), and what the check could not cover."""

    lines: int
    checkpoints: int
    broken: str | None
    notes: tuple[str, ...] = ()


def _lines_of(path: Path) -> list[str]:
    try:
        with path.open(encoding="utf-8", errors="surrogateescape", newline="") as file:
            return [line.rstrip("\n") for line in file if line.strip()]
    except OSError as error:
        raise InputError(f"{path}: cannot read the decision log: {error.strerror}") from None


def _first_seq(lines: list[str]) -> int:
    try:
        return int(json.loads(lines[0])["chain"]["seq"]) if lines else 0
    except (ValueError, KeyError, TypeError):
        return 0


def verify_log(paths: list[Path], public_key: Ed25519PublicKey | None, *,
               partial: bool = False) -> LogVerification:
    """Check the chain of the log files ``paths`` (a log and its rotated files, in any
    order: they are put in the order of their first lines' sequence numbers), and each
    checkpoint's signature with ``public_key``. The first break is named by file and line;
    the lines after the last checkpoint, which no signature covers yet, are noted.
    The chain must start at its first line, unless ``partial`` (earlier files rotated
    away, or lines purged by retention)."""
    from callgate_rules.signing import key_id, verifies

    expected_key = key_id(public_key) if public_key is not None else None
    files = sorted(((path, _lines_of(path)) for path in paths),
                   key=lambda kept: _first_seq(kept[1]))
    notes: list[str] = []
    head: str | None = None  # unknown before the first line: it may chain to a purged line
    seq = lines = checkpoints = 0
    since_checkpoint = 0
    above = ""  # the place of the line before
    for path, file_lines in files:
        for number, line in enumerate(file_lines, start=1):
            place = f"{path}:{number}"
            try:
                record = json.loads(line)
                chain = record["chain"]
                line_seq, prev = int(chain["seq"]), str(chain["prev"])
            except (ValueError, KeyError, TypeError):
                return LogVerification(lines, checkpoints, f"{place}: not a chained log line "
                                       "(not JSON, or no chain): inserted, edited or cut short")
            if head is None:
                if prev != GENESIS and not partial:
                    return LogVerification(lines, checkpoints, (
                        f"{place}: the chain breaks here: this is line {line_seq} of the "
                        "chain and the lines before it are missing (dropped; or rotated "
                        "away or purged: pass their files too, or --partial)"))
                if prev != GENESIS:
                    notes.append(f"{place}: the log starts at line {line_seq} of its chain "
                                 "(--partial: earlier lines rotated away or purged are not "
                                 "checked, nor whether lines were dropped before this one)")
            elif line_seq > seq + 1:
                return LogVerification(lines, checkpoints, (
                    f"{place}: the chain breaks here: line(s) {seq + 1}–{line_seq - 1} of "
                    f"the chain are missing before this one (dropped, or moved)"))
            elif line_seq <= seq:
                return LogVerification(lines, checkpoints, (
                    f"{place}: the chain breaks here: this is line {line_seq} of the chain, "
                    f"after line {seq}: lines were moved or inserted"))
            elif prev != head:
                return LogVerification(lines - 1, checkpoints, (
                    f"{above}: the chain breaks here: this line was edited (the next line "
                    f"recorded another hash for it), or replaced"))
            above = place
            if isinstance(record.get("checkpoint"), Mapping):
                problem = _checkpoint_problem(record, line_seq, prev, public_key,
                                              expected_key, verifies)
                if problem is not None:
                    return LogVerification(lines, checkpoints, f"{place}: {problem}")
                checkpoints += public_key is not None
                since_checkpoint = 0
            else:
                since_checkpoint += 1
            lines += 1
            seq, head = line_seq, line_hash(line)
    if public_key is None:
        notes.append("no --public-key: checkpoints were not checked; an edit whose chain "
                     "was recomputed after it goes unseen")
    elif since_checkpoint:
        notes.append(f"the last {since_checkpoint} line(s) come after the last checkpoint: "
                     "no signature covers them yet (the log is still open, or was not "
                     "closed cleanly, or lines were cut off its end)")
    return LogVerification(lines, checkpoints, None, tuple(notes))


def _checkpoint_problem(record: Mapping[str, Any], seq: int, prev: str,
                        public_key: Ed25519PublicKey | None, expected_key: str | None,
                        verifies: Callable[[Ed25519PublicKey, bytes, bytes], bool],
                        ) -> str | None:
    if public_key is None:
        return None
    checkpoint = record["checkpoint"]
    signer = checkpoint.get("key_id")
    if signer != expected_key:
        return (f"a checkpoint signed by key {signer}, not by the given key "
                f"{expected_key}: forged, or the wrong --public-key")
    try:
        signature = base64.b64decode(str(checkpoint.get("signature")), validate=True)
    except ValueError:
        return "the checkpoint's signature is not base64: forged or edited"
    if not verifies(public_key, signature,
                    checkpoint_message(seq, prev, str(record.get("ts")), str(signer))):
        return ("the checkpoint's signature does not verify: the checkpoint or a line "
                "before it was edited (and the chain recomputed), or it was forged")
    return None
