"""The durable write path: ``Gate.handle`` executed writes per second next to the floor.

The floor is the minimal durable equivalent written by hand, on the same server (or the
same SQLite file settings: WAL, ``synchronous=FULL``) and the same table: per operation, a
claim row inserted and committed, then updated to ``succeeded`` and committed — two
statements, two durable commits, nothing else. ``Gate.handle`` does all seven steps for
the reference createFollowUp call (decide, claim, execute with a no-op executor, record),
so the ratio is what the gate costs on top of the two commits it must make anyway. It is
measured twice: with the executor as a plain function (the default: called in a thread of its
own, so that ``handle`` returns at the contract's timeout while an executor hangs), and
marked ``keeps_deadline`` (called in the calling thread, as an executor that keeps the
deadline itself may be).

Workers are separate processes (``spawn``), each with its own gate or connection, started
together; each cell runs for ``--seconds`` after all its workers are ready. The floor and
the gate (both ways) take turns, ``--rounds`` times per worker count, so that a disk or a
machine whose speed drifts (this one's ``fdatasync`` ranges from tens of microseconds to
milliseconds) weighs on all alike; the ratio is of the totals, with the range of the
rounds' ratios.
Each gate write is checked as a host would use it: routed ``return_result`` with its
agent message read, and afterwards every one of them is counted ``succeeded`` in the store.
No decision-log sink is configured, so no log record is built (``Decision.log`` is built
when first read). Prints writes per second for both and the ratio against the targets
(PostgreSQL at 16 workers ≥ 50%, SQLite single-process ≥ 70%).

    python benchmarks/write_path_benchmark.py [--seconds 3] [--rounds 2] [--workers 1,4,16]
                                              [--quick] [--only sqlite|postgres]

PostgreSQL is measured when CALLGATE_BENCH_POSTGRES_URL (or CALLGATE_TEST_POSTGRES_URL) is
set; it works in a schema of its own and drops it afterwards. ``--quick`` runs one second
per cell at 1 and 4 workers: a smoke check, not a measurement.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SPAWN = multiprocessing.get_context("spawn")
NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
ACTOR = {"id": "U-7", "tenant": "acme", "role": "agent", "teams": ["billing"]}
ARGUMENTS = {"ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}
CALL = {"name": "createFollowUp", "arguments": ARGUMENTS}
TARGETS = {("postgres", 16): 0.5, ("sqlite", 1): 0.7}


@dataclass(frozen=True)
class Target:
    kind: str  # "sqlite" or "postgres"
    location: str  # a file path or a libpq URL
    schema: str | None = None

    def store_url(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{self.location}"
        separator = "&" if "?" in self.location else "?"
        return f"{self.location}{separator}schema={self.schema}"


# The floor: two hand-written durable commits per operation -----------------------------------

INSERT = (
    "INSERT INTO callgate_receipts (operation_id, state, request_id, tool, contract_version, "
    "args_hash, arguments, actor, lease_owner, lease_expires_at, attempts, created_at, "
    "updated_at) VALUES ({p}, 'claimed', {p}, 'createFollowUp', '1', {p}, {p}{json}, "
    "{p}{json}, {p}, {p}, 1, {p}, {p}) ON CONFLICT (operation_id) DO NOTHING"
)
UPDATE = (
    "UPDATE callgate_receipts SET state = 'succeeded', result = {p}{json}, lease_owner = NULL, "
    "lease_expires_at = NULL, updated_at = {p} WHERE operation_id = {p}"
)


def floor_operations(target: Target, worker: str) -> Callable[[int], None]:
    """One operation of the floor: insert + commit, update + commit (autocommit each)."""
    arguments, actor = json.dumps(ARGUMENTS), json.dumps(ACTOR)
    if target.kind == "sqlite":
        connection: Any = sqlite3.connect(target.location, isolation_level=None, timeout=30)
        connection.execute("PRAGMA synchronous=FULL")  # the store's settings (WAL is the file's)
        insert, update = INSERT.format(p="?", json=""), UPDATE.format(p="?", json="")
        stamp: Any = NOW.isoformat()
    else:
        import psycopg

        connection = psycopg.connect(target.location, autocommit=True)
        connection.execute(f'SET search_path TO "{target.schema}"')
        insert = INSERT.format(p="%s", json="::jsonb")
        update = UPDATE.format(p="%s", json="::jsonb")
        stamp = NOW

    def operation(number: int) -> None:
        operation_id = f"floor-{worker}-{number}"
        connection.execute(insert, (operation_id, operation_id, "hash", arguments, actor,
                                    worker, stamp, stamp, stamp))
        connection.execute(update, ('{"id": "F-1"}', stamp, operation_id))

    return operation


# The gate: Gate.handle with a no-op destination ------------------------------------------------

def create_follow_up(request: Any) -> dict[str, Any]:
    return {"id": "F-1", **request.arguments}


def reference_gate(**bindings: Any) -> Any:
    """The shipped contracts and policies over the example world, at ``NOW``."""
    import yaml

    from callgate_rules import Gate, WorldResolvers

    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
    return Gate.from_paths(REPO / "contracts", REPO / "policies",
                           resolvers=WorldResolvers(world), clock=lambda: NOW, **bindings)


def gate_operations(target: Target, worker: str,
                    keeping_deadline: bool = False) -> Callable[[int], None]:
    from callgate_rules import keeps_deadline, open_store
    from callgate_rules.taxonomy import Route

    executor = keeps_deadline(create_follow_up) if keeping_deadline else create_follow_up
    gate = reference_gate(executors={"createFollowUp": executor},
                          store=open_store(target.store_url()), worker=worker)
    gate.check(CALL, actor=ACTOR)  # compile the plan before the clock starts

    def operation(number: int) -> None:
        decision = gate.handle(CALL, actor=ACTOR, request_id=f"gate-{worker}-{number}")
        if decision.route != Route.RETURN_RESULT or not decision.agent_message:
            raise RuntimeError(f"the write was not executed: {decision.log}")

    return operation


KINDS: dict[str, Callable[[Target, str], Callable[[int], None]]] = {
    "floor": floor_operations, "gate": gate_operations,
    "keeping": functools.partial(gate_operations, keeping_deadline=True)}


def run_worker(kind: str, target: Target, worker: str, seconds: float, ready: Barrier,
               counts: Queue[tuple[int, float]]) -> None:
    sys.path.insert(0, str(REPO))
    try:
        operation = KINDS[kind](target, worker)
        ready.wait()
        started = time.process_time()  # this process's CPU, every thread of it
        deadline = time.monotonic() + seconds
        done = 0
        while time.monotonic() < deadline:
            operation(done)
            done += 1
    except BaseException:
        counts.put((-1, 0.0))  # the parent stops waiting; the traceback is on stderr
        ready.abort()
        raise
    counts.put((done, time.process_time() - started))


@dataclass(frozen=True)
class Measured:
    """One cell of one kind: writes per second, and the CPU each write took."""

    per_second: float
    client_cpu: float  # µs of the workers' own CPU per write
    other_cpu: float | None  # µs of the rest of the machine's CPU per write (the server's)


def busy_ticks() -> int | None:
    """The machine's CPU ticks spent not idle so far (Linux), or None elsewhere."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return user + nice + system + irq + softirq + steal


def measure(kind: str, target: Target, workers: int, seconds: float) -> Measured:
    ready = SPAWN.Barrier(workers + 1)  # the workers and this process, which times the cell
    counts: Queue[tuple[int, float]] = SPAWN.Queue()
    run = uuid.uuid4().hex[:8]
    processes = [
        SPAWN.Process(target=run_worker,
                      args=(kind, target, f"{kind}{n}-{run}", seconds, ready, counts))
        for n in range(workers)
    ]
    for process in processes:
        process.start()
    # The machine's busy CPU over the cell's window: from the barrier the workers start at
    # to their deadline (their set-up and exit excluded).
    try:
        ready.wait(timeout=180)
    except threading.BrokenBarrierError:
        pass  # a worker failed: its report says so below
    busy_before = busy_ticks()
    time.sleep(seconds)
    busy_after = busy_ticks()
    reports = [counts.get(timeout=seconds + 180) for _ in processes]
    for process in processes:
        process.join()
    done = sum(count for count, _ in reports)
    if min(count for count, _ in reports) < 0:
        raise SystemExit(f"a {kind} worker failed (see above)")
    if kind != "floor" and succeeded(target, kind, run) != done:
        raise SystemExit(f"{done} writes made, {succeeded(target, kind, run)} receipts "
                         "succeeded")
    client = sum(cpu for _, cpu in reports) / done * 1e6
    other = None
    if busy_before is not None and busy_after is not None:
        machine = (busy_after - busy_before) / os.sysconf("SC_CLK_TCK") / done * 1e6
        other = max(0.0, machine - client)
    return Measured(done / seconds, client, other)


def succeeded(target: Target, kind: str, run: str) -> int:
    """How many receipts of the gate cell ``run`` the store holds as succeeded."""
    query = ("SELECT count(*) FROM callgate_receipts WHERE state = 'succeeded' "
             "AND request_id LIKE {p}")
    pattern = f"gate-{kind}%-{run}-%"
    if target.kind == "sqlite":
        with sqlite3.connect(target.location) as connection:
            return int(connection.execute(query.format(p="?"), (pattern,)).fetchone()[0])
    import psycopg

    with psycopg.connect(target.location, autocommit=True) as connection:
        connection.execute(f'SET search_path TO "{target.schema}"')
        row = connection.execute(query.format(p="%s"), (pattern,)).fetchone()
        return int(row[0]) if row else 0


@dataclass(frozen=True)
class Cell:
    """Floor and gate at one worker count, over the rounds: ``gates`` with the executor in a
    thread of its own, ``keeping`` with it marked ``keeps_deadline``."""

    store: str
    workers: int
    floors: list[Measured]
    gates: list[Measured]
    keeping: list[Measured]

    @staticmethod
    def mean(measured: list[Measured], value: Callable[[Measured], float | None]) -> float | None:
        values = [value(one) for one in measured]
        return None if None in values else sum(v for v in values if v is not None) / len(values)

    def ratios(self, gates: list[Measured]) -> list[float]:
        return [gate.per_second / floor.per_second
                for floor, gate in zip(self.floors, gates, strict=True)]


def cell(target: Target, workers: int, seconds: float, rounds: int) -> Cell:
    """Floor and the gate both ways in turns, ``rounds`` times."""
    floors, gates, keeping = [], [], []
    for _ in range(rounds):
        floors.append(measure("floor", target, workers, seconds))
        gates.append(measure("gate", target, workers, seconds))
        keeping.append(measure("keeping", target, workers, seconds))
    return Cell(target.kind, workers, floors, gates, keeping)


def cpu(measured: list[Measured]) -> str:
    """``client + other`` µs per write, as the rounds' means."""
    client = Cell.mean(measured, lambda one: one.client_cpu) or 0.0
    other = Cell.mean(measured, lambda one: one.other_cpu)
    return f"{client:.0f}" + ("" if other is None else f" + {other:.0f}")


def prepare(target: Target) -> None:
    """Create the store's tables (the floor writes into the same table)."""
    from callgate_rules import open_store

    open_store(target.store_url()).close()


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each cell")
    parser.add_argument("--rounds", type=int, default=2, help="floor/gate turns per cell")
    parser.add_argument("--workers", default="1,4,16", help="comma-separated worker counts")
    parser.add_argument("--quick", action="store_true", help="1 s cells at 1 and 4 workers")
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="measure one store")
    options = parser.parse_args()
    if options.quick:
        options.seconds, options.workers, options.rounds = 1.0, "1,4", 1
    worker_counts = [int(count) for count in options.workers.split(",")]
    postgres_url = os.environ.get("CALLGATE_BENCH_POSTGRES_URL") or os.environ.get(
        "CALLGATE_TEST_POSTGRES_URL")

    rows: list[Cell] = []
    with tempfile.TemporaryDirectory(prefix="callgate-write-bench-") as directory:
        if options.only != "postgres":
            for workers in worker_counts:
                target = Target("sqlite", os.path.join(directory, f"receipts-{workers}.db"))
                prepare(target)
                rows.append(cell(target, workers, options.seconds, options.rounds))
    if postgres_url and options.only != "sqlite":
        schema = f"callgate_wbench_{uuid.uuid4().hex[:8]}"
        target = Target("postgres", postgres_url, schema)
        try:
            prepare(target)
            for workers in worker_counts:
                rows.append(cell(target, workers, options.seconds, options.rounds))
        finally:
            drop_schema(postgres_url, schema)

    print(f"executed writes per second; workers are processes, {options.seconds:g} s per "
          f"cell, {options.rounds} round(s) of the floor then the gate both ways, "
          f"{os.cpu_count()} CPUs, SQLite "
          f"{sqlite3.sqlite_version} (WAL, synchronous=FULL) in {tempfile.gettempdir()}")
    print("CPU µs per write: the workers' own (every thread), then the rest of the machine's "
          "in the same window (the server, its kernel work, anything else running)")
    print("executor: 'thread' is a plain function, called in a thread of its own (the "
          "default); 'keeps' is the same function marked keeps_deadline")
    print(f"{'store':>9} {'workers':>7} {'executor':>8} {'floor/s':>9} {'handle/s':>9} "
          f"{'ratio':>6} {'rounds':>11} {'floor CPU':>13} {'handle CPU':>13}  target")
    for row in rows:
        floor = Cell.mean(row.floors, lambda one: one.per_second) or 0.0
        for executor, gates in (("thread", row.gates), ("keeps", row.keeping)):
            gate = Cell.mean(gates, lambda one: one.per_second) or 0.0
            ratios = row.ratios(gates)
            wanted = TARGETS.get((row.store, row.workers))
            verdict = "" if wanted is None else (
                f"≥ {wanted:.0%} {'met' if gate / floor >= wanted else 'MISSED'}")
            spread = f"{min(ratios):.0%}–{max(ratios):.0%}"
            print(f"{row.store:>9} {row.workers:>7} {executor:>8} {floor:9.0f} {gate:9.0f} "
                  f"{gate / floor:6.0%} {spread:>11} {cpu(row.floors):>13} "
                  f"{cpu(gates):>13}  {verdict}")
    if not postgres_url and options.only != "sqlite":
        print("PostgreSQL skipped: set CALLGATE_BENCH_POSTGRES_URL or CALLGATE_TEST_POSTGRES_URL")


if __name__ == "__main__":
    main()
