"""What a named run costs the hosted flow (``run_id``: the run rebuilt from its history in
the store before each decision, the proposal recorded after it), side by side in one
process on one store:

- decide a read without a run, in a new run, and in a run of 3-4 earlier proposals;
- decide+claim+finish of a write without a run and in a new run;
- ``run_of`` alone: the one read every ending of a write now makes to learn whether the
  operation belongs to a run (its success marks the run's entries executed).

    python benchmarks/hosted_runs_benchmark.py            # SQLite in a temporary file
    python benchmarks/hosted_runs_benchmark.py --store postgresql://postgres@127.0.0.1/test
      (a schema of its own, dropped afterwards)

Prints the median and p90 in microseconds per operation. Wall time on a shared machine is
noisy: compare the rows of one run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import yaml

from callgate_rules.documents.compiler import load
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.hosted import HostedWrites
from callgate_rules.store import open_store

REPO = Path(__file__).resolve().parents[1]
DANA = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text())
WORLD = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
SESSION = {"authenticated": True}
READ = {"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}}


def payment(n: int) -> dict[str, object]:
    return {"name": "sendPayment", "arguments": {
        "recipientIban": "DE89370400440532013000", "amount": 1 + n % 500, "currency": "EUR"}}


def timed(label: str, rounds: int, work: Callable[[int], object]) -> None:
    times = []
    for n in range(rounds):
        started = time.perf_counter()
        work(n)
        times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    print(f"{label:<44} {statistics.median(times):>9.0f} {times[int(len(times) * .9)]:>9.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="receipt store URL (default: SQLite in a temp dir)")
    parser.add_argument("--rounds", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        url = options.store or f"sqlite:///{scratch}/receipts.db"
        options.store_has_schema = "schema=" in url  # the caller's: left alone
        if url.startswith("postgresql") and "schema=" not in url:
            url += ("&" if "?" in url else "?") + f"schema=cg_runs_{uuid.uuid4().hex[:8]}"
        store = open_store(url)
        flow = HostedWrites(load([REPO / "contracts", REPO / "policies"]), store=store,
                            resolvers=WorldResolvers(WORLD))
        rounds, tag = options.rounds, uuid.uuid4().hex[:6]

        def decide(run: Callable[[int], str | None]) -> Callable[[int], object]:
            return lambda n: flow.decide(READ, actor=DANA, session=SESSION,
                                         request_id=f"r{tag}{n}", run_id=run(n))

        def write(run: Callable[[int], str | None], prefix: str) -> Callable[[int], object]:
            def go(n: int) -> object:
                request_id, run_id = f"{prefix}{tag}{n}", run(n)
                flow.decide(payment(n), actor=DANA, session=SESSION, request_id=request_id,
                            run_id=run_id)
                step = flow.claim(payment(n), actor=DANA, session=SESSION,
                                  request_id=request_id, run_id=run_id)
                assert step.lease is not None, step
                return flow.finish(step.operation_id, step.lease, actor=DANA,
                                   result={"iban": "DE89370400440532013000", "id": n})
            return go

        long_runs = f"long-{tag}"
        for n in range(rounds):  # runs of 3 proposals: 2 passes stay within 5 calls a run
            for k in range(3):
                flow.decide(READ, actor=DANA, session=SESSION, request_id=f"p{tag}{n}{k}",
                            run_id=f"{long_runs}-{n}")
        print(f"{url.split('?')[0]}: µs per operation, {rounds} rounds")
        print(f"{'':<44} {'median':>9} {'p90':>9}")
        for _ in range(2):  # the second pass is the one to read (caches warm)
            timed("decide, no run", rounds, decide(lambda n: None))
            timed("decide, a new run", rounds, decide(lambda n: f"new-{uuid.uuid4().hex}"))
            timed("decide, a run of 3-4 proposals", rounds, decide(lambda n: f"{long_runs}-{n}"))
            timed("decide+claim+finish, no run", rounds, write(lambda n: None, "w"))
            timed("decide+claim+finish, a new run", rounds,
                  write(lambda n: f"wr-{uuid.uuid4().hex}", "x"))
            timed("run_of (each write's ending)", rounds,
                  lambda n: store.run_of(f"op-{n}"))  # type: ignore[attr-defined]
            tag = uuid.uuid4().hex[:6]
        store.close()
        if url.startswith("postgresql") and not options.store_has_schema:
            drop_schema(url)


def drop_schema(url: str) -> None:
    import psycopg

    base, _, query = url.partition("?")
    schema = dict(part.split("=", 1) for part in query.split("&"))["schema"]
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
