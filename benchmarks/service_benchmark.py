"""The decision service under load, next to the same work done in-process and next to a
floor app.

The floor (``floor_app``) is a one-route Starlette app on uvicorn (h11, the HTTP protocol
`callgate serve` runs) that parses the same body and returns the same bytes: what any
Python JSON service on this stack costs. ``POST /v1/decide`` is compared with it two ways,
side by side in one run:

- instructions per request (``decide_instructions``): each server under callgrind, counted
  in two windows of sequential requests that must agree (``callgrind_counting.count_served``);
- p50/p99 latency at 8 connections (``decide_latency``): wall time, the two servers driven
  in turns by 8 client threads, each with its own kept-alive connection, over raw sockets
  (the client's own cost kept small and the same for both).

Then it starts `callgate serve` (one instance, then two sharing one PostgreSQL store) and
drives its API from this process over loopback with bounded concurrency for a fixed duration:

- decide:               POST /v1/decide
- decide+claim+finish:  POST /v1/decide, /v1/claim, /v1/finish (one write, exactly once)

and the same two workloads through the library (``pipeline.hosted.HostedWrites``) on the
same store, one thread. Prints operations/s and p50/p99 latency per workload, and the
overhead per request (service p50 minus library p50 at concurrency 1).

    python benchmarks/service_benchmark.py --quick
    python benchmarks/service_benchmark.py --duration 10 --concurrency 8
    python benchmarks/service_benchmark.py --floor-only [--quick]   # the floor rows only

The floor rows use an SQLite store (a decision writes nothing) and valgrind when present;
the rest needs a PostgreSQL server (CALLGATE_TEST_POSTGRES_URL or --store); each run uses
a schema of its own and drops it. Wall time on a shared machine is noisy:
compare the rows of one run, not runs on different days.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from callgrind_counting import count_served, mark_on_signal, valgrind_missing  # noqa: E402

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

    @property
    def p99(self) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


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


# -- next to the floor: POST /v1/decide against a one-route app ------------------------------

DECIDE_PATH = "/v1/decide"


def decide_body(request_id: str) -> bytes:
    return json.dumps({"model_output": call(10.0), "actor": ACTOR, "session": SESSION,
                       "request_id": request_id}).encode()


def bearer() -> str:
    return jwt.encode({"sub": "bench", "tenant": "acme", "exp": int(time.time()) + 3600},
                      SECRET, algorithm="HS256")


class Connection:
    """One kept-alive HTTP/1.1 connection, written and read by hand: a client whose own
    cost is small next to the servers' and the same for each."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.socket = socket.create_connection(("127.0.0.1", port))
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\n"
                f"authorization: Bearer {self.token}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n")
        self.socket.sendall(head.encode() + body)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._received()
        header, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = header.split(b"\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in lines[1:]
                      if line.lower().startswith(b"content-length:"))
        while len(self.buffer) < length:
            self.buffer += self._received()
        answer, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), answer

    def _received(self) -> bytes:
        chunk = self.socket.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def close(self) -> None:
        self.socket.close()


def floor_app(answer: bytes) -> Any:
    """The floor: one Starlette route that parses the body and answers ``answer``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def decide(request: Request) -> Response:
        json.loads(await request.body())
        return Response(answer, media_type="application/json")

    return Starlette(routes=[Route(DECIDE_PATH, decide, methods=["POST"])])


def serve_counted(server: str, port: int, root: Path) -> None:
    """In the process to be counted (``--serve``): the floor app, or `callgate serve` as
    its command line starts it, each marking on ``MARK_SIGNAL``."""
    mark_on_signal()
    if server == "floor":
        import uvicorn

        uvicorn.run(floor_app((root / "answer.json").read_bytes()), host="127.0.0.1",
                    port=port, log_level="warning", http="h11")
        return
    from callgate_rules.cli import main as callgate

    sys.argv = ["callgate", *serve_arguments(port, f"sqlite:///{root / 'receipts.db'}", root)]
    callgate()


def serve_arguments(port: int, store: str, root: Path) -> list[str]:
    return ["serve", str(REPO / "contracts"), str(REPO / "policies"), "--http",
            f"127.0.0.1:{port}", "--store", store, "--auth", str(root / "auth.yaml"),
            "--world", str(REPO / "examples" / "world.yaml"), "--log-level", "warning"]


@dataclass
class Servers:
    """`callgate serve` and the floor app, on ports of their own, in ``root``."""

    root: Path
    ports: dict[str, int]

    @classmethod
    def prepared(cls, root: Path) -> Servers:
        (root / "auth.yaml").write_text("secret_env: CALLGATE_BENCH_SECRET\nclaims:\n"
                                        "  actor: {tenant: tenant}\n")
        return cls(root, {"callgate": free_port(), "floor": free_port()})

    def command(self, server: str) -> list[str]:
        return [sys.executable, __file__, "--serve", server, str(self.ports[server]),
                str(self.root)]

    def requests(self, server: str) -> Callable[[int], None]:
        """``n`` sequential requests on a new connection (also for 0: the empty window)."""
        numbers = iter(range(10**9))
        token = bearer()

        def run(count: int) -> None:
            connection = Connection(self.ports[server], token)
            for _ in range(count):
                status, _ = connection.post(DECIDE_PATH, decide_body(f"c{next(numbers)}"))
                assert status == 200
            connection.close()

        return run


SERVERS = ("callgate", "floor")
ENVIRONMENT = {"CALLGATE_BENCH_SECRET": SECRET, "CALLGATE_SECRET": SECRET}


def decide_instructions(requests: int = 300, warm_up: int = 200) -> dict[str, float]:
    """Instructions per ``POST /v1/decide`` of `callgate serve` and of the floor app, each
    counted by callgrind in its own process (the floor started once callgate answers, so
    it can answer callgate's bytes)."""
    counts: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="callgate-service-") as directory:
        servers = Servers.prepared(Path(directory))
        for server in SERVERS:
            ready = functools.partial(servers_ready, servers, server)
            counts.update(count_served(
                {server: servers.command(server)}, ready, servers.requests(server), requests,
                warm_up=warm_up,
                what=f"POST {DECIDE_PATH} on {server}",
                env={**os.environ, **ENVIRONMENT}, cwd=REPO))
    return counts


def servers_ready(servers: Servers, server: str, seconds: float = 900) -> None:
    """``server`` answers (the floor needs callgate's answer, written by its readiness)."""
    if server == "floor" and not (servers.root / "answer.json").exists():
        raise SystemExit("count callgate first: the floor answers its bytes")
    deadline = time.monotonic() + seconds  # under callgrind, start-up takes a minute or more
    while True:
        try:
            connection = Connection(servers.ports[server], bearer())
            break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{server} did not answer within {seconds:g}s") from None
            time.sleep(0.2)
    status, answer = connection.post(DECIDE_PATH, decide_body("ready"))
    connection.close()
    assert status == 200, answer
    if server == "callgate":
        assert json.loads(answer)["route"] == "execute", answer
        (servers.root / "answer.json").write_bytes(answer)


def decide_latency(seconds: float = 4.0, rounds: int = 2,
                   concurrency: int = 8) -> dict[str, Result]:
    """Latency of ``POST /v1/decide`` at ``concurrency`` connections, `callgate serve`
    and the floor app driven in turns (``rounds`` of ``seconds`` each), wall time."""
    latencies: dict[str, list[float]] = {server: [] for server in SERVERS}
    elapsed = dict.fromkeys(SERVERS, 0.0)
    with tempfile.TemporaryDirectory(prefix="callgate-service-") as directory:
        servers = Servers.prepared(Path(directory))
        processes = []
        try:
            for server in SERVERS:
                processes.append(subprocess.Popen(
                    servers.command(server), cwd=REPO, env={**os.environ, **ENVIRONMENT},
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                servers_ready(servers, server)
            for server in SERVERS:  # warm-up
                servers.requests(server)(200)
            for _ in range(rounds):
                for server in SERVERS:
                    took, began = concurrently(servers, server, concurrency, seconds)
                    latencies[server] += took
                    elapsed[server] += began
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=30)
    return {server: Result(f"POST {DECIDE_PATH}: {server}, {concurrency} connections",
                           len(latencies[server]), elapsed[server], latencies[server])
            for server in SERVERS}


def concurrently(servers: Servers, server: str, concurrency: int,
                 seconds: float) -> tuple[list[float], float]:
    """Latencies of ``concurrency`` connections sending one request after another."""
    latencies: list[float] = []
    lock = threading.Lock()
    token = bearer()
    stop = time.monotonic() + seconds

    def client(index: int) -> None:
        mine, connection, number = [], Connection(servers.ports[server], token), 0
        while time.monotonic() < stop:
            number += 1
            body = decide_body(f"l{index}-{number}-{uuid.uuid4().hex[:8]}")
            started = time.perf_counter()
            status, _ = connection.post(DECIDE_PATH, body)
            mine.append(time.perf_counter() - started)
            assert status == 200
        connection.close()
        with lock:
            latencies.extend(mine)

    return latencies, in_threads(client, concurrency)


def in_threads(client: Callable[[int], None], concurrency: int) -> float:
    """Seconds ``client(0)`` … ``client(concurrency - 1)`` took, each in a thread of its
    own, all started together."""
    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic() - began


def floor_rows(quick: bool) -> list[str]:
    """The floor rows, printed: instructions (when valgrind is present) and latency."""
    lines = []
    missing = valgrind_missing()
    if missing:
        lines.append(f"instructions: not counted, {missing}")
    else:
        counts = decide_instructions(*((60, 60) if quick else (300, 200)))
        lines.append(f"instructions per POST {DECIDE_PATH}: callgate {counts['callgate']:,.0f}"
                     f", floor {counts['floor']:,.0f}, "
                     f"{counts['callgate'] / counts['floor']:.2f}x (target <= 1.5x)")
    timed = decide_latency(*((2.0, 1) if quick else (4.0, 2)))
    for result in timed.values():
        lines.append(result.row())
    ratio = timed["callgate"].p99 / timed["floor"].p99
    lines.append(f"p99 at 8 connections: {ratio:.2f}x the floor's (target <= 3x)")
    return lines


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

    took = in_threads(client, concurrency)
    return Result(label, len(latencies), took, latencies)


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
    parser.add_argument("--floor-only", action="store_true",
                        help="only POST /v1/decide against the floor app (no PostgreSQL)")
    parser.add_argument("--serve", nargs=3, metavar=("SERVER", "PORT", "ROOT"),
                        help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve_counted(options.serve[0], int(options.serve[1]), Path(options.serve[2]))
        return
    print("POST /v1/decide on callgate serve (SQLite, bearer tokens) next to the floor app")
    for line in floor_rows(options.quick):
        print(line)
    if options.floor_only:
        return
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
