"""``POST /v1/decide`` is answered ahead of FastAPI's routing (``api.DecideEndpoint``): the
same answer, in the same bytes, behind the same bearer tokens and request limits, with a
bad body answered by the route as before and an error as the handlers answer it; the
route is still in the OpenAPI document. A decision made on the event loop is bounded: a
body past ``ON_THE_LOOP_BYTES`` (a long conversation) is decided in a worker, which the
request's time limit leaves behind, and a decision on the loop takes its place under the
concurrency limit like a worker's."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service needs the server extra (fastapi)")

import httpx  # noqa: E402

from callgate_rules.integrations.identity import (  # noqa: E402
    ASGIApp,
    ClaimMapping,
    TokenVerifier,
    VerificationKey,
)
from callgate_rules.pipeline.decision import Decision  # noqa: E402
from callgate_rules.pipeline.hosted import HostedWrites  # noqa: E402
from callgate_rules.server import ServiceSettings, create_app  # noqa: E402
from callgate_rules.server.api import ON_THE_LOOP_BYTES  # noqa: E402
from callgate_rules.server.models import DecisionOut  # noqa: E402
from callgate_rules.server.service import Service  # noqa: E402

from .conftest import DANA as ACTOR  # noqa: E402
from .conftest import (  # noqa: E402
    INJECTED,
    REPO,
    SESSION,
    TOKEN_SECRET,
    injected_conversation,
    payment,
    token,
)


def long_conversation() -> list[dict[str, Any]]:
    """A conversation whose body is past ``ON_THE_LOOP_BYTES``: the user's words, many
    times over."""
    line = {"role": "user", "content": "Please pay the Northwind invoice from my inbox. " * 8}
    return [line] * (ON_THE_LOOP_BYTES // 400 + 1)


def service_app(tmp_path: Path, *, observers: tuple[Callable[[Decision], None], ...] = (),
                **settings: Any) -> ASGIApp:
    return create_app(ServiceSettings(
        paths=(str(REPO / "contracts"), str(REPO / "policies")),
        store=f"sqlite:///{tmp_path / 'receipts.db'}",
        world=str(REPO / "examples" / "world.yaml"),
        verifier=TokenVerifier(ClaimMapping(actor={"tenant": "tenant"}),
                               {None: VerificationKey(TOKEN_SECRET.encode(), "HS256")}),
        **settings), observers=observers)


def client(app: ASGIApp, tenant: str | None = "acme") -> httpx.AsyncClient:
    headers = {} if tenant is None else {"authorization": f"Bearer {token(tenant=tenant)}"}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                             headers=headers, timeout=30)


def decide(body: dict[str, Any], request_id: str) -> dict[str, Any]:
    return {"actor": ACTOR, "session": SESSION, "request_id": request_id, **body}


def test_the_answer_is_the_routes_in_the_same_bytes(tmp_path: Path) -> None:
    service = Service(ServiceSettings(
        paths=(str(REPO / "contracts"), str(REPO / "policies")),
        store=f"sqlite:///{tmp_path / 'receipts.db'}",
        world=str(REPO / "examples" / "world.yaml")))
    hosted: HostedWrites = service.hosted
    calls: list[tuple[Any, list[dict[str, Any]] | None]] = [
        (payment(), None),  # allowed: an operation ID
        (payment(INJECTED), injected_conversation()),  # held: a draft and a confirmation token
        ({**payment(), "name": "sendPaymnet"}, None),  # unknown tool: candidates
        ({**payment(), "name": "send\ud800Payment"}, None),  # a lone surrogate, answered escaped
        ("not a tool call", None),  # malformed text
    ]
    try:
        for number, (model_output, conversation) in enumerate(calls):
            decision = hosted.decide(model_output, actor=ACTOR, request_id=f"r-{number}",
                                     session=SESSION, conversation=conversation)
            for answered in (decision, decision.replace(result={"amount": float("inf")})):
                assert DecisionOut.json_of(answered) == \
                    DecisionOut.of(answered).model_dump_json().encode(), decision.route
    finally:
        service.close()


def test_tokens_actors_and_bad_bodies_are_answered_as_before(tmp_path: Path) -> None:
    app = service_app(tmp_path)

    async def each() -> dict[str, httpx.Response]:
        async with client(app) as acme, client(app, None) as anonymous, \
                client(app, "globex") as globex:
            return {
                "allowed": await acme.post("/v1/decide", json=decide(
                    {"model_output": payment(), "actor": {"id": "U-7", "role": "agent"}},
                    "r-1")),
                "no token": await anonymous.post("/v1/decide", json=decide(
                    {"model_output": payment()}, "r-2")),
                "another tenant": await globex.post("/v1/decide", json=decide(
                    {"model_output": payment()}, "r-3")),
                "unknown field": await acme.post("/v1/decide", json=decide(
                    {"model_output": payment(), "actr": ACTOR}, "r-4")),
                "no body": await acme.post("/v1/decide", content=b"",
                                           headers={"content-type": "application/json"}),
                "not JSON": await acme.post("/v1/decide", content=b"{\"a\": 1, \"a\": 2}",
                                            headers={"content-type": "application/json"}),
                "text": await acme.post("/v1/decide", content=b"{}",
                                        headers={"content-type": "text/plain"}),
                "too large": await acme.post("/v1/decide", json=decide(
                    {"model_output": payment(), "conversation": long_conversation() * 20},
                    "r-5")),
                "GET": await acme.get("/v1/decide"),
            }

    answers = asyncio.run(each())
    allowed = answers["allowed"]
    assert allowed.status_code == 200 and allowed.json()["route"] == "execute"
    assert allowed.headers["content-type"] == "application/json"
    assert answers["no token"].status_code == 401
    assert "www-authenticate" in answers["no token"].headers
    refused = answers["another tenant"]
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["errors"][0]["field"] == "body.actor.tenant"
    unknown = answers["unknown field"]
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "body.actr"
    assert answers["no body"].status_code == 422
    assert answers["not JSON"].status_code == 400
    assert answers["not JSON"].json()["errors"][0]["field"] == "body.a"
    assert answers["text"].status_code == 415
    assert answers["too large"].status_code == 413
    assert answers["GET"].status_code == 405 and "POST" in answers["GET"].headers["allow"]


def test_an_unexpected_failure_is_a_500_that_names_nothing_inside(tmp_path: Path) -> None:
    def fails(decision: Decision) -> None:
        raise RuntimeError("postgresql://admin:hunter2@db/receipts is down")

    app = service_app(tmp_path, observers=(fails,))

    async def post() -> httpx.Response:
        async with client(app) as acme:
            return await acme.post("/v1/decide", json=decide({"model_output": payment()},
                                                              "r-1"))

    failed = asyncio.run(post())
    assert failed.status_code == 500
    assert failed.headers["content-type"] == "application/problem+json"
    assert failed.json()["title"] == "Internal error" and "hunter2" not in failed.text


def test_the_route_is_in_the_openapi_document(tmp_path: Path) -> None:
    async def document() -> dict[str, Any]:
        async with client(service_app(tmp_path)) as acme:
            return dict((await acme.get("/openapi.json")).json())

    operation = asyncio.run(document())["paths"]["/v1/decide"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DecideRequest"}
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DecisionOut"}
    assert {"401", "403", "413", "422", "503"} <= set(operation["responses"])


def blocking(release: threading.Event, seen: list[tuple[str, threading.Thread]],
             slow: str) -> Callable[[Decision], None]:
    """An observer that records where each decision was made (by the host's request ID,
    without its tenant's prefix), and holds the one whose ID ends in ``slow`` until
    ``release`` (at most 10 s)."""
    def observe(decision: Decision) -> None:
        request_id = str(decision.log.get("request_id")).rsplit(":", 1)[-1]
        seen.append((request_id, threading.current_thread()))
        if request_id.endswith(slow):
            release.wait(10)

    return observe


def test_a_long_conversation_is_decided_in_a_worker_within_the_time_limit(
        tmp_path: Path) -> None:
    release, seen = threading.Event(), []
    app = service_app(tmp_path, observers=(blocking(release, seen, "long"),),
                      request_timeout=0.5)

    async def both() -> tuple[threading.Thread, httpx.Response, httpx.Response, float]:
        async with client(app) as acme:
            started = time.monotonic()
            long = asyncio.ensure_future(acme.post("/v1/decide", json=decide(
                {"model_output": payment(), "conversation": long_conversation()}, "r-long")))
            await asyncio.sleep(0.1)
            short = await acme.post("/v1/decide", json=decide({"model_output": payment()},
                                                               "r-short"))
            answered = await long
            return threading.current_thread(), answered, short, time.monotonic() - started

    try:
        loop_thread, long, short, took = asyncio.run(both())
    finally:
        release.set()
    assert long.status_code == 503 and "no answer within 0.5s" in long.json()["detail"]
    assert took < 5  # the time limit held: not the observer's 10 s
    assert short.status_code == 200  # the loop was free meanwhile
    made_in = dict(seen)
    assert made_in["r-long"] is not loop_thread and made_in["r-short"] is loop_thread


def test_a_decision_on_the_loop_takes_its_place_under_the_concurrency_limit(
        tmp_path: Path) -> None:
    release, seen = threading.Event(), []
    app = service_app(tmp_path, observers=(blocking(release, seen, "long"),), concurrency=1)

    async def both() -> tuple[threading.Thread, httpx.Response, httpx.Response]:
        async with client(app) as acme:
            long = asyncio.ensure_future(acme.post("/v1/decide", json=decide(
                {"model_output": payment(), "conversation": long_conversation()}, "r-long")))
            await asyncio.sleep(0.2)  # the long one holds the only place, in a worker
            short = asyncio.ensure_future(acme.post("/v1/decide", json=decide(
                {"model_output": payment()}, "r-short")))
            await asyncio.sleep(0.2)
            assert not short.done()  # waiting for a place, not decided on the loop
            release.set()
            return threading.current_thread(), await long, await short

    try:
        loop_thread, long, short = asyncio.run(both())
    finally:
        release.set()
    assert long.status_code == 200 and short.status_code == 200
    assert [request_id for request_id, _ in seen] == ["r-long", "r-short"]  # in turn
    assert seen[0][1] is not loop_thread
