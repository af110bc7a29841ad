"""The upstream's resources and prompts, passed through read-only under an allow-list.

Tools go through the gate; resources and prompts are read-only in MCP, so the gateway
only chooses which of them a client may see. By default it passes none (the methods
answer ``-32601``, as before). ``--pass-resource PATTERN`` and ``--pass-prompt PATTERN``
(each repeatable; shell-style patterns such as ``notes://*`` or ``summar*``) allow the
upstream resources whose URI, and the prompts whose name, match one of them:

- ``resources/list`` and ``prompts/list`` list only the allowed ones;
- ``resources/templates/list`` lists the templates whose URI template matches;
- ``resources/read`` of a URI no pattern allows, and ``prompts/get`` of a prompt no pattern
  allows, are refused (``-32602``) and never reach the upstream.

Every read and every prompt fetched is logged (one line on the gateway's log: the caller's
principal, the URI or prompt name, allowed or refused). Subscriptions are not passed.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from callgate_rules.gateway.upstream import Upstream


@dataclass(frozen=True)
class PassThrough:
    """Which upstream resources (by URI) and prompts (by name) clients may read."""

    resources: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()

    def allows_resource(self, uri: str) -> bool:
        return any(fnmatch.fnmatchcase(uri, pattern) for pattern in self.resources)

    def allows_prompt(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.prompts)


@dataclass
class PassedThrough:
    """The MCP handlers of the allowed resources and prompts, over one upstream."""

    allowed: PassThrough
    upstream: Callable[[], Upstream]
    who: Callable[[ServerRequestContext[Any, Any]], str]
    log: TextIO = field(default=sys.stderr, compare=False)

    def handlers(self) -> dict[str, Any]:
        """The ``Server(...)`` keyword arguments of what is allowed (none: nothing)."""
        found: dict[str, Any] = {}
        if self.allowed.resources:
            found.update(on_list_resources=self.list_resources,
                         on_list_resource_templates=self.list_resource_templates,
                         on_read_resource=self.read_resource)
        if self.allowed.prompts:
            found.update(on_list_prompts=self.list_prompts, on_get_prompt=self.get_prompt)
        return found

    def _say(self, ctx: ServerRequestContext[Any, Any], what: str) -> None:
        print(f"callgate gateway: {self.who(ctx)} {what}", file=self.log, flush=True)

    async def list_resources(self, ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        listed = await self.upstream().session.list_resources(params=params)
        return types.ListResourcesResult(
            resources=[r for r in listed.resources if self.allowed.allows_resource(str(r.uri))],
            next_cursor=listed.next_cursor)

    async def list_resource_templates(self, ctx: ServerRequestContext[Any, Any],
                                      params: types.PaginatedRequestParams | None
                                      ) -> types.ListResourceTemplatesResult:
        listed = await self.upstream().session.list_resource_templates(params=params)
        return types.ListResourceTemplatesResult(
            resource_templates=[t for t in listed.resource_templates
                                if self.allowed.allows_resource(t.uri_template)],
            next_cursor=listed.next_cursor)

    async def read_resource(self, ctx: ServerRequestContext[Any, Any],
                            params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if not self.allowed.allows_resource(uri):
            self._say(ctx, f"refused resources/read {uri} (not in --pass-resource)")
            raise MCPError(types.INVALID_PARAMS, f"the resource {uri} is not available "
                                                 "through this gateway")
        self._say(ctx, f"read resource {uri}")
        answer = await self.upstream().session.read_resource(uri)
        if not isinstance(answer, types.ReadResourceResult):  # asked for input: not passed
            raise MCPError(types.INVALID_PARAMS, f"the resource {uri} asks for input, which "
                                                 "this gateway does not pass")
        return answer

    async def list_prompts(self, ctx: ServerRequestContext[Any, Any],
                           params: types.PaginatedRequestParams | None
                           ) -> types.ListPromptsResult:
        listed = await self.upstream().session.list_prompts(params=params)
        return types.ListPromptsResult(
            prompts=[p for p in listed.prompts if self.allowed.allows_prompt(p.name)],
            next_cursor=listed.next_cursor)

    async def get_prompt(self, ctx: ServerRequestContext[Any, Any],
                         params: types.GetPromptRequestParams) -> types.GetPromptResult:
        name = params.name
        if not self.allowed.allows_prompt(name):
            self._say(ctx, f"refused prompts/get {name} (not in --pass-prompt)")
            raise MCPError(types.INVALID_PARAMS, f"the prompt {name} is not available "
                                                 "through this gateway")
        self._say(ctx, f"got prompt {name}")
        answer = await self.upstream().session.get_prompt(name, params.arguments)
        if not isinstance(answer, types.GetPromptResult):
            raise MCPError(types.INVALID_PARAMS, f"the prompt {name} asks for input, which "
                                                 "this gateway does not pass")
        return answer
