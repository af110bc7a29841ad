"""The ASGI application of ``callgate serve``: the decision API, the review page, health,
readiness, metrics and the OpenAPI document, in one app.

    /v1/...           the decision API (bearer token)          api.py
    /review           the review and confirmation page (login) page.py
    /openapi.json     the OpenAPI document of /v1
    /healthz          the process answers
    /readyz           the receipt store answers (503 when it does not, or not in time)
    /metrics          Prometheus text format                   metrics.py

Outermost, ``RequestLimits`` bounds every request's body, its time and each client's
unfinished requests; then ``BearerAuth`` guards ``/v1`` only (the page has its own login;
probes and scrapes need none); then ``api.DecideEndpoint`` answers ``POST /v1/decide``, the
call a host makes for every tool call, without the framework's cost per request (the
route is FastAPI's still: its model, its document, its answers to a bad body).

Readiness asks the store in a lane of its own, never waiting behind the gate's calls (and
so never behind their look-ups), and answers within ``readiness_timeout`` whatever the
store does; its answer names no address and no driver's text (those go to the log).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, fields
from typing import Any

import anyio
import anyio.to_thread
import jwt
from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import JSONResponse, Response

from callgate_rules.integrations.identity import (
    ASGIApp,
    BearerAuth,
    Identity,
    Receive,
    Scope,
    Send,
    TokenVerifier,
)
from callgate_rules.pipeline.hosted import Observer
from callgate_rules.server.api import DecideEndpoint, api_router
from callgate_rules.server.intents_api import intents_router
from callgate_rules.server.page import page_router
from callgate_rules.server.problems import RequestLimits, install_handlers
from callgate_rules.server.service import Service, ServiceSettings

LOGGER = logging.getLogger("callgate.server")
OPENAPI_URL = "/openapi.json"
API_VERSION = "1"


def create_app(settings: ServiceSettings, *, observers: tuple[Observer, ...] = ()) -> ASGIApp:
    """The whole service for ``settings``; loads the documents and opens the store now, so
    a bad configuration fails at start. ``observers`` see every decision, in the thread
    that made it: for ``/v1/decide`` outside a run, the event loop's (they must not
    block)."""
    service = Service(settings, observers=(*observers, *_exporters(settings.otel)))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        LOGGER.info("callgate serve: %d tools, store %s", len(service.hosted.gate.config
                                                             .contracts), service.store.url)
        try:
            yield
        finally:  # the store, the decision log, the bundle watch: closed however we stop
            service.close()

    app = FastAPI(title="callgate decision API", version=API_VERSION, openapi_url=OPENAPI_URL,
                  docs_url=None, redoc_url=None, lifespan=lifespan,
                  description="Decide about a model's proposed tool call, and run a write the "
                              "host executes exactly once: decide → claim → execute (the "
                              "host) → finish, with reconcile, confirm and the review queue.")
    app.state.service = service
    install_handlers(app)
    app.include_router(api_router(service))
    app.include_router(intents_router(service))
    app.include_router(page_router(service))
    app.openapi = _exact_openapi(app, service)  # type: ignore[method-assign]

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> Response:
        return JSONResponse({"status": "ok"})

    readiness_lane = anyio.CapacityLimiter(2)  # not the gate's: never behind its look-ups

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        seconds = settings.readiness_timeout
        why: str | None = f"no answer within {seconds:g}s"
        with anyio.move_on_after(seconds):
            why = await anyio.to_thread.run_sync(service.ready, limiter=readiness_lane,
                                                 abandon_on_cancel=True)
        if why is None:
            watch = service.bundle_watch  # a refused new bundle: still ready, on the old one
            return JSONResponse({"status": "ready"} if watch is None else {
                "status": "ready", "bundle": watch.state.serving,
                **({"bundle_refused": watch.state.refused} if watch.state.refused else {})})
        LOGGER.warning("/readyz: receipt store %s: %s", service.store.url, why)
        return JSONResponse({"status": "unavailable", "detail": "the receipt store does not "
                             "answer (the service's log says why)"}, status_code=503)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        text = await service.run("metrics", lambda: generate_latest(service.metrics.registry))
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    served: ASGIApp = DecideEndpoint(app, service)  # POST /v1/decide ahead of the router
    guarded = served
    if settings.verifier is not None:
        guarded = ApiAuth(served, BearerAuth(served, RememberedTokens.of(settings.verifier)))
    return RequestLimits(guarded, settings.max_body_bytes, settings.request_timeout,
                         body_timeout=settings.body_timeout,
                         per_client=settings.client_concurrency)


def _exact_openapi(app: FastAPI, service: Service) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document as the models give it, made exact where only the loaded
    configuration knows: ``records`` takes the look-up names some contract has, each
    record matching that look-up's schemas (``LookupRecords.json_schema``)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()
            records = service.lookups.json_schema()
            for component in document.get("components", {}).get("schemas", {}).values():
                properties = component.get("properties", {})
                if "records" in properties:
                    described = properties["records"].get("description")
                    properties["records"] = {**records, "description": described,
                                             "default": None}
            app.openapi_schema = document
        return app.openapi_schema

    return openapi


@dataclass
class ApiAuth:
    """Bearer tokens for ``/v1`` only."""

    app: ASGIApp
    authenticated: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith("/v1/"):
            await self.authenticated(scope, receive, send)
        else:
            await self.app(scope, receive, send)


REMEMBERED_TOKENS = 1024  # at most; past it, all are forgotten at once
REMEMBERED_WITHOUT_EXPIRY = 300.0  # seconds, for a token with no ``exp`` (when allowed)


@dataclass(frozen=True)
class RememberedTokens(TokenVerifier):
    """A ``TokenVerifier`` that remembers each token it verified, by its exact text, until
    the token expires (``exp`` and the leeway, as verifying it says): a host sends the same
    token with every request, and verifying it again (base64, JSON, the signature, the
    claims) cost more than the decision it guards. Only a token that verified is
    remembered. The keys are read once, at start, so a token that verified stays valid
    until it expires; no other claim can lapse before (``nbf`` and ``iat`` were checked)."""

    remembered: dict[str, tuple[float, Identity]] = field(
        default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, verifier: TokenVerifier) -> RememberedTokens:
        return cls(**{each.name: getattr(verifier, each.name) for each in fields(verifier)})

    def verify(self, token: str) -> Identity:
        now = time.time()
        known = self.remembered.get(token)
        if known is not None and now < known[0]:
            return known[1]
        identity = super().verify(token)
        expiry = jwt.decode(token, options={"verify_signature": False}).get("exp")
        until = (float(expiry) + self.leeway if isinstance(expiry, int | float)
                 else now + REMEMBERED_WITHOUT_EXPIRY)
        if len(self.remembered) >= REMEMBERED_TOKENS:
            self.remembered.clear()
        self.remembered[token] = (until, identity)
        return identity


def _exporters(otel: str | None) -> tuple[Observer, ...]:
    """Decision spans, exported to the console or over OTLP, when asked for."""
    if otel is None:
        return ()
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    from callgate_rules.integrations.telemetry import DecisionSpans, service_resource

    exporter: SpanExporter
    if otel == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore
            OTLPSpanExporter,
        )
        exporter = OTLPSpanExporter()
    provider = TracerProvider(resource=service_resource())  # service.name: callgate
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return (DecisionSpans(provider.get_tracer("callgate")),)
