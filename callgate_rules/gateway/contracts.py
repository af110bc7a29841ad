"""``callgate init --from-mcp``: draft documents from an MCP server's ``tools/list``.

For each tool a ToolContract drafted as ``authoring/scaffold.py`` drafts any tool list: its
name and description, its input schema tightened with ``additionalProperties: false``, an
example made from the schema; the effect comes from ``readOnlyHint`` (a tool that does not
say it only reads is a write: the careful reading); the tool's ``outputSchema``, when it
has one, is kept as ``spec.result``, so that lint checks the fields a ``verify`` reads.
What only a person can decide is marked ``FILL-IN`` where the document schema rejects it,
so ``callgate lint`` points at each place (file, line, column) until it is filled: a
write's ``idempotency``, and an example
value the schema alone cannot make (a ``pattern``). Beside them, ``policies/access.yaml``:
an AccessPolicy with an actor schema to complete and no allow rule, so every call is
denied until the owner writes one.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types

from callgate_rules.authoring.scaffold import MARK, ToolDefinition, draft_from_tools
from callgate_rules.gateway.upstream import UpstreamSpec, connect


def draft_from_mcp(directory: Path, *, command: str | None = None, url: str | None = None,
                   owner: str = f"{MARK}@example.com", force: bool = False) -> list[Path]:
    """Write the drafts for the MCP server at ``command`` or ``url`` under ``directory``;
    the paths written. Nothing is written when a file is there already, unless ``force``."""
    tools = anyio.run(_tools, UpstreamSpec(command=command, url=url))
    return draft_from_tools(directory, [definition(tool) for tool in tools],
                            source="--from-mcp", owner=owner, force=force)


async def _tools(spec: UpstreamSpec) -> list[types.Tool]:
    async with connect(spec) as upstream:
        return [upstream.tools[name] for name in sorted(upstream.tools)]


def definition(tool: types.Tool) -> ToolDefinition:
    """An MCP tool as a tool definition: absent or false ``readOnlyHint`` is a write."""
    annotations = tool.annotations
    return ToolDefinition(tool.name, tool.description,
                          tool.input_schema or {"type": "object"},
                          read_only=bool(annotations and annotations.read_only_hint),
                          output_schema=tool.output_schema)
