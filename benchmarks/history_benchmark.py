"""What ``history`` costs a decision, in instructions, against the same rules by hand.

The floor (issue 32): the expressions over ``history`` that a ``check`` of the banking
``sendMoney`` evaluates (the policy's sequence rule and the contract's three rules), written
by hand in Python over the same 1,000 entries already in memory. Next to it, ``Gate.check``
of that payment in a run of 1,000 entries kept by the memory store, an SQLite file and (when
CALLGATE_BENCH_POSTGRES_URL or CALLGATE_TEST_POSTGRES_URL is set) PostgreSQL, client side;
the ratio is printed against its target (3×). Then whether a decision's cost depends on the
history's length: ``check`` of a tool whose one rule reads only the newest entry, in runs of
10 and 1,000 entries (the target: the same count).

Each figure is counted by ``callgrind_counting``: one process per cell under valgrind, two
windows of decisions between marks after a warm-up, which must agree within 2%. The runs
are written before the marks, and nothing is written in them: a decision reads its run's
view (``pipeline.history.RunViews``) and finds nothing new, as every decision of a run does
but for the entries written since the last one.

    python benchmarks/history_benchmark.py [--quick]      instructions (valgrind)
    python benchmarks/history_benchmark.py --wall [--repeat 5] [--calls 200]

``--quick`` counts fewer decisions a window and leaves PostgreSQL out (a smoke test);
``--wall`` prints microseconds per call for 0 to 1,000 entries on each store, the host's own
history, a tool that reads none, recording an entry and the run's lease (information: wall
time on a shared machine). ``--inner CELL COUNT`` is what runs under valgrind.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from callgrind_counting import CountRefused, count, count_windows, valgrind_missing

from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.runs import RunHold
from callgate_rules.store import MemoryStore, SqliteStore
from callgate_rules.store.base import ReceiptStore, canonical_json
from callgate_rules.store.history import HistoryEntry, HistoryStatements
from callgate_rules.store.sqlite import SQLITE

REPO = Path(__file__).resolve().parent.parent
BANKING = REPO / "examples" / "banking"
T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
DAY = timedelta(hours=24)
HOLDER = {"id": "U-1", "role": "holder"}
PAY = {"name": "sendMoney", "arguments": {"recipient": "DE89370400440532013000",
                                          "amount": 5, "subject": "bench"}}
READ = {"name": "readChannel", "arguments": {"channel": "general"}}
NEWEST = {"name": "afterTheLastCall", "arguments": {}}
PAYEES = WorldResolvers({"payees": [
    {"id": "PY-1", "owner": "U-1", "iban": PAY["arguments"]["recipient"]}]})
# A tool whose one rule reads only the newest entry of the run.
NEWEST_CONTRACT = """
apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: afterTheLastCall
  version: "1.0.0"
  owner: bench@example.com
  description: A call judged on the run's newest entry only.
spec:
  effect: read
  arguments: {type: object, additionalProperties: false, properties: {}}
  rules:
    - name: not-right-after-a-mail-read
      expression: size(history) == 0 || history[size(history) - 1].tool != "readInbox"
      error_class: forbidden
      message: The call right after a mail read waits.
  examples:
    - arguments: {}
"""
TARGET = 3.0  # issue 32: a decision over 1,000 entries within 3x the rules by hand
ENTRIES = 1000
PER_WINDOW = {"long": 30, "short": 300}  # decisions a window, over 1,000 and over 10 entries
QUICK = {"long": 4, "short": 40}
WARM_UP = 20


def entries(run_id: str, count: int) -> list[HistoryEntry]:
    return [HistoryEntry(run_id=run_id, at=T0 + timedelta(seconds=n), tool="sendMoney",
                         arguments={"recipient": f"DE8937040044053201{n % 10000:04d}",
                                    "amount": 1, "subject": f"#{n}"},
                         route="return_result", error_class=None, request_id=f"r{n}",
                         operation_id=f"op-{n}", executed=True,
                         executed_at=T0 + timedelta(seconds=n))
            for n in range(count)]


def by_hand(history: Sequence[HistoryEntry], arguments: dict[str, Any],
            payees_on_file: list[Any], now: datetime) -> str:
    """The floor: what the decision's expressions over ``history`` say, in plain Python."""
    # the policy's sequence rule: no payment once the run read the inbox
    if any(h.tool == "readInbox" and h.executed for h in history):
        return "forbidden"
    recipient = arguments["recipient"]
    # daily-limit-per-recipient
    paid = sum(h.arguments["amount"] for h in history
               if h.tool == "sendMoney" and h.executed
               and h.arguments["recipient"] == recipient and now - h.at < DAY)
    if float(paid) + float(arguments["amount"]) > 1500.0:
        return "confirmation_required"
    # payee-created-in-this-run
    if any(h.tool == "createPayee" and h.executed and h.arguments["iban"] == recipient
           for h in history):
        return "confirmation_required"
    # new-account-paid-once
    if not payees_on_file and any(h.tool == "sendMoney" and h.executed
                                  and h.arguments["recipient"] == recipient
                                  for h in history):
        return "confirmation_required"
    return "allowed"


def banking(directory: str) -> GateConfig:
    """The banking example and the tool that reads the newest entry only."""
    Path(directory, "newest.yaml").write_text(NEWEST_CONTRACT, encoding="utf-8")
    return load([BANKING / "contracts", BANKING / "policies", Path(directory)])


def filled_sqlite(path: str, run_id: str, count: int) -> SqliteStore:
    """An SQLite store whose run holds ``count`` entries, written in one transaction (the
    store's own statement: each is a durable commit, which is not what is measured)."""
    store = SqliteStore(path)
    insert = HistoryStatements.of(SQLITE).insert
    with sqlite3.connect(path) as connection:
        connection.executemany(insert.sql, [insert.arguments({
            "run_id": entry.run_id, "at": text(entry.at), "tool": entry.tool,
            "arguments": canonical_json(entry.arguments), "route": entry.route,
            "error_class": None, "request_id": entry.request_id,
            "operation_id": entry.operation_id, "executed": True,
            "executed_at": text(entry.at), "result": None})
            for entry in entries(run_id, count)])
    return store


def text(moment: datetime) -> str:
    """An instant as the SQLite store writes it."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def postgres_url() -> str | None:
    return (os.environ.get("CALLGATE_BENCH_POSTGRES_URL")
            or os.environ.get("CALLGATE_TEST_POSTGRES_URL"))


def inner(cell: str, per_window: int) -> None:
    """One cell, counted: ``WHAT:STORE:ENTRIES`` (what: pay, newest or floor)."""
    what, store_name, size = cell.split(":")
    count = int(size)
    directory = tempfile.mkdtemp(prefix="callgate-history-bench-")
    config = banking(directory)
    run = Run(started_at=T0, run_id="bench")
    if what == "floor":
        history = entries(run.run_id, count)
        arguments, payees = PAY["arguments"], [{"id": "PY-1"}]
        assert isinstance(arguments, dict)

        def decide() -> Any:
            return by_hand(history, arguments, payees, NOW)
        expected: Any = "allowed"
    else:
        store = open_store(store_name, directory, run.run_id, count)
        gate = Gate(config, store=store, secret=b"bench", clock=lambda: NOW,
                    resolvers=PAYEES)
        call = PAY if what == "pay" else NEWEST

        def decide() -> Any:
            return gate.check(call, actor=HOLDER, run=run, now=NOW).error_class
        expected = None
    for _ in range(WARM_UP):
        verdict = decide()
    assert verdict == expected, verdict

    def decisions(number: int) -> None:
        for _ in range(number):
            decide()

    count_windows(decisions, per_window)
    if store_name == "postgres" and what != "floor":
        dropped(gate.store)


def open_store(name: str, directory: str, run_id: str, count: int) -> ReceiptStore:
    if name == "sqlite":
        return filled_sqlite(os.path.join(directory, "history.db"), run_id, count)
    if name == "memory":
        store: Any = MemoryStore()
    else:
        from callgate_rules.store import PostgresStore

        url = postgres_url()
        assert url, "no PostgreSQL URL"
        store = PostgresStore(url, schema=f"callgate_bench_{uuid.uuid4().hex[:8]}")
    for entry in entries(run_id, count):
        store.record_history(entry)
    return store  # type: ignore[no-any-return]


def dropped(store: Any) -> None:
    """Close a PostgreSQL store and drop its schema."""
    import psycopg

    store.close()
    url = postgres_url()
    assert url
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{store.schema}" CASCADE')


def instructions(cell: str, per_window: int) -> float | str:
    """Instructions per decision of ``cell``, or why there is no figure."""
    try:
        return count([sys.executable, __file__, "--inner", cell, str(per_window)],
                     per_window, what=cell, cwd=REPO)
    except CountRefused as refused:
        return str(refused)


def counted(quick: bool) -> int:
    missing = valgrind_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    windows = QUICK if quick else PER_WINDOW
    stores = ["memory", "sqlite"] + (["postgres"] if postgres_url() and not quick else [])
    floor = instructions(f"floor:memory:{ENTRIES}", windows["long"])
    print(f"instructions per decision, callgrind, {ENTRIES:,} entries in the run")
    print(f"{'floor: the rules by hand over the entries':48}{_figure(floor)}")
    for store in stores:
        figure = instructions(f"pay:{store}:{ENTRIES}", windows["long"])
        line = f"{'check of sendMoney, ' + store + ' store':48}{_figure(figure)}"
        if isinstance(figure, float) and isinstance(floor, float):
            ratio = figure / floor
            line += (f"  {ratio:5.2f}x the floor (target {TARGET:g}x: "
                     f"{'within' if ratio <= TARGET else 'OVER'})")
        print(line)
    print("\na rule that reads only the newest entry, by the run's length:")
    for store in stores:
        short = instructions(f"newest:{store}:10", windows["short"])
        long = instructions(f"newest:{store}:{ENTRIES}", windows["long"])
        line = f"{store:10}10 entries {_figure(short)}   {ENTRIES:,} entries {_figure(long)}"
        if isinstance(short, float) and isinstance(long, float):
            line += f"  ({long / short:.2f}x)"
        print(line)
    return 0


def _figure(figure: float | str) -> str:
    return f"{figure:>12,.0f}" if isinstance(figure, float) else f"no figure: {figure}"


# Wall time (information) -------------------------------------------------------------------


def timed(function: Callable[[], Any], calls: int, repeat: int) -> float:
    """Best microseconds per call over ``repeat`` rounds of ``calls``."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        best = min(best, (time.perf_counter() - started) / calls)
    return best * 1e6


def lease_cells(name: str, config: Any, store: ReceiptStore,
                now: datetime) -> dict[str, Callable[[], Any]]:
    """``handle`` with and without the run's lease, and the lease alone, on ``store``."""
    gate = Gate(config, store=store, secret=b"bench", clock=lambda: now,
                executors={"sendMoney": lambda request: {"id": "tx"}}, resolvers=PAYEES)
    calls = iter(range(10**9))

    def handled(named: bool) -> Any:
        number = next(calls)
        run = (Run(started_at=now, run_id=f"{name}-lease-{uuid.uuid4().hex}") if named
               else None)
        decision = gate.handle(PAY, actor=HOLDER, request_id=f"{name}-{number}", run=run,
                               now=now)
        assert decision.route == "return_result", decision.log
        return decision

    def lease_alone() -> None:
        with RunHold(gate, f"{name}-alone") as hold:
            assert hold.take()

    return {f"{name:8} handle, run named (lease)": lambda: handled(True),
            f"{name:8} handle, run not named (none)": lambda: handled(False),
            f"{name:8} the lease alone (take, release)": lease_alone}


def wall(repeat: int, calls: int) -> None:
    config = load([BANKING / "contracts", BANKING / "policies"])
    stores: dict[str, Any] = {"memory": MemoryStore()}
    directory = tempfile.mkdtemp()
    stores["sqlite"] = SqliteStore(os.path.join(directory, "history.db"))
    url = postgres_url()
    if url:
        from callgate_rules.store import PostgresStore
        stores["postgres"] = PostgresStore(url, schema=f"callgate_bench_{uuid.uuid4().hex[:8]}")
    cells: dict[str, Callable[[], Any]] = {}
    for name, store in stores.items():
        gate = Gate(config, store=store, secret=b"bench", clock=lambda: NOW,
                    resolvers=PAYEES)
        for size in (0, 10, 100, 1000):
            run = Run(started_at=T0, run_id=f"{name}-{size}")
            for entry in entries(run.run_id, size):
                store.record_history(entry)
            cells[f"{name:8} check, {size:4} entries"] = \
                lambda gate=gate, run=run: gate.check(PAY, actor=HOLDER, run=run, now=NOW)
        cells[f"{name:8} check, 0 passed by the host"] = \
            lambda gate=gate: gate.check(PAY, actor=HOLDER, history=[], now=NOW)
        host = entries("host", 100)
        cells[f"{name:8} check, 100 passed by the host"] = \
            lambda gate=gate, host=host: gate.check(PAY, actor=HOLDER, history=host, now=NOW)
        cells[f"{name:8} check, a tool that reads none"] = \
            lambda gate=gate: gate.check(READ, actor=HOLDER, run=Run(started_at=T0), now=NOW)
        cells.update(lease_cells(name, config, store, NOW))
        one = entries(f"{name}-record", 1)[0]
        cells[f"{name:8} record_history, one entry"] = \
            lambda store=store, one=one: store.record_history(one)
    results = {label: timed(cell, calls, repeat) for label, cell in cells.items()}
    base = results["memory   check, a tool that reads none"]
    print(f"{'cell':45} {'us/call':>10} {'x base':>8}")
    for label, micros in results.items():
        print(f"{label:45} {micros:10.1f} {micros / base:8.2f}")
    print("\nthe run's lease, side by side (handle of a payment, fresh run each):")
    for name in stores:
        named = results[f"{name:8} handle, run named (lease)"]
        unnamed = results[f"{name:8} handle, run not named (none)"]
        print(f"{name:8} {named:10.1f} us with, {unnamed:10.1f} us without: "
              f"+{named - unnamed:.1f} us ({named / unnamed:.2f}x)")
    for name, store in stores.items():
        if name == "postgres":
            dropped(store)
        else:
            store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inner", nargs=2, metavar=("CELL", "COUNT"))
    parser.add_argument("--quick", action="store_true",
                        help="fewer decisions a window, no PostgreSQL: a smoke test")
    parser.add_argument("--wall", action="store_true", help="wall time (information)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    if options.inner:
        inner(options.inner[0], int(options.inner[1]))
        return 0
    if options.wall:
        wall(options.repeat, options.calls)
        return 0
    return counted(options.quick)


if __name__ == "__main__":
    raise SystemExit(main())
