"""An upstream answer over the gateway's bound ends in an error class of its own,
``answer_too_large``, that spends nothing of the run's failure budget (issue #37, item 6).

The real ``callgate gateway`` process runs in front of a real upstream MCP server (an
archive service written below, started by the gateway over stdio) and behind the real MCP
SDK client. The upstream answers as many bytes as a file in its state folder says:

- a **read** answered with 40 MB ends ``answer_too_large``, routed ``replan`` (the
  taxonomy's default), promptly, with nothing of the answer in the model's text;
- a **write** answered with too much ran once and is handed to a person: route ``review``,
  class ``answer_too_large``, its receipt in review, never sent again, the review item
  saying none of the upstream's words;
- the run's failure budget is untouched: with ``failures_per_run: 2``, four oversized
  answers in one run leave the next call free to run, and two real failures (the upstream
  answering ``isError``) then do use it up — the counter counts, it just does not count
  these;
- the session stays usable: the next call in the same session succeeds at once.

(Before: the gateway matched its decision log's text and took one back from the run's
failure counter after the fact; a write ended ``unknown_outcome``, a read ``permanent``.)
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from callgate_rules.store import open_store

from .conftest import ACTOR_FILE, GATEWAY, PYTHON, REPO, meta_of, text_of, unique

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

LIMIT = 1024 * 1024  # --upstream-answer-limit: 1 MiB
FORTY_MB = 40 * 1024 * 1024

ARCHIVE_UPSTREAM = '''\
"""An archive service whose answers are as long as files in its state folder say."""
import asyncio, json, sys, uuid
from pathlib import Path

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

STATE = Path(sys.argv[1])
OBJECT = {"type": "object", "properties": {"folderId": {"type": "string"},
                                           "id": {"type": "string"},
                                           "operation_id": {"type": "string"}}}
TOOLS = [types.Tool(name=name, description=name, input_schema=OBJECT)
         for name in ("search", "archive", "findArchive", "folder")]


def size(name):
    path = STATE / name
    return int(path.read_text()) if path.exists() else 0


def text(data, padded_to):
    body = json.dumps(data)
    return types.CallToolResult(content=[types.TextContent(text=body + " " * max(
        padded_to - len(body), 0))])


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    arguments = params.arguments or {}
    operation_id = (params.meta or {}).get("callgate/operation_id")
    if params.name == "search":
        if (STATE / "refuse").exists():
            return types.CallToolResult(content=[types.TextContent(text="no")], is_error=True)
        return text({"hits": ["a", "b"]}, size("search"))
    if params.name == "archive":
        with (STATE / "archived.jsonl").open("a") as out:
            out.write(json.dumps({"folderId": arguments.get("folderId"),
                                  "operation_id": operation_id}) + "\\n")
        return text({"id": uuid.uuid4().hex[:8], "folderId": arguments.get("folderId")},
                    size("archive"))
    if params.name == "findArchive":
        return text({}, 0)
    if params.name == "folder":  # the archive contract's look-up
        return text([{"id": arguments.get("id"), "owner": "U-1"}], size("folder"))
    return types.CallToolResult(content=[types.TextContent(text="no such tool")],
                                is_error=True)


async def main():
    STATE.mkdir(parents=True, exist_ok=True)
    server = Server("archive", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


asyncio.run(main())
'''

DOCUMENTS = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: search, version: "1", owner: t@example.com, description: Search.}
spec:
  effect: read
  timeout: 20s
  arguments: {type: object, properties: {}}
  examples: [{arguments: {}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: archive, version: "1", owner: t@example.com, description: Archive a folder.}
spec:
  effect: write
  idempotency: key
  timeout: 20s
  arguments: {type: object, required: [folderId], properties: {folderId: {type: string}}}
  lookups: [{name: folder, collection: folder, key: args.folderId}]
  reconcile: {tool: findArchive, argument: operation_id}
  examples: [{arguments: {folderId: F-1}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: archive-access, version: "1", owner: t@example.com, description: Anyone.}
spec:
  rules: [{name: anyone, effect: allow, tools: [search, archive], when: "true"}]
---
apiVersion: callgate/v1
kind: RoutingTable
metadata: {name: archive-routing, version: "1", owner: t@example.com, description: Two failures.}
spec:
  routes: {transient: retry, unknown_outcome: reconcile, permanent: refuse}
  budgets: {failures_per_run: 2, calls_per_tool_per_run: 50, retries_per_call: 0}
"""


@asynccontextmanager
async def archive_gateway(tmp: Path) -> AsyncIterator[tuple[ClientSession, Path, str]]:
    state = tmp / "state"
    upstream = tmp / "archive_upstream.py"
    upstream.write_text(ARCHIVE_UPSTREAM)
    (tmp / "documents").mkdir()
    (tmp / "documents" / "archive.yaml").write_text(DOCUMENTS)
    store = f"sqlite:///{tmp / 'gateway.sqlite3'}"
    parameters = StdioServerParameters(command=GATEWAY[0], args=[
        *GATEWAY[1:], "--upstream-command", f"{PYTHON} {upstream} {state}",
        "--upstream-answer-limit", str(LIMIT), "--store", store,
        "--actor", str(ACTOR_FILE), str(tmp / "documents")], cwd=str(REPO))
    with (tmp / "gateway.log").open("a") as errlog:
        async with stdio_client(parameters, errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session, state, store


def answers(state: Path, tool: str, size: int) -> None:
    (state / tool).write_text(str(size))


async def call(session: ClientSession, tool: str, run: str, **arguments: Any) -> Any:
    return await session.call_tool(tool, arguments, meta={
        "callgate/run_id": run, "callgate/request_id": unique("r")})


async def test_oversized_answers_have_their_own_class_and_spend_no_failures(
        tmp_path: Path) -> None:
    run = f"run-{uuid.uuid4().hex[:8]}"
    async with archive_gateway(tmp_path) as (session, state, store_url):
        # a read: 40 MB, refused as it streams in, its own class, the taxonomy's route
        answers(state, "search", FORTY_MB)
        started = time.monotonic()
        oversized = await call(session, "search", run)
        took = time.monotonic() - started
        assert oversized.is_error
        assert meta_of(oversized)["callgate/error_class"] == "answer_too_large"
        assert meta_of(oversized)["callgate/route"] == "replan"
        assert "callgate/review_id" not in meta_of(oversized)  # nobody has to act on a read
        assert "more data than the gate reads" in text_of(oversized)
        assert '"hits"' not in text_of(oversized) and " " * 1000 not in text_of(oversized)
        assert took < 20  # well within the contract's timeout: refused, not timed out

        # two more oversized reads in the same run: the run allows two failures
        answers(state, "search", 2 * LIMIT)
        for _ in range(2):
            again = await call(session, "search", run)
            assert meta_of(again)["callgate/error_class"] == "answer_too_large"

        # a write answered with too much: it ran once, a person checks it
        answers(state, "archive", 2 * LIMIT)
        request = {"callgate/run_id": run, "callgate/request_id": unique("w")}
        written = await session.call_tool("archive", {"folderId": "F-1"}, meta=request)
        meta = meta_of(written)
        assert meta["callgate/error_class"] == "answer_too_large", text_of(written)
        assert meta["callgate/route"] == "review"
        review_id = meta["callgate/review_id"]
        operation_id = meta["callgate/operation_id"]
        archived = [json.loads(line) for line in
                    (state / "archived.jsonl").read_text().splitlines()]
        assert [entry["operation_id"] for entry in archived] == [operation_id]
        # the same call of the same request is not sent again while a person checks it
        repeated = await session.call_tool("archive", {"folderId": "F-1"}, meta=request)
        assert meta_of(repeated)["callgate/route"] == "review"
        assert len((state / "archived.jsonl").read_text().splitlines()) == 1

        # four oversized answers in a run that allows two failures: the next call runs
        answers(state, "search", 16)
        fine = await call(session, "search", run)
        assert not fine.is_error, text_of(fine)
        assert '"hits"' in text_of(fine)

        # the counter still counts real failures: two refusals use the budget up
        (state / "refuse").write_text("")
        for _ in range(2):
            refused = await call(session, "search", run)
            assert meta_of(refused)["callgate/error_class"] == "permanent"
        (state / "refuse").unlink()
        spent = await call(session, "search", run)
        assert meta_of(spent)["callgate/error_class"] == "budget_exhausted", text_of(spent)

        # the session stays usable: a call of a new run answers at once
        started = time.monotonic()
        other = await call(session, "search", f"run-{uuid.uuid4().hex[:8]}")
        assert not other.is_error and time.monotonic() - started < 5

    store = open_store(store_url)
    try:
        receipt = store.get(operation_id)
        assert receipt is not None
        assert str(receipt.state) == "in_review"
        assert receipt.error_class == "answer_too_large"
        item = next(item for item in store.list_reviews() if item.review_id == review_id)
        assert item.reason == "answer_too_large"
        # the person is told what happened in the gate's words, not the upstream's
        assert "check at the destination" in item.summary
        assert "--upstream-answer-limit" not in item.summary
        assert "--upstream-answer-limit" in (receipt.detail or "")  # the log's words
    finally:
        store.close()


async def test_an_oversized_look_up_answer_has_its_own_class_too(tmp_path: Path) -> None:
    run = f"run-{uuid.uuid4().hex[:8]}"
    async with archive_gateway(tmp_path) as (session, state, _):
        answers(state, "folder", 2 * LIMIT)
        # more oversized look-ups than the run's two failures
        looked_up = [await call(session, "archive", run, folderId="F-9") for _ in range(3)]
        answers(state, "folder", 16)
        fine = await call(session, "archive", run, folderId="F-9")
        written = (state / "archived.jsonl").read_text().splitlines() \
            if (state / "archived.jsonl").exists() else []
    # checked once the session is closed, so that a failure is itself, not a task group's
    assert [meta_of(answer)["callgate/error_class"] for answer in looked_up] == \
        ["answer_too_large"] * 3, [text_of(answer) for answer in looked_up]
    assert not fine.is_error, text_of(fine)
    assert len(written) == 1  # only the call whose look-up answered in bounds wrote
    # the model hears that nothing ran, never that the tool answered
    assert all("Nothing was done" in text_of(answer) for answer in looked_up)
