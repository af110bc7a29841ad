"""Where an executed write's time goes in ``Gate.handle``, step by step, next to the floor.

The reference createFollowUp call with a no-op executor, on an SQLite file with the
store's own settings (WAL, ``synchronous=FULL``) kept in memory (``/dev/shm``, where
``fdatasync`` returns at once), so that only the work counts, not the disk
(``write_path_benchmark.py`` measures it on disk). Each step is measured as the difference
between running the steps up to it and up to the one before:

    decide      steps 1–4 and the route (``Gate.check``'s work), a new ``Run`` admitted
    machine     the write's operation ID, arguments hash and write machine
    execute     claim (one INSERT), the executor's hand-off, finish (one UPDATE)
    route       the decision completed with what execution did (``Router.ended``)
    record      the run told, the counters, the agent message read
    floor       the hand-written floor alone: the INSERT and the UPDATE
    keeps       every step again, the executor marked ``keeps_deadline`` (called in the
                calling thread, without the hand-off to a thread of its own)

Prints microseconds per write (least of five runs of 1,000, in one process) and, unless
``--quick``, CPU instructions per write counted by ``valgrind --tool=callgrind`` (each
step counted in a process of its own, in two windows of ``--writes`` writes between marks
that must agree: ``callgrind_counting.py``; the executor's thread is counted too, its
waiting is not); then the executor's hand-off alone, the gate's against a ``ThreadPoolExecutor``
(the one it replaced), least and median of 15 runs of 2,000 in turns.

    python benchmarks/write_steps_benchmark.py [--quick] [--writes 1000] [--store postgres]

``--store postgres`` counts the same steps against the PostgreSQL server of
CALLGATE_BENCH_POSTGRES_URL (or CALLGATE_TEST_POSTGRES_URL), in a schema of its own dropped
afterwards: the client's instructions (the server's are not counted), so what the gate
adds to the floor's two statements there.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import write_path_benchmark as wp  # noqa: E402 - the same call, actor and floor statements
from callgrind_counting import count, count_windows, valgrind_missing  # noqa: E402

STEPS = ("decide", "machine", "execute", "route", "record")
MEMORY = "/dev/shm" if os.path.isdir("/dev/shm") else None  # else the disk's time counts too


def target_in(directory: str, store: str) -> wp.Target:
    """Where the steps write: an SQLite file in ``directory``, or the PostgreSQL schema the
    measuring process made (``CALLGATE_STEPS_SCHEMA``)."""
    if store == "sqlite":
        return wp.Target("sqlite", os.path.join(directory, "receipts.db"))
    return wp.Target("postgres", postgres_url(), os.environ["CALLGATE_STEPS_SCHEMA"])


def postgres_url() -> str:
    url = os.environ.get("CALLGATE_BENCH_POSTGRES_URL") or os.environ.get(
        "CALLGATE_TEST_POSTGRES_URL")
    if not url:
        raise SystemExit("--store postgres: set CALLGATE_BENCH_POSTGRES_URL or "
                         "CALLGATE_TEST_POSTGRES_URL")
    return url


def setup(target: wp.Target) -> tuple[Callable[[int, int], None], Callable[[int], None]]:
    """``upto(step, n)``: the steps of one write up to ``step`` (0–4; 5 is all of them with
    the executor marked ``keeps_deadline``); ``floor(n)``."""
    wp.prepare(target)
    from callgate_rules import keeps_deadline, open_store
    from callgate_rules.pipeline.budgets import Run

    store = open_store(target.store_url())
    gates = [wp.reference_gate(executors={"createFollowUp": executor}, store=store,
                               worker="steps")
             for executor in (wp.create_follow_up, keeps_deadline(wp.create_follow_up))]
    # The floor of write_path_benchmark.py: its connection opened as the store's is.
    run_tag = uuid.uuid4().hex[:8]
    floor = wp.floor_operations(target, f"steps-{run_tag}")

    def upto(step: int, number: int) -> None:
        """``Gate.handle``'s own steps, stopping after ``step``."""
        # Unique to this process: the PostgreSQL schema outlives it, and a request ID seen
        # before would measure the earlier receipt's path, not an executed write.
        request_id = f"w{step}-{run_tag}-{number}"
        gate = gates[step == 5]
        now = gate.clock()
        run = Run(started_at=now)
        decision, progress = gate.decide_steps(wp.CALL, wp.ACTOR, now, request_id=request_id,
                                               run=run)
        run.admit(decision, gate.config.routing.budgets, now)
        if step == 0:
            return
        machine = gate.write_machine(progress, wp.ACTOR, request_id)
        if step == 1:
            return
        ending = machine.run()
        if step == 2:
            return
        ended = gate.plans.router.ended(decision, progress, ending,
                                        machine.operation.operation_id)
        if step == 3:
            return
        run.ended(ended)
        if not gate.recorded(ended).agent_message:
            raise RuntimeError("the write was not executed")

    for number in range(300):  # plans compiled, caches and the executor's thread warm
        upto(4, -number - 1)
        upto(5, -number - 1)
        floor(-number - 1)
    return upto, floor


def inner(step: str, writes: int, store: str) -> None:
    """What runs under valgrind: set up, then two counted windows of ``writes`` runs of
    ``step`` (``callgrind_counting.count_windows``)."""
    with tempfile.TemporaryDirectory(prefix="callgate-steps-", dir=MEMORY) as directory:
        upto, floor = setup(target_in(directory, store))
        numbers = iter(range(10**9))  # each write its own request ID

        def run(writes: int) -> None:
            for _ in range(writes):
                if step == "floor":
                    floor(next(numbers))
                else:
                    upto(int(step), next(numbers))

        count_windows(run, writes)


def instructions(step: str, writes: int, store: str) -> float:
    """Instructions per write of the steps up to ``step`` (or of the floor)."""
    return count([sys.executable, __file__, "--store", store, "--inner", step, str(writes)],
                 writes, what=f"step {step} on {store}")


def microseconds(writes: int, store: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="callgate-steps-", dir=MEMORY) as directory:
        upto, floor = setup(target_in(directory, store))
        best: dict[str, float] = {}
        counter = iter(range(10**9))
        runs: list[tuple[str, Callable[[], None]]] = [
            ("floor", lambda: floor(next(counter)))]
        runs += [(str(step), lambda step=step: upto(step, next(counter)))  # type: ignore[misc]
                 for step in range(6)]
        for _ in range(5):  # in turns, so that a drifting machine weighs on each alike
            for name, run in runs:
                started = time.perf_counter()
                for _ in range(writes):
                    run()
                took = (time.perf_counter() - started) / writes * 1e6
                best[name] = min(best.get(name, took), took)
    return best


def hand_offs(calls: int = 2000, runs: int = 15) -> dict[str, tuple[float, float]]:
    """µs per hand-off of a no-op executor (least, median of ``runs``): the gate's
    ``execute.send`` against ``ThreadPoolExecutor`` submit and result, in turns."""
    import concurrent.futures
    import contextvars
    from datetime import UTC, datetime

    from callgate_rules.documents.compiler import load
    from callgate_rules.pipeline.execute import ExecutionRequest, send

    contract = load([REPO / "contracts", REPO / "policies"]).contracts["createFollowUp"]
    request = ExecutionRequest("createFollowUp", {}, "op", datetime.now(UTC), {})
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=32)

    def noop(request: ExecutionRequest) -> None:
        return None

    ways: dict[str, Callable[[], object]] = {
        "hand": lambda: send(noop, request, contract, 30.0),
        "pool": lambda: pool.submit(contextvars.copy_context().run, noop,
                                    request).result(timeout=30.0),
    }
    taken: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(runs):
        for name, way in ways.items():
            started = time.perf_counter()
            for _ in range(calls):
                way()
            taken[name].append((time.perf_counter() - started) / calls * 1e6)
    pool.shutdown()
    return {name: (min(times), sorted(times)[len(times) // 2])
            for name, times in taken.items()}


def after_commit(checks: int = 2000, rounds: int = 3) -> dict[str, tuple[float, float]]:
    """µs of the same Python right after a durable commit on disk and right after itself
    (means of ``checks``, least of ``rounds``): ``Gate.check`` of the reference call, and a
    loop of about the same length that runs little code on little data.

    While ``fdatasync`` waits the thread sleeps and its processor may idle; on a virtual
    machine whose idle processor is given to others (this one: haltpoll without polling),
    what the code had warm in the processor's caches and branch predictors is gone when it
    wakes. Code that runs much of the interpreter over many objects, as a gate does, pays
    for it again after each commit; a tight loop hardly does."""
    gate = wp.reference_gate()

    def check() -> None:
        gate.check(wp.CALL, actor=wp.ACTOR).agent_message  # noqa: B018 - rendered, as used

    def loop() -> None:
        total, seen = 0, {}
        for number in range(1500):
            seen[number % 97] = total
            total += number * 3 % 7

    took: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="callgate-steps-") as directory:  # on disk
        target = wp.Target("sqlite", os.path.join(directory, "receipts.db"))
        wp.prepare(target)
        commit = wp.floor_operations(target, "after-commit")
        counter = iter(range(10**9))
        for name, work in (("Gate.check", check), ("a tight loop", loop)):
            for _ in range(200):
                commit(next(counter))
                work()
            after_commit = after_itself = float("inf")
            for _ in range(rounds):
                cold = warm = 0.0
                for _ in range(checks):
                    commit(next(counter))
                    started = time.perf_counter()
                    work()
                    middle = time.perf_counter()
                    work()
                    cold, warm = cold + middle - started, warm + time.perf_counter() - middle
                after_commit = min(after_commit, cold / checks * 1e6)
                after_itself = min(after_itself, warm / checks * 1e6)
            took[name] = (after_commit, after_itself)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="microseconds only")
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--inner", nargs=2, metavar=("STEP", "WRITES"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.inner:
        inner(options.inner[0], int(options.inner[1]), options.store)
        return
    if options.store == "postgres" and "CALLGATE_STEPS_SCHEMA" not in os.environ:
        os.environ["CALLGATE_STEPS_SCHEMA"] = f"callgate_steps_{uuid.uuid4().hex[:8]}"
        try:
            main()
        finally:
            wp.drop_schema(postgres_url(), os.environ["CALLGATE_STEPS_SCHEMA"])
        return
    missing = None if options.quick else valgrind_missing()
    if missing:
        raise SystemExit(f"{missing}; --quick measures microseconds only")
    times = microseconds(options.writes, options.store)
    counts: dict[str, float] = {}
    if not options.quick:
        counts = {step: instructions(step, options.writes, options.store)
                  for step in ("floor", "0", "1", "2", "3", "4", "5")}
    where = (f"SQLite WAL synchronous=FULL in {MEMORY or tempfile.gettempdir()}"
             if options.store == "sqlite" else "PostgreSQL (the client's instructions)")
    print(f"one executed write, {where}, {options.writes} writes per count")
    print(f"{'step':<9} {'µs':>7} {'instructions':>13}")
    previous_time = previous_count = 0.0
    for step, name in enumerate(STEPS):
        took = times[str(step)] - previous_time
        counted = counts.get(str(step), 0.0) - previous_count if counts else 0.0
        previous_time, previous_count = times[str(step)], counts.get(str(step), 0.0)
        print(f"{name:<9} {took:7.1f} {counted:13,.0f}" if counts else f"{name:<9} {took:7.1f}")
    for name, key in (("handle", "4"), ("floor", "floor"), ("keeps", "5")):
        print(f"{name:<9} {times[key]:7.1f} {counts[key]:13,.0f}" if counts
              else f"{name:<9} {times[key]:7.1f}")
    for name, (least, median) in hand_offs().items():
        print(f"hand-off through the {name}: {least:.1f} µs least, {median:.1f} µs median")
    if options.store == "sqlite":
        print(f"the same Python after a durable commit on disk ({tempfile.gettempdir()}) and "
              "after itself:")
        for name, (cold, warm) in after_commit().items():
            print(f"{name:<13} {cold:6.1f} µs after the commit, {warm:6.1f} µs after itself "
                  f"({cold / warm:.2f}×)")


if __name__ == "__main__":
    main()
