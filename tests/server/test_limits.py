"""``RequestLimits`` on its own: a request past its time is answered 503 with problem
details while the work goes on, a streamed body past the limit is a 413 (no
content-length to trust), a body that stalls is a 408, a client over its unfinished
requests a 429, a JSON body with a repeated key or a lone surrogate a 400 naming it, and
an answered request passes through untouched. (Against uvicorn: test_boundary.py.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx

from callgate_rules.server.problems import RequestLimits


async def slow_or_echo(scope: Any, receive: Any, send: Any) -> None:
    message = await receive()
    if scope["path"] == "/slow":
        await anyio.sleep(5)
    body = message.get("body", b"")
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps({"got": len(body)}).encode()})


LIMITS = RequestLimits(slow_or_echo, max_body_bytes=1000, timeout=0.3, body_timeout=0.3,
                       per_client=1)


async def call(method: str, path: str, **options: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=LIMITS)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.request(method, path, **options)


def test_past_its_time_a_request_is_a_503() -> None:
    response = asyncio.run(call("GET", "/slow"))
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert "no answer within 0.3s" in response.json()["detail"]


def test_a_streamed_body_past_the_limit_is_a_413() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"x" * 100

    response = asyncio.run(call("POST", "/v1/decide", content=chunks(),
                                headers={"content-type": "application/json"}))
    assert response.status_code == 413


def test_within_the_bounds_nothing_changes() -> None:
    response = asyncio.run(call("POST", "/v1/decide", content=b"{}",
                                headers={"content-type": "application/json"}))
    assert response.status_code == 200 and response.json() == {"got": 2}
    declared = asyncio.run(call("POST", "/v1/decide", content=b"x" * 1001,
                                headers={"content-type": "application/json"}))
    assert declared.status_code == 413


def test_a_body_that_stalls_is_a_408() -> None:
    async def stalls() -> AsyncIterator[bytes]:
        yield b'{"model_output": '
        await anyio.sleep(5)
        yield b"{}}"

    response = asyncio.run(call("POST", "/v1/decide", content=stalls(),
                                headers={"content-type": "application/json"}))
    assert response.status_code == 408
    assert response.headers["connection"] == "close"
    assert response.json()["errors"] == [{"field": "body",
                                          "message": "send the whole body at once"}]


def test_a_client_past_its_unfinished_requests_is_a_429() -> None:
    async def both() -> tuple[httpx.Response, httpx.Response]:
        slow = asyncio.ensure_future(call("GET", "/slow"))
        await asyncio.sleep(0.1)
        second = await call("GET", "/echo")
        return await slow, second

    slow, second = asyncio.run(both())
    assert slow.status_code == 503  # its own time limit, later
    assert second.status_code == 429 and second.headers["retry-after"] == "1"
    assert asyncio.run(call("GET", "/echo")).status_code == 200  # the slot is free again


def test_a_repeated_key_or_a_lone_surrogate_is_a_400_naming_it() -> None:
    repeated = asyncio.run(call("POST", "/v1/decide",
                                content=b'{"actor": {"id": 1, "id": 2}}',
                                headers={"content-type": "application/json"}))
    assert repeated.status_code == 400
    assert repeated.json()["errors"][0]["field"] == "body.actor.id"
    lone = asyncio.run(call("POST", "/v1/decide", content=b'{"a": ["x", "\\udc00"]}',
                            headers={"content-type": "application/json"}))
    assert lone.status_code == 400 and lone.json()["errors"][0]["field"] == "body.a[1]"
