"""Bad input and faults as problem details (RFC 9457), and the bounds of every request.

A malformed body, an unknown field, a wrong content type, an oversized body, a request
that takes too long: each is a 4xx (or a 503 for the store and the time limit) with an
``application/problem+json`` body whose ``errors`` name the field — never a 500, never a
traceback. ``RequestLimits`` is plain ASGI middleware, so a request over a bound is
answered before the framework reads it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from callgate_rules.errors import (
    ConfirmationError,
    InputError,
    LeaseLost,
    OperationIdReused,
    StoreError,
)
from callgate_rules.integrations.identity import ASGIApp, Message, Receive, Scope, Send
from callgate_rules.pipeline.hosted import UnknownOperation

LOGGER = logging.getLogger("callgate.server")
PROBLEM_TYPE = "application/problem+json"
JSON_TYPES = ("application/json", "application/problem+json")


class Problem(Exception):
    """An error the handlers answer as problem details."""

    def __init__(self, status: int, title: str, detail: str,
                 errors: Iterable[Mapping[str, str]] = ()) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.errors = status, title, detail, list(errors)


def problem_body(status: int, title: str, detail: str,
                 errors: Iterable[Mapping[str, str]] = ()) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status,
                            "detail": detail}
    listed = [dict(error) for error in errors]
    if listed:
        body["errors"] = listed
    return body


def problem_response(status: int, title: str, detail: str,
                     errors: Iterable[Mapping[str, str]] = ()) -> Response:
    return JSONResponse(problem_body(status, title, detail, errors), status_code=status,
                        media_type=PROBLEM_TYPE)


def _field(location: Iterable[Any]) -> str:
    return ".".join(str(part) for part in location) or "body"


def _validation_problem(request: Request, error: RequestValidationError) -> Response:
    found = list(error.errors())
    if any(each.get("type") == "json_invalid" for each in found):
        where = next(each for each in found if each.get("type") == "json_invalid")
        return problem_response(400, "Malformed JSON", "the request body is not valid JSON: "
                                f"{where.get('ctx', {}).get('error', 'cannot be parsed')}",
                                [{"field": "body", "message": "not valid JSON"}])
    errors = []
    for each in found[:20]:
        message = str(each.get("msg", "invalid"))
        if each.get("type") == "extra_forbidden":
            message = "unknown field: remove it (see the OpenAPI document for the fields)"
        errors.append({"field": _field(each.get("loc", ())), "message": message})
    fields = ", ".join(e["field"] for e in errors)
    return problem_response(422, "Invalid request", f"the request does not match its schema "
                            f"({fields})", errors)


def install_handlers(app: FastAPI) -> None:
    """Every error the API can meet, as problem details."""

    async def validation(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestValidationError)
        return _validation_problem(request, error)

    async def problem(request: Request, error: Exception) -> Response:
        assert isinstance(error, Problem)
        return problem_response(error.status, error.title, error.detail, error.errors)

    async def http(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        return problem_response(error.status_code, str(error.detail), str(error.detail))

    async def callgate(request: Request, error: Exception) -> Response:
        status, title = _status_of(error)
        if status >= 500:
            LOGGER.warning("%s %s: %s", request.method, request.url.path, error)
        return problem_response(status, title, str(error))

    async def unexpected(request: Request, error: Exception) -> Response:
        LOGGER.exception("%s %s failed", request.method, request.url.path)
        return problem_response(500, "Internal error", "the server failed on this request; "
                                "its log has the details")

    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(Problem, problem)
    app.add_exception_handler(HTTPException, http)
    for kind in (UnknownOperation, LeaseLost, OperationIdReused, StoreError, ConfirmationError,
                 InputError):
        app.add_exception_handler(kind, callgate)
    app.add_exception_handler(Exception, unexpected)


def _status_of(error: Exception) -> tuple[int, str]:
    if isinstance(error, UnknownOperation):
        return 404, "Unknown operation"
    if isinstance(error, LeaseLost | OperationIdReused | ConfirmationError):
        return 409, "Conflict"
    if isinstance(error, StoreError):
        return 503, "Receipt store unavailable"
    return 400, "Bad input"


@dataclass
class RequestLimits:
    """ASGI middleware: a body over ``max_body_bytes`` is a 413, a POST to the API that is
    not JSON a 415, and a request not answered within ``timeout`` seconds a 503."""

    app: ASGIApp
    max_body_bytes: int
    timeout: float
    json_prefix: str = "/v1/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await self._answer(send, 413, "Body too large", f"the body may have at most "
                               f"{self.max_body_bytes} bytes")
            return
        has_body = (length is not None and length != b"0") or b"transfer-encoding" in headers
        if has_body and scope.get("method") == "POST" and \
                scope.get("path", "").startswith(self.json_prefix):
            kind = headers.get(b"content-type", b"").split(b";")[0].strip().decode("latin-1")
            if kind.lower() not in JSON_TYPES:
                await self._answer(send, 415, "Unsupported media type",
                                   f"send the body as application/json, not {kind or 'none'}",
                                   [{"field": "content-type", "message": "application/json"}])
                return
        body, too_large = await self._read(receive)
        if too_large:
            await self._answer(send, 413, "Body too large", f"the body may have at most "
                               f"{self.max_body_bytes} bytes")
            return
        await self._bounded(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> tuple[bytes, bool]:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"", False
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return b"", True
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), False

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        with anyio.move_on_after(self.timeout) as scope_limit:
            await self.app(scope, receive, tracked)
        if scope_limit.cancelled_caught and not started:
            LOGGER.warning("%s %s: no answer within %gs", scope.get("method"),
                           scope.get("path"), self.timeout)
            await self._answer(send, 503, "Request took too long",
                               f"no answer within {self.timeout:g}s; the operation's receipt "
                               "says what happened, claim it again to learn it")

    @staticmethod
    async def _answer(send: Send, status: int, title: str, detail: str,
                      errors: Iterable[Mapping[str, str]] = ()) -> None:
        body = json.dumps(problem_body(status, title, detail, errors)).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", PROBLEM_TYPE.encode()),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands over the body already read, then waits as the original."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
