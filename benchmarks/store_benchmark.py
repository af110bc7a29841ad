"""Receipt store throughput: claim + finish pairs per second, SQLite next to PostgreSQL.

Each worker is a separate process (``spawn``) with its own store object, the way separate
gate hosts or worker processes would use it; every worker claims fresh operation IDs and
finishes each one as succeeded, so the figure is the cost of the two writes the gate makes
for every executed call. Each cell runs for ``--seconds`` after all its workers are ready.

    python benchmarks/store_benchmark.py [--seconds 3] [--workers 1,4,16]

PostgreSQL is measured when CALLGATE_BENCH_POSTGRES_URL (or CALLGATE_TEST_POSTGRES_URL) is
set; it works in a schema of its own and drops it afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sqlite3
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from callgate_rules.store import (
    NewOperation,
    PostgresStore,
    ReceiptState,
    ReceiptStore,
    SqliteStore,
)

SPAWN = multiprocessing.get_context("spawn")
NOW = datetime(2031, 1, 1, tzinfo=UTC)
LEASE = timedelta(minutes=5)
ARGUMENTS = {"order_id": "O-1001", "amount": {"value": 12.5, "currency": "EUR"}, "reason": "late"}
ACTOR = {"user_id": "u-7", "tenant": "acme"}


@dataclass(frozen=True)
class Target:
    kind: str  # "sqlite" or "postgres"
    location: str
    schema: str | None = None

    def open(self) -> ReceiptStore:
        if self.kind == "sqlite":
            return SqliteStore(self.location)
        return PostgresStore(self.location, schema=self.schema, max_connections=2)


def run_worker(
    target: Target, worker: str, seconds: float, ready: Barrier, counts: Queue[int]
) -> None:
    store = target.open()
    ready.wait()
    deadline = time.monotonic() + seconds
    done = 0
    while time.monotonic() < deadline:
        operation_id = f"{worker}-{done}"
        operation = NewOperation(
            operation_id=operation_id,
            request_id=operation_id,
            tool="refund_order",
            contract_version="1",
            args_hash="hash",
            arguments=ARGUMENTS,
            actor=ACTOR,
        )
        store.claim(operation, worker=worker, lease=LEASE, now=NOW)
        store.finish(
            operation_id, worker=worker, state=ReceiptState.SUCCEEDED, now=NOW,
            result={"refund_id": operation_id},
        )
        done += 1
    store.close()
    counts.put(done)


def measure(target: Target, workers: int, seconds: float) -> float:
    target.open().close()  # migrate once, before the workers start
    ready = SPAWN.Barrier(workers)
    counts: Queue[int] = SPAWN.Queue()
    run = uuid.uuid4().hex[:6]
    processes = [
        SPAWN.Process(target=run_worker, args=(target, f"w{n}-{run}", seconds, ready, counts))
        for n in range(workers)
    ]
    for process in processes:
        process.start()
    total = sum(counts.get(timeout=seconds + 120) for _ in processes)
    for process in processes:
        process.join()
    return total / seconds


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(schema)
        ))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each cell")
    parser.add_argument("--workers", default="1,4,16", help="comma-separated worker counts")
    options = parser.parse_args()
    worker_counts = [int(count) for count in options.workers.split(",")]
    postgres_url = os.environ.get("CALLGATE_BENCH_POSTGRES_URL") or os.environ.get(
        "CALLGATE_TEST_POSTGRES_URL"
    )

    results: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory(prefix="callgate-bench-") as directory:
        for workers in worker_counts:
            path = os.path.join(directory, f"receipts-{workers}.db")
            results["sqlite", workers] = measure(Target("sqlite", path), workers, options.seconds)
    if postgres_url:
        schema = f"callgate_bench_{uuid.uuid4().hex[:8]}"
        try:
            for workers in worker_counts:
                target = Target("postgres", postgres_url, schema)
                results["postgres", workers] = measure(target, workers, options.seconds)
        finally:
            drop_schema(postgres_url, schema)

    print(
        f"claim+finish pairs per second; workers are processes, {options.seconds:g} s per "
        f"cell, {os.cpu_count()} CPUs, SQLite {sqlite3.sqlite_version} "
        f"(WAL, synchronous=FULL) in {tempfile.gettempdir()}"
    )
    print(f"{'workers':>7}  {'SQLite':>10}  {'PostgreSQL':>10}")
    for workers in worker_counts:
        postgres = results.get(("postgres", workers))
        postgres_cell = f"{postgres:10.0f}" if postgres is not None else f"{'skipped':>10}"
        print(f"{workers:>7}  {results['sqlite', workers]:10.0f}  {postgres_cell}")
    if not postgres_url:
        print(
            "PostgreSQL skipped: set CALLGATE_BENCH_POSTGRES_URL or CALLGATE_TEST_POSTGRES_URL "
            "to measure it"
        )


if __name__ == "__main__":
    main()
