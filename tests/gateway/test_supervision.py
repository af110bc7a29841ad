"""The gateway keeps its upstream running, and bounds what it reads from it (issue #37,
items 6 and 4): the real ``callgate gateway`` process, the real upstream process
(``notes_upstream.py``) behind it, the real MCP SDK client in front.

- Killed with SIGKILL, the upstream is started again after a short backoff; calls in
  between answer ``transient`` (nothing was sent), later calls succeed.
- An upstream that keeps stopping makes the gateway exit with code 3, so that its client
  starts it afresh (before: every later call answered ``retry``, forever).
- A 40 MB answer is refused unread with its own error, promptly, without spending the run's
  failure budget; the next call works (before: the session was unusable for ~15 s).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from .conftest import (
    ACTOR_FILE,
    CONFIG,
    GATEWAY,
    PYTHON,
    REPO,
    UPSTREAM,
    Keys,
    Upstream,
    free_port,
    meta_of,
    start_http_gateway,
    stop,
    text_of,
    unique,
    upstream_command,
    wait_for_port,
    write_auth,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

REPORT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: getReport
  version: "1.0.0"
  owner: notes@example.com
  description: Read the notes report.
spec:
  effect: read
  timeout: 20s
  arguments: {type: object, properties: {}}
  examples: [{arguments: {}}]
"""


def documents(tmp: Path) -> list[str]:
    """The gateway tests' documents, and a contract for the upstream's ``getReport``."""
    root = tmp / "documents"
    shutil.copytree(CONFIG / "contracts", root / "contracts")
    shutil.copytree(CONFIG / "policies", root / "policies")
    (root / "contracts" / "getReport.yaml").write_text(REPORT)
    access = root / "policies" / "access.yaml"
    access.write_text(access.read_text().replace(
        "tools: [sendMessage]", "tools: [sendMessage, getReport]"))
    return [str(root / "contracts"), str(root / "policies")]


@asynccontextmanager
async def gateway(tmp: Path, *options: str) -> AsyncIterator[tuple[ClientSession, Upstream]]:
    state = tmp / "state"
    parameters = StdioServerParameters(command=GATEWAY[0], args=[
        *GATEWAY[1:], "--upstream-command", upstream_command(state),
        "--store", f"sqlite:///{tmp / 'gateway.sqlite3'}", "--actor", str(ACTOR_FILE),
        *options, *documents(tmp)], cwd=str(REPO))
    with (tmp / "gateway.log").open("a") as errlog:
        async with stdio_client(parameters, errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session, Upstream(state)


def pid_of(upstream: Upstream) -> int:
    return int((upstream.state / "pid").read_text())


async def create(session: ClientSession, title: str) -> Any:
    return await session.call_tool("createNote", {"notebookId": "NB-1", "title": title},
                                   meta={"callgate/request_id": unique("r")})


async def test_a_killed_upstream_is_started_again(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--upstream-restart-backoff", "0.1") as (session, upstream):
        before = unique("before")
        assert not (await create(session, before)).is_error
        first = pid_of(upstream)
        os.kill(first, signal.SIGKILL)
        answered: list[str] = []
        with anyio.fail_after(60):
            while True:  # each call a request (and a run) of its own, as a person retrying
                result = await session.call_tool("getNotebook", {"id": "NB-1"},
                                                 meta={"callgate/request_id": unique("r")})
                if not result.is_error:
                    break
                answered.append(meta_of(result)["callgate/error_class"])
                await anyio.sleep(0.2)
        # in between, an honest transient error: nothing was sent, try again
        assert set(answered) <= {"transient"}
        assert pid_of(upstream) != first
        after = unique("after")
        written = await create(session, after)
        assert not written.is_error, text_of(written)
        assert len(upstream.notes(after)) == 1 and len(upstream.notes(before)) == 1
    log = (tmp_path / "gateway.log").read_text()
    assert "starting it again in 0.1s" in log and "is running again (restart 1)" in log


async def test_an_upstream_that_keeps_stopping_makes_the_gateway_exit(tmp_path: Path) -> None:
    keys = Keys(tmp_path)
    state = tmp_path / "state"
    started = start_http_gateway(
        tmp_path, auth=write_auth(tmp_path, "jwks", "jwks.json"),
        store=f"sqlite:///{tmp_path / 'http.sqlite3'}",
        upstream_args=["--upstream-command", upstream_command(state),
                       "--upstream-restarts", "2", "--upstream-restart-backoff", "0.05"])
    assert keys.token({"sub": "U-1"})  # the gateway serves with verified tokens
    try:
        (state / "refuse-start").write_text("")  # every start from now on fails at once
        os.kill(pid_of(Upstream(state)), signal.SIGKILL)
        code = started.process.wait(60)
    finally:
        stop(started.process)
    log = started.log.read_text()
    assert code == 3, log
    assert "the gateway stops so that its client can start it again" in log
    assert "Traceback" not in log


async def test_an_oversized_answer_is_refused_promptly_and_the_next_call_works(
        tmp_path: Path) -> None:
    async with gateway(tmp_path, "--upstream-answer-limit", "1048576") as (session, upstream):
        (upstream.state / "huge").write_text(str(40 * 1024 * 1024))
        run = {"callgate/run_id": f"run-{uuid.uuid4().hex[:8]}"}
        started = time.monotonic()
        oversized = await session.call_tool("getReport", {}, meta=run)
        took = time.monotonic() - started
        assert oversized.is_error
        assert meta_of(oversized)["callgate/error_class"] == "answer_too_large"
        assert "x" * 100 not in text_of(oversized)  # nothing of the answer reaches the model
        # refused as it streamed in, well within the contract's 20 s timeout: not timed out
        assert took < 20
        # more oversized answers than the run's failure budget allows failures
        (upstream.state / "huge").write_text(str(2 * 1024 * 1024))
        for _ in range(6):
            again = await session.call_tool("getReport", {}, meta=run)
            assert meta_of(again)["callgate/error_class"] == "answer_too_large"
        (upstream.state / "huge").unlink()
        after = await session.call_tool("getReport", {}, meta=run)
        assert not after.is_error, text_of(after)
        assert text_of(after) == "x" * 16
        written = await create(session, unique("after-huge"))
        assert not written.is_error


async def test_an_oversized_answer_over_http_is_refused_too(tmp_path: Path) -> None:
    state = tmp_path / "state"
    port = free_port()
    log = tmp_path / "upstream.log"
    with log.open("wb") as out:
        server = subprocess.Popen([PYTHON, str(UPSTREAM), "--state", str(state), "--http",
                                   str(port)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, server, log)
        parameters = StdioServerParameters(command=GATEWAY[0], args=[
            *GATEWAY[1:], "--upstream-url", f"http://127.0.0.1:{port}/mcp",
            "--upstream-answer-limit", "1048576",
            "--store", f"sqlite:///{tmp_path / 'gateway.sqlite3'}",
            "--actor", str(ACTOR_FILE), *documents(tmp_path)], cwd=str(REPO))
        with (tmp_path / "gateway.log").open("a") as errlog:
            async with stdio_client(parameters, errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    (state / "huge").write_text(str(4 * 1024 * 1024))
                    oversized = await session.call_tool("getReport", {})
                    assert meta_of(oversized)["callgate/error_class"] == "answer_too_large"
                    assert "x" * 100 not in text_of(oversized)
                    (state / "huge").unlink()
                    after = await session.call_tool("getReport", {})
                    assert not after.is_error and text_of(after) == "x" * 16
    finally:
        stop(server)
    # the connection was sound: only that answer was dropped, nothing was restarted
    assert "stopped" not in (tmp_path / "gateway.log").read_text()


def test_the_answer_limit_is_checked_by_the_command() -> None:
    done = subprocess.run([*GATEWAY, "--upstream-command", "true", "--upstream-answer-limit",
                           "10"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2
    assert "--upstream-answer-limit" in done.stderr
