"""The gateway end to end, over stdio and streamable HTTP: what clients are offered, what a
call does at the upstream (how many writes), and what the client is answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from callgate_rules.store import ReviewStatus, open_store

from .conftest import TRANSPORTS, connected, meta_of, text_of, unique

pytestmark = pytest.mark.anyio


def note(title: str, notebook: str = "NB-1") -> dict[str, Any]:
    return {"notebookId": notebook, "title": title}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_lists_only_contracted_tools_with_their_annotations(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async with connected(transport, tmp_path, request) as gateway:
        listed = {tool.name: tool for tool in (await gateway.session.list_tools()).tools}
    assert sorted(listed) == ["createNote", "getNotebook", "sendMessage"]  # no deleteEverything
    create, read = listed["createNote"], listed["getNotebook"]
    assert create.description == "Create a note in one of your notebooks."
    assert create.input_schema["additionalProperties"] is False
    assert create.input_schema["properties"]["notebookId"]["pattern"] == "^NB-[0-9]+$"
    assert create.annotations == types.ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True)
    assert read.annotations == types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_allowed_write_calls_the_upstream_once_and_passes_its_result(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    title = unique("allowed")
    async with connected(transport, tmp_path, request) as gateway:
        result = await gateway.session.call_tool(
            "createNote", note(title), meta={"callgate/request_id": unique("r")})
        upstream = gateway.upstream
    assert not result.is_error
    written = upstream.notes(title)
    assert len(written) == 1 and len(upstream.calls("createNote", title=title)) == 1
    assert result.structured_content == written[0]  # the upstream's own answer
    meta = meta_of(result)
    assert meta["callgate/route"] == "return_result"
    # the operation ID reached the upstream in the call's _meta, as its idempotency key
    assert written[0]["operation_id"] == meta["callgate/operation_id"]
    assert upstream.calls("createNote", title=title)[0]["meta"] == {
        "callgate/operation_id": meta["callgate/operation_id"]}


@pytest.mark.parametrize("transport", ["http"])  # stdio: the same server code
async def test_a_forbidden_call_never_reaches_the_upstream_tool(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    title = unique("forbidden")
    async with connected(transport, tmp_path, request) as gateway:
        result = await gateway.session.call_tool("createNote", note(title, "NB-2"))
        upstream = gateway.upstream
    assert result.is_error
    assert meta_of(result)["callgate/error_class"] == "forbidden"
    assert "No getNotebook record that you can access" in text_of(result)
    assert upstream.calls("createNote", title=title) == [] and upstream.notes(title) == []


@pytest.mark.parametrize("transport", ["http"])  # stdio: the same server code
async def test_an_unknown_or_hidden_tool_is_refused(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async with connected(transport, tmp_path, request) as gateway:
        hidden = await gateway.session.call_tool("deleteEverything", {})
        unknown = await gateway.session.call_tool("noSuchTool", {"x": 1})
        upstream = gateway.upstream
    for result in (hidden, unknown):
        assert result.is_error and meta_of(result)["callgate/error_class"] == "unknown_tool"
        assert "Available tools: createNote, getNotebook, sendMessage" in text_of(result)
    assert upstream.calls("deleteEverything") == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_lost_answer_is_reconciled_through_the_lookup_tool(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    title = unique("lost")
    async with connected(transport, tmp_path, request) as gateway:
        gateway.upstream.drop_next_answer("sleep")  # applied, answered past the timeout
        result = await gateway.session.call_tool(
            "createNote", note(title), meta={"callgate/request_id": unique("r")})
        upstream = gateway.upstream
    assert not result.is_error, text_of(result)
    assert meta_of(result)["callgate/route"] == "return_result"
    written = upstream.notes(title)
    assert len(written) == 1 and len(upstream.calls("createNote", title=title)) == 1
    operation_id = meta_of(result)["callgate/operation_id"]
    asked = [c for c in upstream.calls("findNote")
             if c["arguments"] == {"operation_id": operation_id}]
    assert len(asked) == 1  # reconciled by asking, never by writing again
    assert result.structured_content == written[0]  # the look-up's answer: the note


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_resent_call_gets_the_receipt_and_a_new_request_writes_again(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    title, request_id = unique("resent"), unique("r")
    async with connected(transport, tmp_path, request) as gateway:
        session = gateway.session
        first = await session.call_tool("createNote", note(title),
                                        meta={"callgate/request_id": request_id})
        again = await session.call_tool("createNote", note(title),
                                        meta={"callgate/request_id": request_id})
        assert len(gateway.upstream.notes(title)) == 1
        new = await session.call_tool("createNote", note(title),
                                      meta={"callgate/request_id": unique("r")})
        upstream = gateway.upstream
    assert meta_of(again)["callgate/route"] == "return_receipt"
    assert again.structured_content == first.structured_content
    assert meta_of(new)["callgate/route"] == "return_result"
    assert len(upstream.notes(title)) == 2


async def test_without_a_request_id_each_tools_call_is_an_operation(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    title = unique("session")
    async with connected("stdio", tmp_path, request) as gateway:
        first = await gateway.session.call_tool("createNote", note(title))
        again = await gateway.session.call_tool("createNote", note(title))
    async with connected("stdio", tmp_path, request) as gateway:
        other_session = await gateway.session.call_tool("createNote", note(title))
        upstream = gateway.upstream
    assert meta_of(again)["callgate/route"] == "return_result"
    assert meta_of(again)["callgate/operation_id"] != meta_of(first)["callgate/operation_id"]
    assert meta_of(other_session)["callgate/route"] == "return_result"
    assert len(upstream.notes(title)) == 3


async def test_an_upstream_that_dies_mid_call_is_a_classified_route(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    title = unique("died")
    async with connected("stdio", tmp_path, request) as gateway:
        gateway.upstream.drop_next_answer("die")
        with anyio.fail_after(30):  # never a hung client
            died = await gateway.session.call_tool("createNote", note(title))
            after = await gateway.session.call_tool("createNote", note(unique("after")))
        upstream = gateway.upstream
    assert died.is_error and meta_of(died)["callgate/route"] == "review"
    assert len(upstream.notes(title)) == 1  # it was applied, and never sent again
    assert after.is_error  # nothing can be sent any more, and the client hears so
    store = open_store(gateway.store)
    try:
        reviews = [i for i in store.list_reviews() if i.operation_id ==
                   meta_of(died)["callgate/operation_id"]]
    finally:
        store.close()
    assert reviews and reviews[0].status == ReviewStatus.OPEN


@pytest.mark.parametrize("transport", ["http"])  # stdio: the same server code
async def test_an_upstream_error_answer_is_mapped_by_the_contract(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async with connected(transport, tmp_path, request) as gateway:
        result = await gateway.session.call_tool("createNote", note("refuse me"))
    assert result.is_error
    assert meta_of(result)["callgate/error_class"] == "conflict"  # errors: code full


@pytest.mark.parametrize("transport", ["http"])  # stdio: the same server code
async def test_conversation_in_meta_gives_provenance(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async with connected(transport, tmp_path, request) as gateway:
        result = await gateway.session.call_tool(
            "getNotebook", {"id": "NB-1"},
            meta={"callgate/conversation": [{"role": "user", "content": "Open NB-1 please"}]})
    assert not result.is_error and result.structured_content["id"] == "NB-1"
