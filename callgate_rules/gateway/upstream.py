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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shlex
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
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
from callgate_rules.taxonomy import ErrorClass

START_TIMEOUT_SECONDS = 30.0
# The request never ran: the upstream refused its form, not its content.
_NEVER_RAN = frozenset({types.PARSE_ERROR, types.INVALID_REQUEST, types.METHOD_NOT_FOUND,
                        types.INVALID_PARAMS})
# Past its own timeout, a blocked caller waits this much longer for the loop to say so.
_LOOP_GRACE_SECONDS = 2.0


class UpstreamStartError(CallgateError):
    """The upstream would not start, answer the handshake, or list its tools."""


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
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    errlog: TextIO = field(default=sys.stderr, compare=False)

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise UpstreamStartError("give the upstream as exactly one of a command "
                                     "(--upstream-command) or a URL (--upstream-url)")
        if self.command is not None and not shlex.split(self.command):
            raise UpstreamStartError("--upstream-command is empty")

    def describe(self) -> str:
        return f"command `{self.command}`" if self.command is not None else f"at {self.url}"


@dataclass
class Upstream:
    """A connected upstream: its session, the loop it lives on, and its tools by name."""

    session: ClientSession
    loop: asyncio.AbstractEventLoop
    tools: dict[str, types.Tool]
    spec: UpstreamSpec
    lost: bool = False  # the connection broke; nothing can be sent any more

    async def call(self, tool: str, arguments: Mapping[str, Any],
                   meta: Mapping[str, Any] | None, timeout: float) -> types.CallToolResult:
        """Call ``tool`` on the loop; a failure raised as one of the classes above."""
        if self.lost:
            raise Unavailable(f"the upstream {self.spec.describe()} is gone; nothing was sent")
        try:
            with anyio.fail_after(max(timeout, 0.0)):
                return await self.session.call_tool(
                    tool, dict(arguments), read_timeout_seconds=max(timeout, 0.001),
                    meta=dict(meta) if meta else None)  # type: ignore[arg-type]
        except TimeoutError:
            raise OutcomeTimeout(f"no answer from the upstream within {timeout:g}s") from None
        except MCPError as error:
            raise self._classified(error) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            self.lost = True
            raise ConnectionLost(f"the connection to the upstream {self.spec.describe()} "
                                 "broke") from None

    def _classified(self, error: MCPError) -> ToolError:
        if error.code == types.CONNECTION_CLOSED:
            self.lost = True
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


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return getattr(loop, "_thread_id", None) == threading.get_ident()


@asynccontextmanager
async def connect(spec: UpstreamSpec,
                  start_timeout: float = START_TIMEOUT_SECONDS) -> AsyncIterator[Upstream]:
    """Start or reach the upstream, shake hands and list its tools; ``UpstreamStartError``
    in one line when any of it fails. Closing stops a stdio upstream.

    A failure is raised only once the transport's task groups are closed, so that it
    reaches the caller as itself, not inside an exception group."""
    failure: UpstreamStartError | None = None
    async with AsyncExitStack() as stack:
        try:
            session = await _session(stack, spec)
            with anyio.fail_after(start_timeout):
                await session.initialize()
                tools = await list_tools(session)
        except TimeoutError:
            failure = UpstreamStartError(f"the upstream {spec.describe()} did not answer "
                                         f"within {start_timeout:g}s")
        except (OSError, MCPError, ValueError, RuntimeError, anyio.BrokenResourceError,
                anyio.ClosedResourceError, anyio.EndOfStream) as error:
            failure = UpstreamStartError(f"the upstream {spec.describe()} did not start: "
                                         f"{_describe(error)}")
        if failure is None:
            yield Upstream(session, asyncio.get_running_loop(), tools, spec)
    if failure is not None:
        raise failure


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


async def _session(stack: AsyncExitStack, spec: UpstreamSpec) -> ClientSession:
    if spec.command is not None:
        words = shlex.split(spec.command)
        parameters = StdioServerParameters(command=words[0], args=words[1:],
                                           env=dict(spec.env) if spec.env else None,
                                           cwd=spec.cwd)
        read, write = await stack.enter_async_context(stdio_client(parameters, spec.errlog))
    else:
        assert spec.url is not None
        read, write = await stack.enter_async_context(streamable_http_client(spec.url))
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
