"""What AsyncGate costs over Gate: the same allowed decision, side by side in one process.

    python benchmarks/async_gate_benchmark.py [--decisions 2000]

``acheck`` runs the one synchronous pipeline in a worker thread and comes back to the event
loop: the difference is that hop. Also: the context copy ``execute.send`` makes per executor
call, so an executor runs in its caller's context (AsyncGate's loop, tracing spans).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import time
import timeit
from pathlib import Path

import yaml

from callgate_rules import AsyncGate, Gate, load
from callgate_rules.harness.world import WorldResolvers

REPO = Path(__file__).resolve().parents[1]
CALL = {"name": "createFollowUp", "arguments": {"ticketId": "T-1001", "assigneeId": "U-7",
                                                "dueAt": "2027-12-03T09:00:00Z"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=2000)
    count = parser.parse_args().decisions
    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
    dana = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text())
    config = load([REPO / "contracts", REPO / "policies"])
    sync = Gate(config, resolvers=WorldResolvers(world), store="memory:")
    asynchronous = AsyncGate(config, resolvers=WorldResolvers(world), store="memory:")

    async def run_async() -> None:
        for _ in range(count):
            assert (await asynchronous.acheck(CALL, actor=dana)).allowed

    for _ in range(2):  # the second round is the one to read: both warmed up
        started = time.perf_counter()
        for _ in range(count):
            assert sync.check(CALL, actor=dana).allowed
        middle = time.perf_counter()
        asyncio.run(run_async())
        ended = time.perf_counter()
    print(f"Gate.check       {1e6 * (middle - started) / count:8.1f} µs per decision")
    print(f"AsyncGate.acheck {1e6 * (ended - middle) / count:8.1f} µs per decision")
    copies = 200_000
    seconds = timeit.timeit(lambda: contextvars.copy_context().run(len, ()), number=copies)
    print(f"context copy per executor call {1e6 * seconds / copies:.2f} µs")


if __name__ == "__main__":
    main()
