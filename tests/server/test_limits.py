"""``RequestLimits`` on its own: a request past its time is answered 503 with problem
details while the work goes on, a streamed body past the limit is a 413 (no
content-length to trust), and an answered request passes through untouched."""

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


async def call(method: str, path: str, **options: Any) -> httpx.Response:
    app = RequestLimits(slow_or_echo, max_body_bytes=1000, timeout=0.3)
    transport = httpx.ASGITransport(app=app)
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
