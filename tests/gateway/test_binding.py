"""The gateway's executors keep the deadline themselves, so the gate calls them without a
thread of their own (``keeps_deadline``): the upstream call gives up at the contract's
timeout on the session's loop, and a grace after it when that loop itself is stalled.

The real upstream MCP server over stdio, its session on an event loop in a thread of its
own, as ``callgate gateway`` runs it; the executors called from this thread, as the gate
calls them.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from callgate_rules import DeadlineKeeping, OutcomeTimeout, load
from callgate_rules.gateway import upstream as upstream_module
from callgate_rules.gateway.binding import bind
from callgate_rules.gateway.upstream import Upstream, UpstreamSpec, connect
from callgate_rules.pipeline.execute import ExecutionRequest

from .conftest import DOCUMENTS, upstream_command


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    connected: queue.Queue[Upstream | BaseException] = queue.Queue()
    stop = threading.Event()

    async def serve() -> None:
        try:
            async with connect(UpstreamSpec(command=upstream_command(tmp_path))) as session:
                connected.put(session)
                while not stop.is_set():
                    await asyncio.sleep(0.01)
        except BaseException as error:  # noqa: BLE001 - reported to the test below
            connected.put(error)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name="upstream-loop")
    thread.start()
    try:
        ready = connected.get(timeout=60)
        if isinstance(ready, BaseException):
            raise ready
        yield ready
    finally:
        stop.set()
        thread.join(30)


def request(tool: str, title: str, seconds: float) -> ExecutionRequest:
    return ExecutionRequest(tool, {"notebookId": "NB-1", "title": title}, f"op-{title}",
                            datetime.now(UTC) + timedelta(seconds=seconds), {"id": "U-1"})


def test_the_gateways_executors_keep_the_deadline_and_answer_in_the_callers_thread(
        upstream: Upstream, tmp_path: Path) -> None:
    executors = bind(load(DOCUMENTS), upstream).executors
    assert executors and all(isinstance(executor, DeadlineKeeping)
                             for executor in executors.values())
    answer = executors["createNote"](request("createNote", "kept in time", 5.0))
    assert answer["structuredContent"]["title"] == "kept in time"
    assert "kept in time" in (tmp_path / "calls.jsonl").read_text()  # where calls are kept


def test_a_stalled_loop_still_lets_the_call_go_a_grace_after_its_deadline(
        upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no thread of its own to stop waiting for it, the executor's own wait is what
    bounds ``handle``: the loop cannot even start the call, and it gives up anyway, and
    the call it gave up is never sent once the loop is free again."""
    monkeypatch.setattr(upstream_module, "_LOOP_GRACE_SECONDS", 0.2)
    executor = bind(load(DOCUMENTS), upstream).executors["createNote"]
    stalled = threading.Event()
    upstream.loop.call_soon_threadsafe(lambda: (stalled.set(), time.sleep(1.0)))
    assert stalled.wait(10)
    started = time.monotonic()
    with pytest.raises(OutcomeTimeout, match="no answer from the upstream within"):
        executor(request("createNote", "stalled", 0.1))
    assert time.monotonic() - started < 0.9  # the 0.1 s deadline and the 0.2 s grace
    asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), upstream.loop).result(10)
    calls = (tmp_path / "calls.jsonl").read_text() if (tmp_path / "calls.jsonl").exists() \
        else ""
    assert "stalled" not in calls
