"""The decision log (one JSON line per decision) and the counters of SPEC §10."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from callgate_rules.taxonomy import ErrorClass, Route

ARGUMENT_ERRORS = frozenset({ErrorClass.MALFORMED, ErrorClass.UNKNOWN_TOOL,
                             ErrorClass.UNEXPECTED_ARGUMENT, ErrorClass.INVALID_ARGUMENT})


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


class DecisionLog:
    """Appends one JSON line per decision to a file or a stream.

    With a file and a ``retention``, lines older than the retention are dropped when the log
    is opened and whenever ``purge`` is called.
    """

    def __init__(self, target: str | Path | TextIO, *, retention: timedelta | None = None,
                 now: datetime | None = None) -> None:
        self._lock = threading.Lock()
        self.retention = retention
        self.path: Path | None = None
        if isinstance(target, str | Path):
            self.path = Path(target)
            if retention is not None and now is not None:
                self.purge(now)
            self._stream: TextIO = self.path.open("a", encoding="utf-8")
            self._owned = True
        else:
            self._stream = target
            self._owned = False

    def write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def purge(self, now: datetime) -> int:
        """Drop records older than the retention from the file; return how many went."""
        if self.path is None or self.retention is None or not self.path.exists():
            return 0
        cutoff = now - self.retention
        kept: list[str] = []
        dropped = 0
        with self.path.open(encoding="utf-8") as source:
            for line in source:
                try:
                    ts = datetime.fromisoformat(json.loads(line)["ts"])
                except (ValueError, KeyError, TypeError):
                    kept.append(line)
                    continue
                if ts < cutoff:
                    dropped += 1
                else:
                    kept.append(line)
        temporary = self.path.with_suffix(self.path.suffix + ".tmp")
        temporary.write_text("".join(kept), encoding="utf-8")
        os.replace(temporary, self.path)
        return dropped

    def close(self) -> None:
        if self._owned:
            self._stream.close()
