"""Each row of issue 32's table in one run: what callgate costs where a user feels it,
against a hand-written floor counted side by side, in instructions (callgrind).

    executed write, SQLite        ``Gate.handle`` of the reference write (no-op executor)
                                  vs the same INSERT claim and UPDATE finish, each committed
                                  (``write_steps_benchmark``)
    executed write, PostgreSQL    the same, the client's instructions (skipped, saying why,
                                  when no server answers at CALLGATE_BENCH_POSTGRES_URL or
                                  CALLGATE_TEST_POSTGRES_URL)
    decision, 1,000-entry run     ``Gate.check`` of the banking payment in a run of 1,000
                                  entries (memory store, SQLite) vs its rules by hand over the
                                  same entries (``history_benchmark``)
    POST /v1/decide               `callgate serve` vs a one-route Starlette + uvicorn app that
                                  parses the same body and answers the same bytes; and p99 at
                                  8 connections, wall time (``service_benchmark``)
    one MCP tool call             a read through `callgate gateway` over HTTP: the gateway
                                  process vs the upstream's own work for the same call
                                  (information; ``gateway_benchmark``)

Each figure comes from the row's own benchmark, by its functions: one process per figure
under valgrind, two windows that must agree within 2% (``callgrind_counting``), or no figure
and why. Without valgrind only the p99 row is measured.

    python benchmarks/where_users_feel_it.py            # ~25 minutes on 2 cores
    python benchmarks/where_users_feel_it.py --quick    # fewer operations a window
    python benchmarks/where_users_feel_it.py --rows service gateway
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))
sys.path.insert(0, str(BENCHMARKS))

from callgrind_counting import CountRefused, valgrind_missing  # noqa: E402


@dataclass
class Row:
    what: str
    callgate: float | None = None
    floor: float | None = None
    target: float | None = None  # None: information
    unit: str = "instructions"
    why_not: str = ""  # why there is no figure

    def line(self) -> str:
        if self.callgate is None or self.floor is None:
            return f"{self.what:<44} no figure: {self.why_not}"
        ratio = self.callgate / self.floor
        figures = (f"{self.callgate:>13,.0f} {self.floor:>11,.0f}" if self.unit ==
                   "instructions" else f"{self.callgate:>10.2f} ms {self.floor:>8.2f} ms")
        judged = ("information" if self.target is None else
                  f"target {self.target:g}x: {'met' if ratio <= self.target else 'NOT met'}")
        return f"{self.what:<44} {figures} {ratio:>7.2f}x  {judged}"


def postgres_unreachable() -> str | None:
    """Why the PostgreSQL rows cannot run, or None."""
    url = (os.environ.get("CALLGATE_BENCH_POSTGRES_URL")
           or os.environ.get("CALLGATE_TEST_POSTGRES_URL"))
    if not url:
        return "set CALLGATE_BENCH_POSTGRES_URL or CALLGATE_TEST_POSTGRES_URL"
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5):
            return None
    except Exception as error:  # any reason it does not answer is the reason to skip
        return f"PostgreSQL does not answer at the URL given ({type(error).__name__})"


def write_rows(quick: bool) -> list[Row]:
    import write_steps_benchmark as steps

    writes = 200 if quick else 1000
    rows = []
    for store, target in (("sqlite", 4.0), ("postgres", 2.5)):
        what = f"executed write, {'SQLite' if store == 'sqlite' else 'PostgreSQL (client)'}"
        why = postgres_unreachable() if store == "postgres" else None
        if why:
            rows.append(Row(what, target=target, why_not=why))
            continue
        schema = f"callgate_steps_{uuid.uuid4().hex[:8]}"
        os.environ["CALLGATE_STEPS_SCHEMA"] = schema  # where the postgres steps write
        try:
            handled = steps.instructions("4", writes, store)
            floor = steps.instructions("floor", writes, store)
            rows.append(Row(what, handled, floor, target))
        except CountRefused as refused:
            rows.append(Row(what, target=target, why_not=str(refused)))
        finally:
            if store == "postgres":
                steps.wp.drop_schema(steps.postgres_url(), schema)
            del os.environ["CALLGATE_STEPS_SCHEMA"]
    return rows


def history_rows(quick: bool) -> list[Row]:
    import history_benchmark as history

    windows = (history.QUICK if quick else history.PER_WINDOW)["long"]
    entries = history.ENTRIES
    floor = history.instructions(f"floor:memory:{entries}", windows)
    rows = []
    for store in ("memory", "sqlite"):
        what = f"decision in a {entries:,}-entry run, {store}"
        figure = history.instructions(f"pay:{store}:{entries}", windows)
        if isinstance(figure, str) or isinstance(floor, str):
            reason = figure if isinstance(figure, str) else floor
            rows.append(Row(what, target=history.TARGET, why_not=str(reason)))
        else:
            rows.append(Row(what, figure, floor, history.TARGET))
    return rows


def service_rows(quick: bool) -> list[Row]:
    import service_benchmark as service

    rows = []
    what = "POST /v1/decide vs the floor app"
    if valgrind_missing() is None:
        try:
            counts = service.decide_instructions(*((60, 60) if quick else (300, 200)))
            rows.append(Row(what, counts["callgate"], counts["floor"], 1.5))
        except CountRefused as refused:
            rows.append(Row(what, target=1.5, why_not=str(refused)))
    timed = service.decide_latency(*((2.0, 1) if quick else (4.0, 2)))
    rows.append(Row("POST /v1/decide, p99 at 8 connections", timed["callgate"].p99 * 1000,
                    timed["floor"].p99 * 1000, 3.0, unit="ms"))
    return rows


def gateway_rows(quick: bool) -> list[Row]:
    import gateway_benchmark as gateway

    what = "one MCP read call: gateway vs upstream"
    try:
        counts = gateway.call_instructions(*((30, 30) if quick else (100, 60)))
    except CountRefused as refused:
        return [Row(what, why_not=str(refused))]
    return [Row(what, counts["gateway"], counts["upstream"])]


ROWS: dict[str, Callable[[bool], list[Row]]] = {
    "write": write_rows, "history": history_rows, "service": service_rows,
    "gateway": gateway_rows}
COUNTED = {"write", "history", "gateway"}  # nothing but instructions: skipped without valgrind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer operations a window, shorter wall-time cells")
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS),
                        help="which rows (default: all)")
    options = parser.parse_args()
    missing = valgrind_missing()
    started = time.monotonic()
    rows: list[Row] = []
    for name in options.rows:
        if name in COUNTED and missing:
            rows.append(Row(name, why_not=missing))
            continue
        print(f"  counting: {name} ...", file=sys.stderr, flush=True)
        rows.extend(ROWS[name](options.quick))
    print(f"issue 32, where users feel it: callgate against its floor, side by side "
          f"({'--quick, ' if options.quick else ''}{time.monotonic() - started:.0f} s)")
    print(f"{'what':<44} {'callgate':>13} {'floor':>11} {'ratio':>8}")
    for row in rows:
        print(row.line())


if __name__ == "__main__":
    main()
