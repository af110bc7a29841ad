"""What the MCP gateway adds: calls per second and p50/p99 latency of one client calling
through ``callgate gateway`` against the same client calling the upstream directly.

    python benchmarks/gateway_benchmark.py [--seconds 4] [--quick]

Everything runs on loopback: the upstream is the tests' notes service
(``tests/gateway/notes_upstream.py``), started once per measurement with a fresh state.
Over stdio the client launches the gateway, which launches the upstream; over HTTP the
upstream serves streamable HTTP, and the gateway serves it (bearer tokens, HS256) in front
of it. Two calls are timed, one after another from one client session:

- a read (``findNote``, a contract without look-ups): the gate's steps and one upstream
  call (each call its own request ID: one user request, one run and its budgets);
- a write (``createNote``, idempotency ``key``, a fresh request ID each time): the steps,
  the receipt's claim and finish in a SQLite store, and one upstream call.

Each cell warms up, then calls for ``--seconds`` (at most ``--max-calls``) and prints
calls/s, p50 and p99, and the gateway's added p50/p99 (through minus direct). Bounded in
time: every cell stops by itself; every process it started is stopped at the end.

Where valgrind is present (``--instructions``, or ``--instructions-only``), it also counts
the instructions of one read call over HTTP in each of the two processes, side by side:
the gateway's (its gate, its receipts, the official SDK's server in front and client
behind) against the upstream's own work for the same call (``call_instructions``:
``callgrind_counting.count_served``, two windows of calls that must agree). Information:
most of the gateway's share is the SDK's second hop, not the gate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import runpy
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from callgrind_counting import count_served, mark_on_signal, valgrind_missing  # noqa: E402

UPSTREAM = REPO / "tests" / "gateway" / "notes_upstream.py"
PYTHON = sys.executable
SECRET = "benchmark-secret-" + "x" * 32
ACTOR = {"sub": "U-1", "tenant": "acme"}

CONTRACTS = {
    "findNote.yaml": """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: findNote, version: "1", owner: bench@example.com, description: Find a note.}
spec:
  effect: read
  arguments:
    type: object
    required: [operation_id]
    properties: {operation_id: {type: string, maxLength: 100}}
  examples: [{arguments: {operation_id: op_1}}]
""",
    "createNote.yaml": """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: createNote, version: "1", owner: bench@example.com, description: A note.}
spec:
  effect: write
  idempotency: key
  timeout: 5s
  arguments:
    type: object
    required: [notebookId, title]
    properties:
      notebookId: {type: string, pattern: "^NB-[0-9]+$"}
      title: {type: string, maxLength: 200}
  reconcile: {tool: findNote}
  examples: [{arguments: {notebookId: NB-1, title: Groceries}}]
""",
    "access.yaml": """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: bench-access, version: "1", owner: bench@example.com, description: Acme.}
spec:
  actor: {type: object, required: [id, tenant], properties: {id: {type: string},
          tenant: {type: string}}}
  rules:
    - {name: acme, effect: allow, tools: [findNote, createNote], when: actor.tenant == "acme"}
""",
}


@dataclass
class Cell:
    transport: str
    call: str
    path: str  # "direct" or "gateway"
    latencies: list[float]
    elapsed: float

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    def percentile(self, share: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"a benchmark process exited with {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listened on port {port} within {seconds}s")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def background(arguments: list[str], log: Path,
               env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(arguments, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                env={**os.environ, **(env or {})})


@dataclass
class Bench:
    root: Path
    seconds: float
    max_calls: int

    def fresh(self, name: str) -> Path:
        directory = self.root / f"{name}-{uuid.uuid4().hex[:6]}"
        directory.mkdir()
        return directory

    def gateway_arguments(self, work: Path) -> list[str]:
        return [PYTHON, "-m", "callgate_rules.cli", "gateway", "--store",
                f"sqlite:///{work / 'receipts.sqlite3'}", str(self.root / "documents")]

    @asynccontextmanager
    async def stdio(self, through_gateway: bool) -> AsyncIterator[ClientSession]:
        work = self.fresh("stdio")
        upstream = f"{PYTHON} {UPSTREAM} --state {work / 'state'}"
        if through_gateway:
            words = [*self.gateway_arguments(work), "--upstream-command", upstream,
                     "--actor", str(self.root / "actor.yaml")]
        else:
            words = upstream.split()
        parameters = StdioServerParameters(command=words[0], args=words[1:], cwd=str(REPO))
        with (work / "stderr.log").open("a") as errlog:
            async with stdio_client(parameters, errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    yield session

    @asynccontextmanager
    async def http(self, through_gateway: bool) -> AsyncIterator[ClientSession]:
        work = self.fresh("http")
        port = free_port()
        processes = [background([PYTHON, str(UPSTREAM), "--state", str(work / "state"),
                                 "--http", str(port)], work / "upstream.log")]
        url, headers = f"http://127.0.0.1:{port}/mcp", None
        try:
            wait_for_port(port, processes[0])
            if through_gateway:
                front = free_port()
                processes.append(background(
                    [*self.gateway_arguments(work), "--upstream-url", url, "--http",
                     f"127.0.0.1:{front}", "--auth", str(self.root / "auth.yaml")],
                    work / "gateway.log", env={"CALLGATE_BENCH_SECRET": SECRET}))
                wait_for_port(front, processes[1])
                token = jwt.encode({**ACTOR, "exp": int(time.time()) + 3600}, SECRET,
                                   algorithm="HS256")
                url, headers = f"http://127.0.0.1:{front}/mcp", {
                    "Authorization": f"Bearer {token}"}
            async with create_mcp_http_client(headers=headers) as client:
                async with streamable_http_client(url, http_client=client) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        yield session
        finally:
            for process in reversed(processes):
                stop(process)

    async def measure(self, call: Callable[[int], Awaitable[Any]]) -> tuple[list[float], float]:
        for index in range(20):  # warm-up
            await call(-1 - index)
        latencies: list[float] = []
        started = time.perf_counter()
        deadline = started + self.seconds
        while time.perf_counter() < deadline and len(latencies) < self.max_calls:
            before = time.perf_counter()
            await call(len(latencies))
            latencies.append(time.perf_counter() - before)
        return latencies, time.perf_counter() - started


def calls(session: ClientSession, kind: str) -> Callable[[int], Awaitable[Any]]:
    run = uuid.uuid4().hex[:6]

    async def read(index: int) -> Any:
        result = await session.call_tool("findNote", {"operation_id": f"op_{index}"},
                                         meta={"callgate/request_id": f"read-{run}-{index}"})
        assert not result.is_error, result

    async def write(index: int) -> Any:
        result = await session.call_tool(
            "createNote", {"notebookId": "NB-1", "title": f"bench {run} {index}"},
            meta={"callgate/request_id": f"bench-{run}-{index}"})
        assert not result.is_error, result

    return read if kind == "read" else write


async def run_cells(bench: Bench) -> list[Cell]:
    cells = []
    for transport in ("stdio", "http"):
        for path in ("direct", "gateway"):
            connect = bench.stdio if transport == "stdio" else bench.http
            async with connect(path == "gateway") as session:
                for kind in ("read", "write"):
                    latencies, elapsed = await bench.measure(calls(session, kind))
                    cells.append(Cell(transport, kind, path, latencies, elapsed))
                    print(f"  measured {transport} {kind} {path}: {len(latencies)} calls",
                          file=sys.stderr, flush=True)
    return cells


def report(cells: list[Cell]) -> None:
    print(f"{'transport':<9} {'call':<5} {'path':<8} {'calls/s':>8} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'added p50':>10} {'added p99':>10}")
    direct = {(c.transport, c.call): c for c in cells if c.path == "direct"}
    for cell in cells:
        added = ""
        if cell.path == "gateway":
            base = direct[(cell.transport, cell.call)]
            added = (f"{cell.percentile(0.5) - base.percentile(0.5):>10.2f} "
                     f"{cell.percentile(0.99) - base.percentile(0.99):>10.2f}")
        print(f"{cell.transport:<9} {cell.call:<5} {cell.path:<8} {cell.rate:>8.0f} "
              f"{cell.percentile(0.5):>8.2f} {cell.percentile(0.99):>8.2f} {added}")
    means = [statistics.mean(c.latencies) * 1000 for c in cells if c.latencies]
    print(f"({len(cells)} cells, mean of means {statistics.mean(means):.2f} ms)")


def prepare(root: Path) -> None:
    documents = root / "documents"
    documents.mkdir()
    for name, text in CONTRACTS.items():
        (documents / name).write_text(text)
    (root / "actor.yaml").write_text("id: U-1\ntenant: acme\n")
    (root / "auth.yaml").write_text(
        "secret_env: CALLGATE_BENCH_SECRET\nclaims:\n  actor: {id: sub, tenant: tenant}\n")


# -- instructions of one call, in the gateway and in the upstream ---------------------------


def call_instructions(calls: int = 100, warm_up: int = 60,
                      kind: str = "read") -> dict[str, float]:
    """Instructions per tool call (``kind``: "read" or "write") over streamable HTTP, of
    the gateway process and of the upstream process, each counted by callgrind; the
    client (this process) opens a session for each window (the empty one too, so that
    opening it is taken off). The read by default: the notes upstream reads every note
    it holds on each write (to find an earlier one under the operation ID), so a write
    costs it more with every window and two windows never agree."""
    with tempfile.TemporaryDirectory(prefix="callgate-gateway-count-") as directory:
        root = Path(directory)
        prepare(root)
        ports = {"upstream": free_port(), "gateway": free_port()}

        def command(role: str) -> list[str]:
            return [PYTHON, __file__, "--counted", role, str(ports["upstream"]),
                    str(ports["gateway"]), str(root)]

        def ready() -> None:
            for port in ports.values():
                wait_for_address(port, 900)  # under callgrind, start-up takes minutes

        def drive(count: int) -> None:
            asyncio.run(session_calls(ports["gateway"], count, kind))

        # the gateway first: stopped first, it never sees its upstream go away
        return count_served({"gateway": command("gateway"), "upstream": command("upstream")},
                            ready, drive, calls, warm_up=warm_up,
                            what=f"one {kind} call through the gateway",
                            env={**os.environ, "CALLGATE_BENCH_SECRET": SECRET}, cwd=REPO)


def wait_for_address(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"nothing listened on port {port} within {seconds:g}s")


async def session_calls(port: int, count: int, kind: str) -> None:
    """One client session to the gateway at ``port``, making ``count`` calls."""
    token = jwt.encode({**ACTOR, "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as client:
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                          http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                call = calls(session, kind)
                for index in range(count):
                    await call(index)


def serve_counted(role: str, upstream_port: int, gateway_port: int, root: Path) -> None:
    """In a process to be counted (``--counted``): the upstream, or the gateway in front
    of it as `callgate gateway` starts it, each marking on ``MARK_SIGNAL`` after a full
    collection (the SDK's objects make the heap's collections fall in one window of 100
    calls and not the other)."""
    mark_on_signal(collected=True)
    if role == "upstream":
        sys.argv = [str(UPSTREAM), "--state", str(root / "state"), "--http",
                    str(upstream_port)]
        runpy.run_path(str(UPSTREAM), run_name="__main__")
        return
    wait_for_address(upstream_port, 900)
    quiet_upstream()
    from callgate_rules.cli import main as callgate

    sys.argv = ["callgate", "gateway", "--store", f"sqlite:///{root / 'receipts.sqlite3'}",
                str(root / "documents"), "--upstream-url",
                f"http://127.0.0.1:{upstream_port}/mcp", "--http",
                f"127.0.0.1:{gateway_port}", "--auth", str(root / "auth.yaml")]
    callgate()


def quiet_upstream() -> None:
    """No idle pings of the upstream (one every ``health_interval``, 2 s) in the counted
    gateway: they cost by the second, not by the call, and under callgrind a window of
    calls lasts minutes, so they would be counted as the calls' (and differ by window)."""
    from callgate_rules.gateway import upstream

    checked = upstream.UpstreamLimits.__post_init__

    def pings_rarely(limits: upstream.UpstreamLimits) -> None:
        object.__setattr__(limits, "health_interval", 3600.0)
        checked(limits)

    upstream.UpstreamLimits.__post_init__ = pings_rarely  # type: ignore[method-assign,assignment]


def instruction_rows(quick: bool) -> list[str]:
    """The instruction rows, printed: one read call, gateway against upstream."""
    missing = valgrind_missing()
    if missing:
        return [f"instructions: not counted, {missing}"]
    counts = call_instructions(*((30, 30) if quick else (100, 60)))
    gateway, upstream = counts["gateway"], counts["upstream"]
    return [f"instructions per read call over HTTP: gateway process {gateway:,.0f}, "
            f"upstream process {upstream:,.0f}, {gateway / upstream:.2f}x (information)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="how long each cell calls (default 4)")
    parser.add_argument("--max-calls", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="one second a cell")
    parser.add_argument("--instructions", action="store_true",
                        help="also count one call's instructions (valgrind)")
    parser.add_argument("--instructions-only", action="store_true",
                        help="only count one call's instructions (valgrind)")
    parser.add_argument("--counted", nargs=4, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.counted:
        role, upstream, gateway, root = options.counted
        serve_counted(role, int(upstream), int(gateway), Path(root))
        return
    if options.instructions or options.instructions_only:
        for line in instruction_rows(options.quick):
            print(line)
        if options.instructions_only:
            return
    with tempfile.TemporaryDirectory(prefix="callgate-gateway-bench-") as directory:
        root = Path(directory)
        prepare(root)
        bench = Bench(root, 1.0 if options.quick else options.seconds, options.max_calls)
        report(asyncio.run(run_cells(bench)))


if __name__ == "__main__":
    main()
