"""The decision log's retention as docs/how-to/host-application.md shows it: ``DecisionLog(path, retention=...)``
drops old lines when opened and as it writes; a line it cannot date is kept, with a warning."""

from __future__ import annotations

import io
import json
import logging
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.decision_log import DecisionLog, count
from callgate_rules.taxonomy import ErrorClass, Route

DAY = timedelta(days=1)
START = datetime(2026, 11, 29, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def line(ts: datetime | str, route: str) -> str:
    return json.dumps({"ts": ts if isinstance(ts, str) else ts.isoformat(), "route": route})


def routes(path: Path) -> list[str]:
    return [json.loads(text)["route"] for text in path.read_text().splitlines()
            if text.startswith("{") and text.endswith("}")]


def test_retention_purges_without_being_told_the_time(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    wall = datetime.now(UTC)
    path.write_text(line(wall - 40 * DAY, "old") + "\n" + line(wall - DAY, "recent") + "\n")
    log = DecisionLog(path, retention=30 * DAY)  # as the docs show it: no now=
    log.write({"ts": wall.isoformat(), "route": "new"})
    log.close()
    assert routes(path) == ["recent", "new"]


def test_retention_purges_as_the_log_writes(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    clock = Clock(START)
    log = DecisionLog(path, retention=30 * DAY, clock=clock)
    for day in range(70):
        clock.now = START + day * DAY
        log.write({"ts": clock.now.isoformat(), "route": f"day {day}"})
    log.close()
    kept = routes(path)
    # a line is kept at most a tenth of the retention longer than the retention
    assert kept[-1] == "day 69" and 30 <= len(kept) <= 34
    assert kept == [f"day {day}" for day in range(70 - len(kept), 70)]


def test_a_busy_log_is_not_rewritten_on_every_line(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "decisions.jsonl"
    clock = Clock(START)
    log = DecisionLog(path, retention=timedelta(hours=1), clock=clock)
    purges = []
    original = log._purge
    monkeypatch.setattr(log, "_purge", lambda now: purges.append(now) or original(now))
    for second in range(0, 4 * 3600, 10):  # four hours, a line every ten seconds
        clock.now = START + timedelta(seconds=second)
        log.write({"ts": clock.now.isoformat(), "route": "execute"})
    log.close()
    assert 25 <= len(purges) <= 40  # about every six minutes once lines age out, not 1,440
    assert len(routes(path)) <= 396  # an hour and six minutes of lines at most


@pytest.mark.parametrize("bad", ["2025-01-01T00:00:00", "yesterday", "", None, 17])
def test_a_line_that_cannot_be_dated_is_kept_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: object) -> None:
    path = tmp_path / "decisions.jsonl"
    undated = json.dumps({"ts": bad, "route": "undated"})
    path.write_text("\n".join([undated, "not json at all", json.dumps(["a", "list"]),
                               json.dumps({"route": "no ts"}), line(START - 40 * DAY, "old"),
                               line(START, "now")]) + "\n")
    with caplog.at_level(logging.WARNING, logger="callgate"):
        log = DecisionLog(path, retention=30 * DAY, clock=Clock(START))  # before: TypeError
        log.close()
    assert routes(path) == ["undated", "no ts", "now"]
    assert "not json at all" in path.read_text()
    (warning,) = caplog.records
    assert warning.name == "callgate" and "kept 4 line(s)" in warning.getMessage()
    assert "the first is line 1" in warning.getMessage()


def test_purging_an_open_log_keeps_what_it_writes_next(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_text(line(START - 40 * DAY, "old") + "\n")
    log = DecisionLog(path, retention=30 * DAY, now=START - 20 * DAY, clock=Clock(START))
    assert routes(path) == ["old"]  # 20 days old at opening
    assert log.purge() == 1
    log.write({"ts": START.isoformat(), "route": "after the purge"})
    log.close()
    # before: the file was replaced under the open stream, and this line went nowhere
    assert routes(path) == ["after the purge"]


def test_a_line_cut_short_by_a_crash_does_not_swallow_the_next(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_text(line(START, "complete") + "\n" + '{"ts": "2026-11-')
    log = DecisionLog(path, retention=30 * DAY, clock=Clock(START))
    log.write({"ts": START.isoformat(), "route": "next"})
    log.close()
    assert routes(path) == ["complete", "next"]


def test_a_stream_and_a_log_without_retention_are_never_purged(tmp_path: Path) -> None:
    stream = io.StringIO()
    log = DecisionLog(stream, retention=DAY, clock=Clock(START))
    log.write({"ts": (START - 9 * DAY).isoformat(), "route": "kept"})
    assert log.purge() == 0 and "kept" in stream.getvalue()
    path = tmp_path / "decisions.jsonl"
    path.write_text(line(START - 900 * DAY, "ancient") + "\n")
    DecisionLog(path).close()
    assert routes(path) == ["ancient"]


def test_the_time_to_purge_at_must_have_a_time_zone(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path / "decisions.jsonl", retention=DAY, clock=Clock(START))
    with pytest.raises(ValueError, match="must have a time zone"):
        log.purge(datetime(2026, 11, 29))
    log.write({"ts": START.isoformat(), "route": "still writes"})
    log.close()
    assert routes(tmp_path / "decisions.jsonl") == ["still writes"]


# -- counting: one table per category, held to SPEC §10's categories spelled out --------------

def _counted_by_hand(log: dict[str, Any]) -> Counter[str]:
    error_class, route, counters = log.get("error_class"), log.get("route"), Counter[str]()
    counters["decisions"] += 1
    counters["argument_errors"] += error_class in {"malformed", "unknown_tool",
                                                   "unexpected_argument", "invalid_argument"}
    counters["denials"] += error_class == "forbidden"
    counters["unknown_outcomes"] += bool(log.get("unknown_outcome"))
    counters["reconciliations"] += bool(log.get("reconciled"))
    counters["suppressed_duplicates"] += error_class == "duplicate"
    counters["regenerations"] += route == "regenerate"
    counters["retries"] += int(log.get("retries", 0))
    counters["hand_overs"] += route == "review"
    counters["budget_exhausted"] += error_class == "budget_exhausted"
    for shadow in log.get("shadow", ()):
        counters[f"shadow_{shadow.get('mode', 'audit')}"] += 1
    return counters


@pytest.mark.parametrize("error_class", [None, *ErrorClass])
@pytest.mark.parametrize("route", list(Route))
def test_a_decision_is_counted_in_each_of_its_categories(error_class: ErrorClass | None,
                                                          route: Route) -> None:
    log: dict[str, Any] = {"route": str(route), "error_class": None if error_class is None else str(error_class),
           "retries": 2, "unknown_outcome": error_class == ErrorClass.UNKNOWN_OUTCOME,
           "reconciled": route == Route.RECONCILE, "shadow": [{"mode": "enforce"}, {}]}
    counters: Counter[str] = Counter()
    count(counters, log)
    assert +counters == +_counted_by_hand(log)
