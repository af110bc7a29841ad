"""Bad input and faults as problem details (RFC 9457), and the bounds of every request.

A malformed body, an unknown field, a wrong content type, an oversized body, a body that
repeats a key or holds text that is not Unicode, a body too slow to arrive, too many
unfinished requests from one client, a request that takes too long: each is a 4xx (or a
503 for the store and the time limit) with an ``application/problem+json`` body whose
``errors`` name the field — never a 500, never a traceback, and never the service's
internals: connection strings, SQL, stack frames and a library's own error text go to the
log only. ``RequestLimits`` is plain ASGI middleware, so a request over a bound is answered
before the framework reads it; it reads every JSON body once with a decoder that refuses
repeated keys and lone surrogates at any depth. (Headers that never finish arriving are
the HTTP server's to cut off: ``server.connections``.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from callgate_rules.canonical import REFUSED, may_repeat_a_key, read_fast
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
READ_BODY = "callgate.body"  # where RequestLimits leaves a JSON body it read (``ReadBody``)


@dataclass(frozen=True)
class ReadBody:
    """A JSON request body as ``RequestLimits`` read it: its bytes, and its value as
    ``strict_json`` reads it (what ``POST /v1/decide`` validates, not reading it again)."""

    raw: bytes
    json: Any


def read_body(scope: Mapping[str, Any]) -> ReadBody | None:
    """The JSON body ``RequestLimits`` read for this request, if any."""
    read = scope.get(READ_BODY)
    return read if isinstance(read, ReadBody) else None


class Problem(Exception):
    """An error the handlers answer as problem details."""

    def __init__(self, status: int, title: str, detail: str,
                 errors: Iterable[Mapping[str, str]] = ()) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.errors = status, title, detail, list(errors)


def allowed_methods(request: Request) -> list[str]:
    """Every method the application's OpenAPI document gives the request's path (what
    schemathesis and clients read; the routers' internals differ by FastAPI version)."""
    path = request.scope.get("path", "")
    methods: set[str] = set()
    for template, operations in request.app.openapi().get("paths", {}).items():
        pattern = re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", pattern), path):
            methods |= {method.upper() for method in operations}
    return sorted(methods)


def problem_body(status: int, title: str, detail: str,
                 errors: Iterable[Mapping[str, str]] = ()) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status,
                            "detail": detail}
    listed = [dict(error) for error in errors]
    if listed:
        body["errors"] = listed
    return body


def problem_response(status: int, title: str, detail: str,
                     errors: Iterable[Mapping[str, str]] = (),
                     headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse(problem_body(status, title, detail, errors), status_code=status,
                        media_type=PROBLEM_TYPE, headers=dict(headers or {}))


STORE_DOWN_DETAIL = ("the receipt store did not answer; nothing more is known yet. Retry "
                     "in a moment: the operation's receipt says what happened (the "
                     "service's log has the store's own words)")


def public_message(error: Exception) -> str:
    """What a person or a host may read of ``error``: a store's failure carries its
    connection address and its driver's own text, which go to the log only."""
    if isinstance(error, StoreError):
        LOGGER.warning("receipt store: %s", error)
        return STORE_DOWN_DETAIL
    return str(error)


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

    async def http(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        # Starlette's 405 carries ``Allow`` (RFC 9110 §15.5.6); every header it sets is kept,
        # but it names the methods of the first route of the path only: a path served by two
        # routes (GET and PUT of a run's intent) gets both.
        headers = dict(error.headers or {})
        if error.status_code == 405:
            given = next((value for name, value in headers.items()
                          if name.lower() == "allow"), "")
            methods = {method.strip() for method in given.split(",") if method.strip()}
            methods |= set(allowed_methods(request))
            headers = {name: value for name, value in headers.items()
                       if name.lower() != "allow"}
            headers["Allow"] = ", ".join(sorted(methods))
        return problem_response(error.status_code, str(error.detail), str(error.detail),
                                headers=headers)

    async def failed(request: Request, error: Exception) -> Response:
        return error_response(request.method, request.url.path, error)

    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(Problem, failed)
    app.add_exception_handler(HTTPException, http)
    for kind in CALLGATE_ERRORS:
        app.add_exception_handler(kind, failed)
    app.add_exception_handler(Exception, failed)


CALLGATE_ERRORS = (UnknownOperation, LeaseLost, OperationIdReused, StoreError,
                   ConfirmationError, InputError)


def error_response(method: str, path: str, error: Exception) -> Response:
    """The answer to an error a request's work raised: a ``Problem`` as it says, the
    library's errors by their kind (``_status_of``), anything else a 500 whose details go to
    the log only. The handlers answer with it, and so does ``POST /v1/decide`` ahead of
    them (``api.DecideEndpoint``)."""
    if isinstance(error, Problem):
        return problem_response(error.status, error.title, error.detail, error.errors)
    if isinstance(error, CALLGATE_ERRORS):
        status, title = _status_of(error)
        if status >= 500:
            LOGGER.warning("%s %s: %s", method, path, error)
        return problem_response(status, title, public_message(error) if status >= 500
                                else str(error))
    LOGGER.exception("%s %s failed", method, path, exc_info=error)
    return problem_response(500, "Internal error", "the server failed on this request; its "
                            "log has the details")


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
    """ASGI middleware, the bounds of every request:

    - a body over ``max_body_bytes`` is a 413, a POST to the API that is not JSON a 415;
    - a body not complete within ``body_timeout`` seconds of the headers is a 408 (and the
      connection is closed: the rest of the body is never read);
    - a client (source address) with ``per_client`` requests unfinished is answered 429
      for the next one, until one of them ends;
    - a JSON body that is not UTF-8, not JSON, repeats a key or holds a lone surrogate
      (text no UTF-8 can carry) is a 400 naming the field;
    - a request not answered within ``timeout`` seconds is a 503.
    """

    app: ASGIApp
    max_body_bytes: int
    timeout: float
    body_timeout: float = 10.0
    per_client: int = 32
    json_prefix: str = "/v1/"
    unfinished: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    deadlines: Deadlines | None = field(default=None, init=False, repr=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = str((scope.get("client") or ("unknown",))[0])
        if self.unfinished.get(client, 0) >= self.per_client:
            LOGGER.warning("%s: %d requests unfinished, %s %s refused", client,
                           self.per_client, scope.get("method"), scope.get("path"))
            await self._answer(send, 429, "Too many unfinished requests",
                               f"this client has {self.per_client} requests unfinished; "
                               "send the next when one has been answered",
                               headers=[(b"retry-after", b"1")])
            return
        self.unfinished[client] = self.unfinished.get(client, 0) + 1
        try:
            await self._limited(scope, receive, send)
        finally:
            self.unfinished[client] -= 1
            if not self.unfinished[client]:
                del self.unfinished[client]

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        length, kind, chunked = _framing(scope.get("headers", ()))
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await self._answer(send, 413, "Body too large", f"the body may have at most "
                               f"{self.max_body_bytes} bytes", close=True)
            return
        has_body = (length is not None and length != b"0") or chunked
        is_json = kind.lower() in JSON_TYPES
        if (has_body and not is_json and scope.get("method") == "POST" and
                scope.get("path", "").startswith(self.json_prefix)):
            await self._answer(send, 415, "Unsupported media type",
                               f"send the body as application/json, not {kind or 'none'}",
                               [{"field": "content-type", "message": "application/json"}],
                               close=True)
            return
        # One deadline bounds both: the body's arrival (408), then the answer (503)
        # (``Deadlines``: asyncio's timers, as the service runs on asyncio under uvicorn).
        reading, started = True, False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        deadline = Deadline(self._deadlines(), self.body_timeout)
        try:
            with deadline:
                body, too_large = await self._read(receive)
                reading = False
                if too_large:
                    await self._answer(send, 413, "Body too large", f"the body may have at "
                                       f"most {self.max_body_bytes} bytes", close=True)
                    return
                if body and is_json:
                    try:
                        scope[READ_BODY] = ReadBody(body, strict_json(body))
                    except Problem as refused:
                        await self._answer(send, refused.status, refused.title,
                                           refused.detail, refused.errors)
                        return
                deadline.move(self.timeout)
                await self.app(scope, _replay(body, receive), tracked)
                return
        except TimeoutError:
            if not deadline.expired:
                raise  # the application's own, not this deadline's
        if reading:
            LOGGER.warning("%s %s: the body did not arrive within %gs", scope.get("method"),
                           scope.get("path"), self.body_timeout)
            await self._answer(send, 408, "Body too slow",
                               f"the body did not arrive within {self.body_timeout:g}s",
                               [{"field": "body", "message": "send the whole body at once"}],
                               close=True)
        elif not started:
            LOGGER.warning("%s %s: no answer within %gs", scope.get("method"),
                           scope.get("path"), self.timeout)
            await self._answer(send, 503, "Request took too long",
                               f"no answer within {self.timeout:g}s; the operation's receipt "
                               "says what happened, claim it again to learn it")

    def _deadlines(self) -> Deadlines:
        """The deadlines of the requests on the running event loop (one, under uvicorn)."""
        loop = asyncio.get_running_loop()
        if self.deadlines is None or self.deadlines.loop is not loop:
            self.deadlines = Deadlines(loop)
        return self.deadlines

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

    @staticmethod
    async def _answer(send: Send, status: int, title: str, detail: str,
                      errors: Iterable[Mapping[str, str]] = (), *, close: bool = False,
                      headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
        """A problem answered here; ``close`` when the body was not read to its end, so the
        connection cannot carry another request."""
        body = json.dumps(problem_body(status, title, detail, errors)).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", PROBLEM_TYPE.encode()),
            (b"content-length", str(len(body)).encode()), *headers,
            *([(b"connection", b"close")] if close else [])]})
        await send({"type": "http.response.body", "body": body})


class Deadlines:
    """The deadlines of the requests under way on one event loop, watched by one timer
    (each is a ``Deadline``).

    Why not a timer each (``asyncio.timeout``, rescheduled once the body is in): for every
    request, scheduling and cancelling its timers, with the timeout's entry and exit (two
    coroutines), cost more than the rest of ``RequestLimits`` together. Here a deadline
    is an entry in a set, moved by an assignment; the one timer is armed for the earliest
    deadline it knows of, and armed again only when it goes off (for the earliest of those
    still under way) or when a deadline comes before it: under a steady stream of requests,
    about once per ``body_timeout`` instead of twice per request."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.under_way: set[Deadline] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.armed = math.inf  # when the timer goes off

    def watch(self, deadline: Deadline) -> None:
        """``deadline`` is under way (or was moved): the timer goes off by its time."""
        self.under_way.add(deadline)
        if deadline.when < self.armed:
            if self.timer is not None:
                self.timer.cancel()
            self._arm(deadline.when)

    def _arm(self, when: float) -> None:
        self.armed, self.timer = when, self.loop.call_at(when, self._due)

    def _due(self) -> None:
        """The timer went off: every deadline up to its time has passed (the loop says when
        a timer's time has come)."""
        passed, self.armed, self.timer = self.armed, math.inf, None
        for deadline in [each for each in self.under_way if each.when <= passed]:
            self.under_way.discard(deadline)
            deadline.expire()
        if self.under_way:
            self._arm(min(each.when for each in self.under_way))


class Deadline:
    """A deadline (one of ``Deadlines``) for the task running a ``with`` block, that may be
    moved while it runs (from the body's arrival to the answer): when it passes, the task
    is cancelled and the block ends in ``TimeoutError``, as with ``asyncio.timeout``."""

    def __init__(self, deadlines: Deadlines, seconds: float) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a Deadline bounds a task")
        self.deadlines, self.task = deadlines, task
        self.when = deadlines.loop.time() + seconds
        self.expired = False

    def __enter__(self) -> Deadline:
        self.cancelling = self.task.cancelling()  # cancellations asked before, not ours
        self.deadlines.watch(self)
        return self

    def move(self, seconds: float) -> None:
        """The deadline is now ``seconds`` from now."""
        self.when = self.deadlines.loop.time() + seconds
        self.deadlines.watch(self)

    def expire(self) -> None:
        self.expired = True
        self.task.cancel()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.deadlines.under_way.discard(self)
        # Our cancellation, and no other asked meanwhile: the block ran out of time.
        if (self.expired and self.task.uncancel() <= self.cancelling and
                kind is asyncio.CancelledError):
            raise TimeoutError from error


class _Members(list[tuple[str, Any]]):
    """An object's members in the order the body gave them, before repeats are looked for
    (``json``'s ``object_pairs_hook``: a dict would keep the last copy silently)."""


def strict_json(body: bytes) -> Any:
    """``body`` as JSON, read as the service reads every request: UTF-8 (RFC 8259 §8.1),
    each object's keys once, every string encodable as UTF-8 (no lone surrogate written as
    ``\\ud800``). Anything else is a 400 problem naming the field."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Problem(400, "Not UTF-8", f"the body is not UTF-8 text (byte {error.start} "
                      "cannot start a character); send JSON as UTF-8",
                      [{"field": "body", "message": "not UTF-8"}]) from None
    try:
        if "\\ud" not in text and "\\uD" not in text:  # only an escape makes a lone surrogate
            value = read_fast(text)  # msgspec's, when its colons prove no key repeats
            if value is not REFUSED and not may_repeat_a_key(text, value):
                return value
            try:
                return _UNIQUE_KEYS.decode(text)
            except _Repeated:
                pass  # read again below, which names the key and where it repeats
        parsed = _MEMBERS.decode(text)
        return _checked(parsed, "body")
    except json.JSONDecodeError as error:
        raise Problem(400, "Malformed JSON", f"the request body is not valid JSON: "
                      f"{error.msg} (line {error.lineno}, column {error.colno})",
                      [{"field": "body", "message": "not valid JSON"}]) from None
    except RecursionError:
        raise Problem(400, "Malformed JSON", "the request body nests too deeply",
                      [{"field": "body", "message": "nested too deeply"}]) from None


class _Repeated(Exception):
    """An object of the body repeats a key (``_unique``)."""


def _unique(members: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as a dict, once no key repeats: the quick reading of a body that
    holds no ``\\ud...`` escape (UTF-8 text itself cannot carry a lone surrogate)."""
    found = dict(members)
    if len(found) != len(members):
        raise _Repeated
    return found


# Made once: ``json.loads`` with a hook makes a decoder and its scanner on every call.
_UNIQUE_KEYS = json.JSONDecoder(object_pairs_hook=_unique)
_MEMBERS = json.JSONDecoder(object_pairs_hook=_Members)


def _checked(value: Any, where: str) -> Any:
    """``value`` with its members as dicts, once no key repeats and every text encodes."""
    if isinstance(value, str):
        _encodable(value, where)
        return value
    if isinstance(value, _Members):
        members: dict[str, Any] = {}
        for key, member in value:
            inside = f"{where}.{_printable(key)}"
            _encodable(key, inside)
            if key in members:
                raise Problem(400, "Repeated key", f"the key {_printable(key)!r} appears more "
                              f"than once in {where}: which copy counts would be a guess",
                              [{"field": inside, "message": "repeated key: send it once"}])
            members[key] = _checked(member, inside)
        return members
    if isinstance(value, list):
        return [_checked(member, f"{where}[{index}]") for index, member in enumerate(value)]
    return value


def _encodable(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise Problem(400, "Not Unicode text", f"{where} holds a lone surrogate "
                      f"({_printable(text[error.start:error.end])}) at character "
                      f"{error.start}: text must be valid Unicode",
                      [{"field": where, "message": "a lone surrogate is not text: remove it "
                                                   "or pair it"}]) from None


def _printable(text: str) -> str:
    """``text`` as it can be answered and logged: a lone surrogate as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _framing(headers: Iterable[tuple[bytes, bytes]]) -> tuple[bytes | None, str, bool]:
    """The body's declared length, its media type (without parameters) and whether it comes
    chunked, from the request's headers (of a repeated one, the last). One pass over them:
    a dict of them all cost twice as much, for every request."""
    length, kind, chunked = None, b"", False
    for name, value in headers:
        name = name.lower()
        if name == b"content-length":
            length = value
        elif name == b"content-type":
            kind = value
        elif name == b"transfer-encoding":
            chunked = True
    return length, kind.split(b";")[0].strip().decode("latin-1"), chunked


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
