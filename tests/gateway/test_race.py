"""Two gateway instances behind a load balancer share one PostgreSQL store: the same call
sent to both at once is written upstream once."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from .conftest import (
    CLAIMS,
    PYTHON,
    UPSTREAM,
    HttpGateway,
    Keys,
    Upstream,
    free_port,
    http_session,
    meta_of,
    start_http_gateway,
    stop,
    unique,
    wait_for_port,
    write_auth,
)

URL = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
pytestmark = pytest.mark.skipif(
    not URL, reason="CALLGATE_TEST_POSTGRES_URL is not set; the two-instance race needs a "
                    "PostgreSQL server")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def schema() -> Iterator[str]:
    import psycopg

    assert URL is not None
    name = f"callgate_gateway_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def two_gateways(tmp_path: Path, keys: Keys,
                 schema: str) -> Iterator[tuple[list[HttpGateway], Upstream]]:
    state = tmp_path / "shared-state"
    port = free_port()
    log = tmp_path / "upstream.log"
    with log.open("wb") as out:
        upstream = subprocess.Popen([PYTHON, str(UPSTREAM), "--state", str(state), "--http",
                                     str(port)], stdout=out, stderr=subprocess.STDOUT)
    wait_for_port(port, upstream, log)
    assert URL is not None
    store = f"{URL}{'&' if '?' in URL else '?'}schema={schema}"
    auth = write_auth(tmp_path, "jwks", str(keys.directory / "jwks.json"))
    gateways = [start_http_gateway(tmp_path, auth=auth, store=store, upstream_args=[
        "--upstream-url", f"http://127.0.0.1:{port}/mcp"]) for _ in range(2)]
    yield gateways, Upstream(state)
    for gateway in gateways:
        stop(gateway.process)
    stop(upstream)


@pytest.mark.anyio
async def test_two_instances_racing_the_same_call_write_once(
        two_gateways: tuple[list[HttpGateway], Upstream], keys: Keys) -> None:
    gateways, upstream = two_gateways
    upstream.slow_writes(0.5)  # the second claim arrives while the first is in flight
    title, request_id = unique("race"), unique("r")
    results = {}

    async def call(index: int) -> None:
        async with http_session(gateways[index].url, keys.token(CLAIMS)) as session:
            results[index] = await session.call_tool(
                "createNote", {"notebookId": "NB-1", "title": title},
                meta={"callgate/request_id": request_id})

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(call, 0)
            group.start_soon(call, 1)
    assert len(upstream.notes(title)) == 1
    routes = sorted(meta_of(result)["callgate/route"] for result in results.values())
    assert routes == ["return_receipt", "return_result"]
    assert results[0].structured_content == results[1].structured_content
