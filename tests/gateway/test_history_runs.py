"""Two gateway instances on one shared store see one run's ``history`` when the client
names the run (``_meta["callgate/run_id"]``, or the ``Callgate-Run-Id`` header over HTTP).

The real ``callgate gateway`` twice over streamable HTTP, in front of one notes upstream
(HTTP), on one SQLite file — and on PostgreSQL when ``CALLGATE_TEST_POSTGRES_URL`` is set —
with real ``mcp`` client sessions. ``history_config``'s ``createNote`` allows two notes a
run, counted over ``history``.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .conftest import (
    CLAIMS,
    GATEWAY,
    HERE,
    PYTHON,
    REPO,
    UPSTREAM,
    HttpGateway,
    Keys,
    Upstream,
    free_port,
    meta_of,
    stop,
    text_of,
    unique,
    wait_for_port,
    write_auth,
)

DOCUMENTS = [str(HERE / "history_config" / "contracts"),
             str(HERE / "history_config" / "policies")]
POSTGRES_URL = os.environ.get("CALLGATE_TEST_POSTGRES_URL")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.sqlite3'}"
        return
    if not POSTGRES_URL:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set")
    import psycopg

    schema = f"callgate_gwruns_{uuid.uuid4().hex[:10]}"
    yield f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={schema}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def start_gateway(tmp: Path, auth: Path, store: str, upstream_url: str) -> HttpGateway:
    port = free_port()
    log = tmp / f"gateway-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*GATEWAY, "--upstream-url", upstream_url, "--http", f"127.0.0.1:{port}",
             "--auth", str(auth), "--store", store, *DOCUMENTS],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    wait_for_port(port, process, log)
    return HttpGateway(f"http://127.0.0.1:{port}/mcp", process, log)


@pytest.fixture
def two_gateways(tmp_path: Path, keys: Keys,
                 store: str) -> Iterator[tuple[list[HttpGateway], Upstream]]:
    state = tmp_path / "notes-state"
    port = free_port()
    log = tmp_path / "upstream.log"
    with log.open("wb") as out:
        upstream = subprocess.Popen([PYTHON, str(UPSTREAM), "--state", str(state), "--http",
                                     str(port)], stdout=out, stderr=subprocess.STDOUT)
    wait_for_port(port, upstream, log)
    auth = write_auth(tmp_path, "jwks", str(keys.directory / "jwks.json"))
    # the first creates the schema before the second opens it
    gateways = [start_gateway(tmp_path, auth, store, f"http://127.0.0.1:{port}/mcp")]
    gateways.append(start_gateway(tmp_path, auth, store, f"http://127.0.0.1:{port}/mcp"))
    yield gateways, Upstream(state)
    for gateway in gateways:
        stop(gateway.process)
    stop(upstream)


@asynccontextmanager
async def session(gateway: HttpGateway, token: str,
                  run_header: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    if run_header is not None:
        headers["Callgate-Run-Id"] = run_header
    async with create_mcp_http_client(headers=headers) as client:
        async with streamable_http_client(gateway.url, http_client=client) as (read, write):
            async with ClientSession(read, write) as opened:
                await opened.initialize()
                yield opened


async def note(opened: ClientSession, title: str, run: str | None = None) -> Any:
    meta = {"callgate/request_id": unique("r")}
    if run is not None:
        meta["callgate/run_id"] = run
    return await opened.call_tool("createNote", {"notebookId": "NB-1", "title": title},
                                  meta=meta)


@pytest.mark.anyio
async def test_two_instances_told_the_same_run_count_the_same_notes(
        two_gateways: tuple[list[HttpGateway], Upstream], keys: Keys) -> None:
    (first, second), upstream = two_gateways
    run, title = unique("run"), unique("note")
    token = keys.token(CLAIMS)
    with anyio.fail_after(120):
        async with session(first, token) as on_first, session(second, token) as on_second:
            one = await note(on_first, title, run)
            two = await note(on_second, title, run)
            three = await note(on_first, title, run)
            four = await note(on_second, title, run)
            # a run of another name has a history of its own, on either instance
            other = await note(on_second, title, unique("run"))
    routes = [meta_of(result)["callgate/route"] for result in (one, two, three, four, other)]
    assert routes == ["return_result", "return_result", "refuse", "refuse", "return_result"]
    assert "already created two notes" in text_of(three)
    assert len(upstream.notes(title)) == 3


@pytest.mark.anyio
async def test_the_header_names_the_run_and_a_caller_has_runs_of_its_own(
        two_gateways: tuple[list[HttpGateway], Upstream], keys: Keys) -> None:
    (first, second), upstream = two_gateways
    run, title = unique("run"), unique("note")
    writer, colleague = keys.token(CLAIMS), keys.token({**CLAIMS, "sub": "U-2"})
    with anyio.fail_after(120):
        async with session(first, writer, run) as on_first, \
                session(second, writer, run) as on_second:
            routes = [meta_of(await note(s, title))["callgate/route"]
                      for s in (on_first, on_second, on_first)]
            # another caller naming the same run never reads or adds to the writer's
            async with session(second, colleague, run) as theirs:
                theirs_first = await note(theirs, title)
            # a name that is not one is refused before anything runs
            bad = await note(on_first, title, "x" * 201)
    assert routes == ["return_result", "return_result", "refuse"]
    assert meta_of(theirs_first)["callgate/route"] == "return_result"
    assert bad.is_error and "callgate/run_id" in text_of(bad)
    assert len(upstream.notes(title)) == 3


@pytest.mark.anyio
async def test_an_intent_sent_in_meta_bounds_the_run_on_every_instance(
        two_gateways: tuple[list[HttpGateway], Upstream], keys: Keys) -> None:
    (first, second), upstream = two_gateways
    run, title, injected = unique("run"), unique("note"), unique("injected")
    intent = {"request": f"add a note titled {title}",
              "tools": {"createNote": {"arguments": {"title": {"equals": title}}}}}
    token = keys.token(CLAIMS)

    async def call(opened: ClientSession, named: str, **more: Any) -> Any:
        meta = {"callgate/request_id": unique("r"), "callgate/run_id": run, **more}
        return await opened.call_tool("createNote", {"notebookId": "NB-1", "title": named},
                                      meta=meta)

    with anyio.fail_after(120):
        async with session(first, token) as on_first, session(second, token) as on_second:
            within = await call(on_first, title, **{"callgate/intent": intent})
            outside = await call(on_second, injected)  # the other instance reads it
            again = await call(on_second, title, **{"callgate/intent": intent})
            widened = await call(on_first, title, **{"callgate/intent": {
                "tools": {"createNote": {}}}})
            unnamed = await on_first.call_tool(
                "createNote", {"notebookId": "NB-1", "title": title},
                meta={"callgate/intent": intent})
    assert meta_of(within)["callgate/route"] == "return_result"
    assert meta_of(outside)["callgate/route"] == "await_confirmation"
    assert meta_of(again)["callgate/route"] == "return_result"  # sent again: nothing changes
    assert widened.is_error and "can only be narrowed" in text_of(widened)
    assert unnamed.is_error and "callgate/run_id" in text_of(unnamed)
    assert upstream.notes(injected) == []
    assert len(upstream.notes(title)) == 2
