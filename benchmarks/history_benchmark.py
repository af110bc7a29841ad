"""What ``history`` costs a decision: ``Gate.check`` of a payment whose rules read the run's
history, with 0 to 1,000 earlier entries in the memory store, an SQLite file and (when
CALLGATE_BENCH_POSTGRES_URL or CALLGATE_TEST_POSTGRES_URL is set) PostgreSQL; next to
the same call with the history passed by the host, and a call of a tool whose rules do not
read it (nothing is read). Also what recording one entry costs (``record_history``), and
what the run's lease costs a decision: ``Gate.handle`` of the same payment (executed,
receipt and entry written) in a run the host names, which takes and releases the run's
lease, next to one in a run it does not name (``run=None``: no other instance can know it,
so no lease); each call in a fresh run, so both read an empty history. And the lease alone
(``RunHold`` take and release).

All cells are measured in one run, interleaved, best of ``--repeat``; read the ratios, the
absolute figures are this machine's.

    python benchmarks/history_benchmark.py [--repeat 5] [--calls 200]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from callgate_rules.documents.compiler import load
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.runs import RunHold
from callgate_rules.store import MemoryStore, SqliteStore
from callgate_rules.store.base import ReceiptStore
from callgate_rules.store.history import HistoryEntry

BANKING = Path(__file__).resolve().parent.parent / "examples" / "banking"
T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
HOLDER = {"id": "U-1", "role": "holder"}
PAY = {"name": "sendMoney", "arguments": {"recipient": "DE89370400440532013000",
                                          "amount": 5, "subject": "bench"}}
READ = {"name": "readChannel", "arguments": {"channel": "general"}}


def entries(run_id: str, count: int) -> list[HistoryEntry]:
    return [HistoryEntry(run_id=run_id, at=T0 + timedelta(seconds=n), tool="sendMoney",
                         arguments={"recipient": f"DE8937040044053201{n % 10000:04d}",
                                    "amount": 1, "subject": f"#{n}"},
                         route="return_result", error_class=None, request_id=f"r{n}",
                         operation_id=f"op-{n}", executed=True,
                         executed_at=T0 + timedelta(seconds=n))
            for n in range(count)]


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
                executors={"sendMoney": lambda request: {"id": "tx"}},
                resolvers=WorldResolvers({"payees": [
                    {"id": "PY-1", "owner": "U-1", "iban": PAY["arguments"]["recipient"]}]}))
    calls = iter(range(10**9))

    def handled(named: bool) -> Any:
        number = next(calls)
        run = Run(started_at=now, run_id=f"{name}-lease-{uuid.uuid4().hex}") if named \
            else None
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    config = load([BANKING / "contracts", BANKING / "policies"])
    stores: dict[str, ReceiptStore] = {"memory": MemoryStore()}
    directory = tempfile.mkdtemp()
    stores["sqlite"] = SqliteStore(os.path.join(directory, "history.db"))
    url = os.environ.get("CALLGATE_BENCH_POSTGRES_URL") or \
        os.environ.get("CALLGATE_TEST_POSTGRES_URL")
    schema = f"callgate_bench_{uuid.uuid4().hex[:8]}"
    if url:
        from callgate_rules.store import PostgresStore
        stores["postgres"] = PostgresStore(url, schema=schema)
    now = T0 + timedelta(hours=1)
    cells: dict[str, Callable[[], Any]] = {}
    for name, store in stores.items():
        gate = Gate(config, store=store, secret=b"bench", clock=lambda: now,
                    resolvers=WorldResolvers({"payees": [
                        {"id": "PY-1", "owner": "U-1", "iban": PAY["arguments"]["recipient"]}]}))
        for count in (0, 10, 100, 1000):
            run = Run(started_at=T0, run_id=f"{name}-{count}")
            for entry in entries(run.run_id, count):
                store.record_history(entry)  # type: ignore[attr-defined]
            cells[f"{name:8} check, {count:4} entries"] = \
                lambda gate=gate, run=run: gate.check(PAY, actor=HOLDER, run=run, now=now)
        cells[f"{name:8} check, 0 passed by the host"] = \
            lambda gate=gate: gate.check(PAY, actor=HOLDER, history=[], now=now)
        host = entries("host", 100)
        cells[f"{name:8} check, 100 passed by the host"] = \
            lambda gate=gate, host=host: gate.check(PAY, actor=HOLDER, history=host, now=now)
        cells[f"{name:8} check, a tool that reads none"] = \
            lambda gate=gate: gate.check(READ, actor=HOLDER, run=Run(started_at=T0), now=now)
        cells.update(lease_cells(name, config, store, now))
        one = entries(f"{name}-record", 1)[0]
        cells[f"{name:8} record_history, one entry"] = \
            lambda store=store, one=one: store.record_history(one)  # type: ignore[attr-defined]
    results = {label: timed(cell, options.calls, options.repeat) for label, cell in
               cells.items()}
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
    for store in stores.values():
        store.close()
    if url:
        import psycopg
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
