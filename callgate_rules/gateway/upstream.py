"""The upstream MCP server: started over stdio or reached over streamable HTTP, its tools
listed once, its tools called from the event loop or — for the gate's synchronous
executors — from any other thread.

The gate is synchronous: its executors are plain functions that ``pipeline/execute.py``
calls in a worker thread with the contract's timeout. The upstream session is async and
lives on the gateway's event loop. ``Upstream.call_blocking`` joins the two: it submits
the call to the loop with ``asyncio.run_coroutine_threadsafe`` and waits for it, never
longer than the timeout, from the calling thread.

How a failure is told apart (the line that matters is *when* it happened):

    Unavailable     the session was already gone: nothing was sent           → retry
    OutcomeTimeout  sent, no answer within the timeout                       → reconcile
    ConnectionLost  sent, and the connection broke before the answer         → reconcile
    Refused         the upstream rejected the request itself (bad params,
                    no such method): the tool never ran                      → refuse
    UpstreamError   the tool ran and answered ``isError``                    → ``permanent``,
                    unless the contract's ``errors`` table maps it (``code``, ``text``)
    AnswerTooLarge  the tool ran and its answer was larger than the bound    → its own class,
                    ``answer_too_large``: not a failure of the run; a write goes to a person

**Bounds** (``UpstreamLimits``; the ``gateway`` command's options). Every upstream call
has a total deadline (its contract's timeout, never more than ``call_deadline``): connect,
send and the whole answer. An answer is bounded in bytes (``answer_bytes``): over stdio the
transport (``bounded_stdio``) stops reading a line at the bound, drops the rest of it
unparsed and answers the call ``AnswerTooLarge`` at once; over streamable HTTP the SDK
bounds each server-sent event as it streams in (``max_sse_event_size``), and an answer sent
as plain JSON is measured once read.

**Environment.** An upstream started over stdio inherits the gateway's whole environment
(the API keys a desktop client's config sets for the server reach it); with
``--upstream-env NAME`` (repeated) it gets only the named variables, beside ``HOME``,
``PATH``, ``SHELL`` and ``TERM`` (``UpstreamSpec.environment``).

**Supervision** (``supervised``). The upstream is watched (a ping every
``health_interval`` seconds while idle, and every call's broken connection): when it
stops, it is started again after a backoff that doubles from ``restart_backoff`` up to
``restart_backoff_cap``; calls in between answer ``Unavailable`` (``transient``: nothing
was sent). When it stops more than ``restarts`` times within ``restart_window`` seconds,
or will not start again, the gateway stops with ``UpstreamGone`` and exits non-zero, so
that its client (a desktop app, a process manager) starts it afresh.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import os
import shlex
import sys
import threading
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from callgate_rules.errors import (
    CallgateError,
    ConnectionLost,
    OutcomeTimeout,
    Refused,
    ToolError,
    Unavailable,
)
from callgate_rules.gateway.bounded_stdio import ANSWER_TOO_LARGE, bounded_stdio
from callgate_rules.taxonomy import ErrorClass

START_TIMEOUT_SECONDS = 30.0
# The request never ran: the upstream refused its form, not its content.
_NEVER_RAN = frozenset({types.PARSE_ERROR, types.INVALID_REQUEST, types.METHOD_NOT_FOUND,
                        types.INVALID_PARAMS})
# Past its own timeout, a blocked caller waits this much longer for the loop to say so.
_LOOP_GRACE_SECONDS = 2.0

DEFAULT_ANSWER_BYTES = 8 * 1024 * 1024
# how the SDK's HTTP transport says one server-sent event was over its bound (httpx2's SSEError)
_SSE_TOO_LARGE = "byte limit"


@dataclass(frozen=True)
class UpstreamLimits:
    """The bounds the gateway holds its upstream to (see the module docstring)."""

    answer_bytes: int = DEFAULT_ANSWER_BYTES  # one answer, as bytes on the wire
    call_deadline: float = 60.0  # seconds: no upstream call waits longer, whatever else
    restarts: int = 5  # restarts allowed within ``restart_window`` before giving up
    restart_window: float = 60.0  # seconds
    restart_backoff: float = 0.5  # seconds before the first restart; doubles each time
    restart_backoff_cap: float = 8.0  # seconds at most between restarts
    health_interval: float = 2.0  # seconds between pings while idle
    ping_deadline: float = 5.0  # a ping slower than this is a busy upstream, not a gone one

    def __post_init__(self) -> None:
        if self.answer_bytes < 1024:
            raise UpstreamStartError("--upstream-answer-limit must be at least 1024 bytes")
        if self.call_deadline <= 0 or self.restart_backoff < 0 or self.restarts < 0:
            raise UpstreamStartError("the upstream's deadline must be positive, its restarts "
                                     "and backoff 0 or more")


class UpstreamStartError(CallgateError):
    """The upstream would not start, answer the handshake, or list its tools."""


class UpstreamGone(CallgateError):
    """The upstream kept stopping (or would not start again): the gateway stops too, with
    a non-zero exit, so that its client starts it afresh."""

    exit_code = 3


class AnswerTooLarge(ToolError):
    """The upstream tool answered with more bytes than the gateway reads from one answer.
    The tool ran; its answer is not read. Its class, ``answer_too_large``, is not a failure
    of the run: the gate hands a write to a person (its outcome cannot be read from an
    answer nobody read) and routes a read by the RoutingTable (``replan`` by default)."""

    error_class = ErrorClass.ANSWER_TOO_LARGE


class UpstreamError(ToolError):
    """The upstream tool ran and answered with ``isError``: the destination said no.

    ``text`` is its first text block, ``code`` the ``code`` of its structured content if
    it has one (for a contract's ``errors`` table: ``{exception: UpstreamError, attribute:
    code, equals: rate_limited, error_class: transient}``), ``result`` the whole answer."""

    error_class = ErrorClass.PERMANENT

    def __init__(self, tool: str, result: types.CallToolResult) -> None:
        self.result = dump(result)
        self.text = first_text(result)
        structured = result.structured_content
        self.code = structured.get("code") if isinstance(structured, dict) else None
        super().__init__(f"the upstream tool {tool} answered with an error: "
                         f"{self.text or '(no text)'}"[:500])


@dataclass(frozen=True)
class UpstreamSpec:
    """Where the upstream is: a command line started over stdio, or a streamable HTTP URL."""

    command: str | None = None
    url: str | None = None
    env: Mapping[str, str] | None = None  # exactly this environment (beside the basics)
    cwd: str | None = None
    # a started upstream's environment: None inherits the gateway's whole environment (as a
    # desktop client's config sets it for the server); names pass only those variables
    env_names: tuple[str, ...] | None = None
    errlog: TextIO = field(default=sys.stderr, compare=False)

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise UpstreamStartError("give the upstream as exactly one of a command "
                                     "(--upstream-command) or a URL (--upstream-url)")
        if self.command is not None and not shlex.split(self.command):
            raise UpstreamStartError("--upstream-command is empty")

    def describe(self) -> str:
        return f"command `{self.command}`" if self.command is not None else f"at {self.url}"

    def environment(self) -> dict[str, str]:
        """What a started upstream's environment holds beyond the basics every process
        gets (``HOME``, ``PATH``, ``SHELL``, ``TERM``): the gateway's whole environment by
        default, only the variables ``env_names`` names when it names any, or ``env``."""
        if self.env is not None:
            return dict(self.env)
        if self.env_names is not None:
            return {name: os.environ[name] for name in self.env_names if name in os.environ}
        return dict(os.environ)


@dataclass
class Upstream:
    """A connected upstream: its session, the loop it lives on, and its tools by name.
    Under ``supervised`` the session is replaced when the upstream is started again."""

    session: ClientSession
    loop: asyncio.AbstractEventLoop
    tools: dict[str, types.Tool]
    spec: UpstreamSpec
    lost: bool = False  # the connection broke; nothing can be sent until a restart
    limits: UpstreamLimits = field(default_factory=UpstreamLimits)
    restarts: int = 0  # how many times the upstream was started again
    given_up: UpstreamGone | None = None  # set when the supervisor stopped starting it
    _gone: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _given_up: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def describe(self) -> str:
        return self.spec.describe()

    def give_up(self, why: UpstreamGone) -> None:
        self.given_up = why
        self.mark_lost()
        self._given_up.set()

    async def wait_given_up(self) -> UpstreamGone:
        """Return (the reason) once the supervisor has stopped starting the upstream."""
        await self._given_up.wait()
        assert self.given_up is not None
        return self.given_up

    def mark_lost(self) -> None:
        """The connection broke: no call is sent until the supervisor starts it again."""
        self.lost = True
        self._gone.set()

    def attach(self, session: ClientSession) -> None:
        """A restarted upstream's session: calls go to it from now on."""
        self.session = session
        self._gone = asyncio.Event()
        self.lost = False
        self.restarts += 1

    async def watch(self) -> None:
        """Return when the connection is lost: a call found it broken, or a ping did."""
        limits = self.limits
        while not self.lost:
            with anyio.move_on_after(limits.health_interval):
                await self._gone.wait()
            if self.lost:
                return
            try:
                with anyio.fail_after(limits.ping_deadline):
                    await self.session.send_ping()
            except TimeoutError:
                continue  # busy, not gone: a slow call still holds it
            except MCPError as error:
                if error.code == types.CONNECTION_CLOSED:
                    self.mark_lost()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                self.mark_lost()

    async def call(self, tool: str, arguments: Mapping[str, Any],
                   meta: Mapping[str, Any] | None, timeout: float) -> types.CallToolResult:
        """Call ``tool`` on the loop; a failure raised as one of the classes above."""
        if self.lost:
            raise Unavailable(f"the upstream {self.spec.describe()} is not running (it is "
                              "being started again); nothing was sent")
        timeout = min(timeout, self.limits.call_deadline)
        try:
            with anyio.fail_after(max(timeout, 0.0)):
                result = await self.session.call_tool(
                    tool, dict(arguments), read_timeout_seconds=max(timeout, 0.001),
                    meta=dict(meta) if meta else None)  # type: ignore[arg-type]
        except TimeoutError:
            raise OutcomeTimeout(f"no answer from the upstream within {timeout:g}s") from None
        except MCPError as error:
            raise self._classified(error, tool) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            self.mark_lost()
            raise ConnectionLost(f"the connection to the upstream {self.spec.describe()} "
                                 "broke") from None
        if self.spec.url is not None:  # over stdio the transport bounded it already
            size = _answer_size(result)
            if size > self.limits.answer_bytes:
                raise AnswerTooLarge(_too_large_text(tool, self.limits.answer_bytes))
        return result

    def _classified(self, error: MCPError, tool: str = "") -> ToolError:
        if error.code == ANSWER_TOO_LARGE or (
                error.code == types.CONNECTION_CLOSED and _SSE_TOO_LARGE in error.message):
            # the connection is sound: only this answer was dropped
            return AnswerTooLarge(_too_large_text(tool, self.limits.answer_bytes))
        if error.code == types.CONNECTION_CLOSED:
            self.mark_lost()
            return ConnectionLost(f"the connection to the upstream {self.spec.describe()} "
                                  "closed before its answer")
        if error.code == types.REQUEST_TIMEOUT:
            return OutcomeTimeout(f"the upstream timed out: {error.message}")
        if error.code in _NEVER_RAN:
            return Refused(f"the upstream refused the request ({error.code}): {error.message}")
        # An internal error may have come after the tool changed something.
        return ConnectionLost(f"the upstream failed ({error.code}): {error.message}")

    def call_blocking(self, tool: str, arguments: Mapping[str, Any],
                      meta: Mapping[str, Any] | None, timeout: float) -> types.CallToolResult:
        """``call`` from a thread that is not the loop's, waiting at most ``timeout``."""
        if _on_loop(self.loop):
            raise RuntimeError("call_blocking on the event loop's own thread would deadlock; "
                               "await Upstream.call instead")
        future = asyncio.run_coroutine_threadsafe(
            self.call(tool, arguments, meta, timeout), self.loop)
        try:
            return future.result(max(timeout, 0.0) + _LOOP_GRACE_SECONDS)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise OutcomeTimeout(f"no answer from the upstream within {timeout:g}s") from None
        except concurrent.futures.CancelledError:
            raise ConnectionLost("the call to the upstream was cancelled (the gateway is "
                                 "stopping)") from None


def _too_large_text(tool: str, limit: int) -> str:
    return (f"the upstream tool {tool} answered with more than {limit:,} bytes, more than "
            "the gateway reads from one answer (--upstream-answer-limit); ask for less")


def _answer_size(result: types.CallToolResult) -> int:
    """About the bytes of an answer, from its text and structured content."""
    size = 0
    for block in result.content:
        text = getattr(block, "text", None) or getattr(block, "data", None) or ""
        size += len(text)
    if result.structured_content is not None:
        size += len(json.dumps(result.structured_content, default=str))
    return size


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return getattr(loop, "_thread_id", None) == threading.get_ident()


_START_FAILURES = (OSError, MCPError, ValueError, RuntimeError, anyio.BrokenResourceError,
                   anyio.ClosedResourceError, anyio.EndOfStream)


async def _started(stack: AsyncExitStack, spec: UpstreamSpec, start_timeout: float,
                   limits: UpstreamLimits) -> tuple[ClientSession | None,
                                                    dict[str, types.Tool], str | None]:
    """A started, initialised session and its tools; or why it would not start."""
    try:
        session = await _session(stack, spec, limits)
        with anyio.fail_after(start_timeout):
            await session.initialize()
            tools = await list_tools(session)
    except TimeoutError:
        return (None, {}, f"the upstream {spec.describe()} did not answer within "
                         f"{start_timeout:g}s")
    except _START_FAILURES as error:
        return None, {}, f"the upstream {spec.describe()} did not start: {_describe(error)}"
    return session, tools, None


@asynccontextmanager
async def connect(spec: UpstreamSpec, start_timeout: float = START_TIMEOUT_SECONDS,
                  limits: UpstreamLimits | None = None) -> AsyncIterator[Upstream]:
    """Start or reach the upstream, shake hands and list its tools; ``UpstreamStartError``
    in one line when any of it fails. Closing stops a stdio upstream. Not supervised: see
    ``supervised`` for an upstream started again when it stops.

    A failure is raised only once the transport's task groups are closed, so that it
    reaches the caller as itself, not inside an exception group."""
    limits = limits or UpstreamLimits()
    failure: str | None = None
    async with AsyncExitStack() as stack:
        session, tools, failure = await _started(stack, spec, start_timeout, limits)
        if session is not None:
            yield Upstream(session, asyncio.get_running_loop(), tools, spec, limits=limits)
    if failure is not None:
        raise UpstreamStartError(failure)


class _Supervisor:
    """Keeps one upstream running (see the module docstring, "Supervision")."""

    def __init__(self, spec: UpstreamSpec, limits: UpstreamLimits, start_timeout: float,
                 log: TextIO) -> None:
        self.spec, self.limits, self.start_timeout, self.log = spec, limits, start_timeout, log
        self.upstream: Upstream | None = None
        self.stops: collections.deque[float] = collections.deque()

    def say(self, text: str) -> None:
        print(f"callgate gateway: {text}", file=self.log, flush=True)

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        while True:
            failure: str | None = None
            async with AsyncExitStack() as stack:  # entered and left in this one task
                session, tools, failure = await _started(stack, self.spec,
                                                         self.start_timeout, self.limits)
                if session is not None:
                    if self.upstream is None:
                        self.upstream = Upstream(session, asyncio.get_running_loop(), tools,
                                                 self.spec, limits=self.limits)
                        task_status.started(self.upstream)
                    else:
                        self.upstream.attach(session)
                        self.say(f"the upstream {self.spec.describe()} is running again "
                                 f"(restart {self.upstream.restarts})")
                    await self.upstream.watch()
            if self.upstream is None:  # the first start: the gateway cannot serve at all
                raise UpstreamStartError(failure or "the upstream did not start")
            self.upstream.mark_lost()
            try:
                await self.back_off(failure)
            except UpstreamGone as gone:  # the body stops its server, then raises it
                self.upstream.give_up(gone)
                return

    async def back_off(self, failure: str | None) -> None:
        now = time.monotonic()
        self.stops.append(now)
        while self.stops and now - self.stops[0] > self.limits.restart_window:
            self.stops.popleft()
        count = len(self.stops)
        why = failure or f"the upstream {self.spec.describe()} stopped"
        if count > self.limits.restarts:
            raise UpstreamGone(
                f"{why}; it stopped {count} times within {self.limits.restart_window:g}s "
                f"(more than --upstream-restarts {self.limits.restarts}): the gateway stops "
                "so that its client can start it again")
        delay = min(self.limits.restart_backoff * 2 ** (count - 1),
                    self.limits.restart_backoff_cap)
        self.say(f"{why}; starting it again in {delay:g}s ({count} of "
                 f"{self.limits.restarts} restarts within {self.limits.restart_window:g}s); "
                 "calls meanwhile answer that it is unavailable")
        await anyio.sleep(delay)


@asynccontextmanager
async def supervised(spec: UpstreamSpec, limits: UpstreamLimits | None = None, *,
                     start_timeout: float = START_TIMEOUT_SECONDS,
                     log: TextIO = sys.stderr) -> AsyncIterator[Upstream]:
    """``connect``, and keep the upstream running while the body runs: started again with
    a bounded backoff when it stops. When it keeps stopping, the supervisor gives up: the
    upstream's ``wait_given_up`` returns the ``UpstreamGone`` the body should stop with.
    ``UpstreamStartError`` when it does not start the first time."""
    supervisor = _Supervisor(spec, limits or UpstreamLimits(), start_timeout, log)
    async with anyio.create_task_group() as group:
        upstream: Upstream = await group.start(supervisor.run)
        try:
            yield upstream
        finally:
            group.cancel_scope.cancel()


def sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception an exception group of task groups stands for, if it is one."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        item = pending.pop()
        if isinstance(item, BaseExceptionGroup):
            pending.extend(item.exceptions)
        else:
            leaves.append(item)
    return leaves[0] if len(leaves) == 1 else None


async def _session(stack: AsyncExitStack, spec: UpstreamSpec,
                   limits: UpstreamLimits) -> ClientSession:
    if spec.command is not None:
        words = shlex.split(spec.command)
        parameters = StdioServerParameters(command=words[0], args=words[1:],
                                           env=spec.environment(), cwd=spec.cwd)
        read, write = await stack.enter_async_context(
            bounded_stdio(parameters, spec.errlog, limits.answer_bytes))
    else:
        assert spec.url is not None
        # the SDK bounds each server-sent event as it streams in (a JSON answer is measured
        # once read, in ``Upstream.call``)
        read, write = await stack.enter_async_context(streamable_http_client(
            spec.url, max_sse_event_size=limits.answer_bytes))
    return await stack.enter_async_context(ClientSession(read, write))


async def list_tools(session: ClientSession) -> dict[str, types.Tool]:
    """Every tool the upstream offers, page by page."""
    tools: dict[str, types.Tool] = {}
    cursor: str | None = None
    while True:
        page = await session.list_tools(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.update((tool.name, tool) for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _describe(error: BaseException) -> str:
    if isinstance(error, MCPError):
        return error.message
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}{f': {error.filename}' if error.filename else ''}"
    return str(error) or type(error).__name__


# The upstream's answers as data ------------------------------------------------------------


def dump(result: types.CallToolResult) -> dict[str, Any]:
    """A tool result as JSON (MCP wire names), as receipts keep it and rules read it:
    ``result.structuredContent.id``, ``result.content[0].text``."""
    data: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    data.pop("resultType", None)
    return data


def first_text(result: types.CallToolResult) -> str:
    for block in result.content:
        if isinstance(block, types.TextContent):
            return block.text
    return ""
