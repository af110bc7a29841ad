"""Several upstream MCP servers behind one gateway, their tools namespaced.

``callgate gateway --upstream notes="python notes_server.py" --upstream
crm=https://crm.internal/mcp`` starts (or reaches) each upstream and offers each tool as
``NAME__tool`` (``notes__createNote``, ``crm__findCustomer``): the name the contracts, the
access rules, ``reconcile.tool`` and look-up ``collection`` use. A call of
``notes__createNote`` goes to the ``notes`` upstream's ``createNote``. Each upstream is
supervised on its own (started again when it stops); when any one is given up, the
gateway stops, as with one upstream.

An upstream name is 1 to 32 letters, digits or ``-`` (no ``_``, so the separator ``__``
is never ambiguous). Resources and prompts are passed through from a single upstream
only.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Protocol, TextIO

import anyio
import mcp_types as types

from callgate_rules.gateway.upstream import (
    Upstream,
    UpstreamGone,
    UpstreamLimits,
    UpstreamSpec,
    UpstreamStartError,
    supervised,
)

SEPARATOR = "__"
_NAME = re.compile(r"^[A-Za-z0-9-]{1,32}$")


class Reachable(Protocol):
    """What the gate's bindings and the MCP server need of the upstream side: one
    ``Upstream`` or several ``Combined``."""

    @property
    def tools(self) -> Mapping[str, types.Tool]: ...

    @property
    def given_up(self) -> UpstreamGone | None: ...

    def describe(self) -> str: ...

    def call_blocking(self, tool: str, arguments: Mapping[str, Any],
                      meta: Mapping[str, Any] | None, timeout: float
                      ) -> types.CallToolResult: ...

    async def wait_given_up(self) -> UpstreamGone: ...


def check_names(names: Sequence[str]) -> None:
    for name in names:
        if not _NAME.match(name):
            raise UpstreamStartError(
                f"--upstream {name!r}: an upstream's name is 1 to 32 letters, digits or -, "
                "without _ (its tools are offered as NAME__tool)")
    repeated = sorted({name for name in names if list(names).count(name) > 1})
    if repeated:
        raise UpstreamStartError(f"--upstream {repeated[0]!r} is given more than once")


class Combined:
    """Several connected upstreams as one: tools ``NAME__tool``, calls routed by name."""

    def __init__(self, members: Mapping[str, Upstream]) -> None:
        self.members = dict(members)
        self._tools = {
            f"{name}{SEPARATOR}{tool.name}": tool.model_copy(
                update={"name": f"{name}{SEPARATOR}{tool.name}"})
            for name, upstream in self.members.items() for tool in upstream.tools.values()}

    @property
    def tools(self) -> Mapping[str, types.Tool]:
        return self._tools

    @property
    def given_up(self) -> UpstreamGone | None:
        return next((u.given_up for u in self.members.values() if u.given_up is not None),
                    None)

    def describe(self) -> str:
        return ", ".join(f"{name} ({upstream.describe()})"
                         for name, upstream in self.members.items())

    def call_blocking(self, tool: str, arguments: Mapping[str, Any],
                      meta: Mapping[str, Any] | None, timeout: float) -> types.CallToolResult:
        name, _, own = tool.partition(SEPARATOR)
        upstream = self.members.get(name)
        if upstream is None or not own:  # the gate calls only tools it found here
            raise LookupError(f"no upstream offers the tool {tool!r}")
        return upstream.call_blocking(own, arguments, meta, timeout)

    async def wait_given_up(self) -> UpstreamGone:
        """Return once any upstream is given up: the gateway stops with it."""
        gone: list[UpstreamGone] = []
        async with anyio.create_task_group() as group:
            async def watch(upstream: Upstream) -> None:
                gone.append(await upstream.wait_given_up())
                group.cancel_scope.cancel()

            for upstream in self.members.values():
                group.start_soon(watch, upstream)
        return gone[0]


@asynccontextmanager
async def supervised_all(specs: Sequence[tuple[str, UpstreamSpec]],
                         limits: UpstreamLimits | None = None, *,
                         log: TextIO) -> AsyncIterator[Combined]:
    """Each upstream started and supervised (``upstream.supervised``), as one."""
    check_names([name for name, _ in specs])
    async with AsyncExitStack() as stack:
        members = {name: await stack.enter_async_context(supervised(spec, limits, log=log))
                   for name, spec in specs}
        yield Combined(members)
