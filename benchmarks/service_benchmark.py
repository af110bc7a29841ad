"""The decision service under load, next to the same work done in-process.

Starts `callgate serve` (one instance, then two sharing one PostgreSQL store) and drives
its API from this process over loopback with bounded concurrency for a fixed duration:

- decide:               POST /v1/decide
- decide+claim+finish:  POST /v1/decide, /v1/claim, /v1/finish (one write, exactly once)

and the same two workloads through the library (``pipeline.hosted.HostedWrites``) on the
same store, one thread. Prints operations/s and p50/p99 latency per workload, and the
overhead per request (service p50 minus library p50 at concurrency 1).

    python benchmarks/service_benchmark.py --quick
    python benchmarks/service_benchmark.py --duration 10 --concurrency 8

Needs the server extra and a PostgreSQL server (CALLGATE_TEST_POSTGRES_URL or --store);
each run uses a schema of its own and drops it. Wall time on a shared machine is noisy:
compare the rows of one run, not runs on different days.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from callgate_rules.documents.compiler import load  # noqa: E402
from callgate_rules.harness.world import WorldResolvers  # noqa: E402
from callgate_rules.pipeline.hosted import Action, HostedWrites  # noqa: E402
from callgate_rules.store import open_store  # noqa: E402

SECRET = "benchmark-secret-for-hs256-tokens-of-32-bytes"
ACTOR = {"id": "U-7", "tenant": "acme", "role": "agent"}
SESSION = {"authenticated": True}
IBAN = "DE89370400440532013000"


def call(amount: float) -> dict[str, Any]:
    return {"name": "sendPayment",
            "arguments": {"recipientIban": IBAN, "amount": amount, "currency": "EUR"}}


@dataclass
class Result:
    label: str
    count: int
    seconds: float
    latencies: list[float]

    def row(self) -> str:
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) * 1000 if ordered else float("nan")
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000 \
            if ordered else float("nan")
        return (f"{self.label:<52} {self.count / self.seconds:>9.1f}/s  p50 {p50:>7.2f} ms  "
                f"p99 {p99:>7.2f} ms  (n={self.count})")

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) if self.latencies else float("nan")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(store: str, root: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    command = [sys.executable, "-m", "callgate_rules.cli", "serve", str(REPO / "contracts"),
               str(REPO / "policies"), "--http", f"127.0.0.1:{port}", "--store", store,
               "--auth", str(root / "auth.yaml"), "--world",
               str(REPO / "examples" / "world.yaml"), "--log-level", "warning"]
    env = {**os.environ, "CALLGATE_BENCH_SECRET": SECRET, "CALLGATE_SECRET": SECRET}
    process = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return url, process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"callgate serve at {url} did not become ready")


def drive(label: str, urls: list[str], work: str, concurrency: int,
          duration: float) -> Result:
    """``concurrency`` client threads, spread over ``urls``, for ``duration`` seconds."""
    token = jwt.encode({"sub": "bench", "tenant": "acme", "exp": int(time.time()) + 3600},
                       SECRET, algorithm="HS256")
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + duration

    def client(index: int) -> None:
        mine: list[float] = []
        with httpx.Client(base_url=urls[index % len(urls)], timeout=30,
                          headers={"authorization": f"Bearer {token}"}) as http:
            while time.monotonic() < stop:
                started = time.perf_counter()
                one(http, work)
                mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Result(label, len(latencies), time.monotonic() - began, latencies)


def one(http: httpx.Client, work: str) -> None:
    request_id = uuid.uuid4().hex
    body = {"model_output": call(10.0), "actor": ACTOR, "session": SESSION,
            "request_id": request_id}
    decided = http.post("/v1/decide", json=body).json()
    assert decided["route"] == "execute", decided
    if work == "decide":
        return
    step = http.post("/v1/claim", json=body).json()
    assert step["action"] == "execute", step
    done = http.post("/v1/finish", json={
        "operation_id": step["operation_id"], "lease": step["lease"], "actor": ACTOR,
        "result": {"iban": IBAN, "id": request_id}}).json()
    assert done["decision"]["route"] == "return_result", done


def in_process(label: str, store: str, work: str, duration: float) -> Result:
    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
    flow = HostedWrites(load([REPO / "contracts", REPO / "policies"]),
                        resolvers=WorldResolvers(world), store=open_store(store))
    latencies: list[float] = []
    stop = time.monotonic() + duration
    began = time.monotonic()
    while time.monotonic() < stop:
        started = time.perf_counter()
        request_id = uuid.uuid4().hex
        decision = flow.decide(call(10.0), actor=ACTOR, request_id=request_id,
                               session=SESSION)
        assert decision.operation_id is not None
        if work != "decide":
            step = flow.claim(call(10.0), actor=ACTOR, request_id=request_id, session=SESSION)
            assert step.action == Action.EXECUTE and step.lease is not None
            flow.finish(step.operation_id, step.lease, actor=ACTOR,
                        result={"iban": IBAN, "id": request_id})
        latencies.append(time.perf_counter() - started)
    flow.gate.store.close()
    return Result(label, len(latencies), time.monotonic() - began, latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default=os.environ.get("CALLGATE_TEST_POSTGRES_URL"),
                        help="PostgreSQL URL (default: $CALLGATE_TEST_POSTGRES_URL)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per workload")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads")
    parser.add_argument("--quick", action="store_true", help="2 s per workload, 4 clients")
    options = parser.parse_args()
    if not options.store:
        raise SystemExit("set CALLGATE_TEST_POSTGRES_URL or pass --store postgresql://...")
    duration, concurrency = (2.0, 4) if options.quick else (options.duration,
                                                            options.concurrency)
    schema = f"cg_bench_{uuid.uuid4().hex[:8]}"
    store = f"{options.store}{'&' if '?' in options.store else '?'}schema={schema}"
    root = Path(tempfile.mkdtemp())
    (root / "auth.yaml").write_text("secret_env: CALLGATE_BENCH_SECRET\nclaims:\n"
                                    "  actor: {tenant: tenant}\n")
    results: list[Result] = []
    processes: list[subprocess.Popen[bytes]] = []
    try:
        first, process = start(store, root)
        processes.append(process)
        second, process = start(store, root)
        processes.append(process)
        for work in ("decide", "decide+claim+finish"):
            results.append(in_process(f"{work}: library, in-process, 1 thread", store, work,
                                      duration))
            results.append(drive(f"{work}: 1 instance, 1 client", [first], work, 1,
                                 duration))
            results.append(drive(f"{work}: 1 instance, {concurrency} clients", [first], work,
                                 concurrency, duration))
            results.append(drive(f"{work}: 2 instances, {concurrency} clients",
                                 [first, second], work, concurrency, duration))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
        import psycopg

        with psycopg.connect(options.store.split("?")[0], autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(f"callgate serve over PostgreSQL, {duration:g}s per row, loopback HTTP, bearer "
          f"tokens (HS256); {os.cpu_count()} CPUs shared by client and servers")
    for result in results:
        print(result.row())
    for work, index in (("decide", 0), ("decide+claim+finish", 4)):
        library, served = results[index], results[index + 1]
        calls = 1 if work == "decide" else 3
        overhead = (served.p50 - library.p50) * 1000
        print(f"overhead of the service, {work}: {overhead:.2f} ms per operation at p50, "
              f"{overhead / calls:.2f} ms per HTTP request")


if __name__ == "__main__":
    main()
