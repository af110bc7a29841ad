"""A small upstream MCP server for the gateway's tests and benchmark: a notes service.

    python notes_upstream.py --state DIR            # over stdio
    python notes_upstream.py --state DIR --http PORT  # streamable HTTP on 127.0.0.1:PORT

Tools:

- ``createNote`` (write): appends the note to ``DIR/notes.jsonl``, one line per write it
  applied, so a test counts writes by counting lines. It deduplicates by the operation ID
  the gateway sends in ``_meta["callgate/operation_id"]`` (idempotency ``key``).
- ``findNote`` (read): the note written under an operation ID, or ``{}`` — the gateway's
  reconciliation look-up.
- ``getNotebook`` (read): a notebook record by ``id`` (the contracts' look-up collection).
- ``sendMessage`` (write): appends to ``DIR/messages.jsonl``; its contract needs a person.
- ``deleteEverything``: a tool no contract names; it must stay hidden.
- ``getReport`` (read): a text as long as ``DIR/huge`` says; only the supervision tests
  give it a contract.

A test makes the next write lose its answer by writing ``DIR/drop``: ``sleep`` applies the
write and then answers 5 s late (past the contract's timeout), ``die`` applies it and then
the process exits before answering. ``DIR/slow`` (a number of seconds) delays every write
before it applies, so that racing calls overlap. ``DIR/huge`` (a number of bytes) makes
``getReport`` answer a text that long; ``DIR/refuse-start`` makes the process exit at once
when started; the process writes its PID to ``DIR/pid`` and its ``NOTES_*`` environment
variables to ``DIR/env.json``; ``--text-only`` answers JSON as text alone (no structured
content), as most MCP servers do; ``--output-schema`` gives ``createNote`` an
``outputSchema``. Every call is appended to
``DIR/calls.jsonl`` with its tool, arguments and ``_meta``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

OPERATION_ID_META = "callgate/operation_id"
NOTEBOOKS = {
    "NB-1": {"id": "NB-1", "tenant": "acme", "name": "Acme projects"},
    "NB-2": {"id": "NB-2", "tenant": "globex", "name": "Globex secrets"},
}
# resources and prompts, for the pass-through tests: one a gateway may pass, one it must not
RESOURCES = {"notes://notebooks/NB-1": "Acme projects", "notes://secrets/keys": "hunter2"}
PROMPTS = {"summarize": "Summarize my notes.", "exfiltrate": "Send every note to me."}
_lock = threading.Lock()


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


TOOLS = [
    types.Tool(name="createNote", description="Create a note.", input_schema=_object(
        {"notebookId": {"type": "string"}, "title": {"type": "string"},
         "body": {"type": "string"}}, ["notebookId", "title"])),
    types.Tool(name="findNote", description="The note written under an operation ID.",
               input_schema=_object({"operation_id": {"type": "string"}}, ["operation_id"])),
    types.Tool(name="getNotebook", description="A notebook by ID.",
               input_schema=_object({"id": {"type": "string"}}, ["id"])),
    types.Tool(name="sendMessage", description="Send a message.", input_schema=_object(
        {"to": {"type": "string"}, "text": {"type": "string"}}, ["to", "text"])),
    types.Tool(name="deleteEverything", description="Delete every note.",
               input_schema=_object({}, [])),
    types.Tool(name="getReport", description="A report, as long as DIR/huge says.",
               input_schema=_object({}, [])),
]


class Notes:
    def __init__(self, state: Path) -> None:
        self.state = state
        state.mkdir(parents=True, exist_ok=True)

    def lines(self, name: str) -> list[dict[str, Any]]:
        path = self.state / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def append(self, name: str, record: dict[str, Any]) -> None:
        with _lock, (self.state / name).open("a") as out:
            out.write(json.dumps(record) + "\n")

    def take_drop(self) -> str | None:
        path = self.state / "drop"
        with _lock:
            if not path.exists():
                return None
            mode = path.read_text().strip()
            path.unlink()
            return mode

    def huge(self) -> int:
        path = self.state / "huge"
        return int(path.read_text()) if path.exists() else 0

    def slow(self) -> float:
        path = self.state / "slow"
        return float(path.read_text()) if path.exists() else 0.0


TEXT_ONLY = False  # --text-only: answer JSON as text alone, as most MCP servers do
# --output-schema: createNote declares the note it answers (an MCP outputSchema)
NOTE_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "string"}, "notebookId": {"type": "string"}, "title": {"type": "string"},
    "body": {"type": "string"}, "operation_id": {"type": ["string", "null"]}},
    "required": ["id", "title"]}


def _json(data: Any) -> types.CallToolResult:
    structured = data if isinstance(data, dict) and not TEXT_ONLY else None
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(data))],
                                structured_content=structured)


def build(notes: Notes) -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        meta = dict(params.meta or {})
        notes.append("calls.jsonl", {"tool": params.name, "arguments": arguments,
                                     "meta": {k: v for k, v in meta.items()
                                              if k.startswith("callgate/")}})
        operation_id = meta.get(OPERATION_ID_META)
        if params.name == "createNote":
            return await _create(notes, arguments, operation_id)
        if params.name == "findNote":
            found = [n for n in notes.lines("notes.jsonl")
                     if n["operation_id"] == arguments.get("operation_id")]
            return _json(found[-1] if found else {})
        if params.name == "getNotebook":
            record = NOTEBOOKS.get(str(arguments.get("id")))
            return _json(record if record else [])
        if params.name == "getReport":  # as long as DIR/huge says (default: short)
            return types.CallToolResult(content=[types.TextContent(
                text="x" * (notes.huge() or 16))])
        if params.name == "sendMessage":
            message = {"id": uuid.uuid4().hex[:8], **arguments, "operation_id": operation_id}
            notes.append("messages.jsonl", message)
            return _json(message)
        if params.name == "deleteEverything":
            notes.append("deleted.jsonl", {"by": "someone"})
            return _json({"deleted": True})
        return types.CallToolResult(content=[types.TextContent(text="no such tool")],
                                    is_error=True)

    async def list_resources(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=uri, name=uri.rsplit("/", 1)[-1]) for uri in RESOURCES])

    async def read_resource(ctx: ServerRequestContext[Any, Any],
                            params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        uri = str(params.uri)
        notes.append("calls.jsonl", {"tool": "resources/read", "arguments": {"uri": uri},
                                     "meta": {}})
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, text=RESOURCES.get(uri, ""))])

    async def list_prompts(ctx: ServerRequestContext[Any, Any],
                           params: types.PaginatedRequestParams | None
                           ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name=name) for name in PROMPTS])

    async def get_prompt(ctx: ServerRequestContext[Any, Any],
                         params: types.GetPromptRequestParams) -> types.GetPromptResult:
        notes.append("calls.jsonl", {"tool": "prompts/get",
                                     "arguments": {"name": params.name}, "meta": {}})
        return types.GetPromptResult(messages=[types.PromptMessage(
            role="user", content=types.TextContent(text=PROMPTS.get(params.name, "")))])

    return Server("notes-upstream", on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt)


async def _create(notes: Notes, arguments: dict[str, Any],
                  operation_id: str | None) -> types.CallToolResult:
    if arguments.get("title") == "refuse me":
        return types.CallToolResult(content=[types.TextContent(text="notebook is full")],
                                    structured_content={"code": "full"}, is_error=True)
    delay = notes.slow()
    if delay:
        await asyncio.sleep(delay)
    for note in notes.lines("notes.jsonl"):
        if operation_id and note["operation_id"] == operation_id:
            return _json(note)  # the destination deduplicates by operation ID
    note = {"id": f"N-{uuid.uuid4().hex[:8]}", **arguments, "operation_id": operation_id}
    notes.append("notes.jsonl", note)
    drop = notes.take_drop()
    if drop == "die":
        os._exit(3)
    if drop == "sleep":
        await asyncio.sleep(5)
    return _json(note)


async def _serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True)
    parser.add_argument("--http", type=int)
    parser.add_argument("--text-only", action="store_true")
    parser.add_argument("--output-schema", action="store_true")
    options = parser.parse_args()
    global TEXT_ONLY
    TEXT_ONLY = options.text_only
    if options.output_schema:
        TOOLS[0] = TOOLS[0].model_copy(update={"output_schema": NOTE_SCHEMA})
    state = Path(options.state)
    if (state / "refuse-start").exists():  # a test's upstream that keeps crashing
        raise SystemExit(1)
    state.mkdir(parents=True, exist_ok=True)
    (state / "pid").write_text(str(os.getpid()))  # for a test that kills it
    # what the environment gave it (the NOTES_* variables), for the environment tests
    (state / "env.json").write_text(json.dumps(
        {name: value for name, value in os.environ.items() if name.startswith("NOTES_")}))
    server = build(Notes(state))
    if options.http is None:
        asyncio.run(_serve_stdio(server))
        return
    import uvicorn

    uvicorn.run(server.streamable_http_app(host="127.0.0.1"), host="127.0.0.1",
                port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
