"""A write that needs a person, through the gateway: MCP elicitation (accept, decline, no
answer) and, for a client without elicitation, a reference resolved with the review
queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from callgate_rules.cli import main
from callgate_rules.store import open_store

from .conftest import (
    ACTOR_FILE,
    CLAIMS,
    DOCUMENTS,
    GATEWAY,
    REPO,
    TRANSPORTS,
    Upstream,
    connected,
    meta_of,
    text_of,
    unique,
    upstream_command,
)

pytestmark = pytest.mark.anyio


class Person:
    """An elicitation callback: answers every request with ``action`` and records it."""

    def __init__(self, action: str, approve: bool = True) -> None:
        self.action, self.approve = action, approve
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams
                       ) -> types.ElicitResult:
        self.asked.append(params)
        content = {"approve": self.approve} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


def message(text: str) -> dict[str, Any]:
    return {"to": "bo@example.com", "text": text}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_accepted_elicitation_executes_the_write_once(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    text, person = unique("accepted"), Person("accept")
    async with connected(transport, tmp_path, request, elicitation=person) as gateway:
        result = await gateway.session.call_tool("sendMessage", message(text))
        upstream = gateway.upstream
    assert not result.is_error, text_of(result)
    assert len(person.asked) == 1
    shown = person.asked[0]
    assert isinstance(shown, types.ElicitRequestFormParams)
    assert f"Send {text} to bo@example.com" in shown.message  # the draft
    assert shown.requested_schema["required"] == ["approve"]
    assert len(upstream.messages(text)) == 1
    assert result.structured_content["text"] == text


@pytest.mark.parametrize("transport,action,approve", [
    ("stdio", "decline", True), ("http", "decline", True), ("http", "cancel", True),
    ("http", "accept", False)])
async def test_a_declined_elicitation_writes_nothing(
        transport: str, action: str, approve: bool, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    text, person = unique("declined"), Person(action, approve)
    async with connected(transport, tmp_path, request, elicitation=person) as gateway:
        result = await gateway.session.call_tool("sendMessage", message(text))
        upstream = gateway.upstream
    assert result.is_error and meta_of(result)["callgate/route"] == "refuse"
    assert "nothing was written" in text_of(result)
    assert upstream.messages(text) == [] and upstream.calls("sendMessage", text=text) == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_without_elicitation_a_reference_is_resolved_with_callgate_review(
        transport: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    text, request_id = unique("referenced"), unique("r")
    meta = {"callgate/request_id": request_id}
    async with connected(transport, tmp_path, request) as gateway:
        held = await gateway.session.call_tool("sendMessage", message(text), meta=meta)
        reference = meta_of(held)["callgate/confirmation_reference"]
        assert held.is_error and f"Send {text} to bo@example.com" in text_of(held)
        assert "callgate review" not in text_of(held)  # no operator's command for the model
        again = await gateway.session.call_tool("sendMessage", message(text), meta=meta)
        assert meta_of(again)["callgate/confirmation_reference"] == reference  # one item
        assert gateway.upstream.messages(text) == []
        review = CliRunner().invoke(main, ["review", "resolve", reference, "--as",
                                           "succeeded", "--note", "ok", "--by", "alice",
                                           "--store", gateway.store])
        assert review.exit_code == 0, review.output
        done = await gateway.session.call_tool("sendMessage", message(text), meta=meta)
        upstream = gateway.upstream
    assert not done.is_error, text_of(done)
    assert len(upstream.messages(text)) == 1
    store = open_store(gateway.store)
    try:
        receipt = store.get(meta_of(done)["callgate/operation_id"])
    finally:
        store.close()
    assert receipt is not None and receipt.confirmed_by == "alice"


async def test_a_reference_declined_with_callgate_review_writes_nothing(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    text, meta = unique("refused"), {"callgate/request_id": unique("r")}
    async with connected("stdio", tmp_path, request) as gateway:
        held = await gateway.session.call_tool("sendMessage", message(text), meta=meta)
        reference = meta_of(held)["callgate/confirmation_reference"]
        CliRunner().invoke(main, ["review", "resolve", reference, "--as", "failed",
                                  "--note", "not to Bo", "--by", "alice",
                                  "--store", gateway.store])
        refused = await gateway.session.call_tool("sendMessage", message(text), meta=meta)
        upstream = gateway.upstream
    assert refused.is_error and "a person declined it" in text_of(refused)
    assert "not to Bo" not in text_of(refused)  # what an operator types never reaches it
    assert upstream.messages(text) == []


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_2026_client_confirms_through_an_input_required_round_trip(
        transport: str, action: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The high-level ``mcp.Client`` speaks the 2026-07-28 protocol: no server-to-client
    request, but an ``input_required`` answer that its retry fulfils."""
    text, person = unique(f"modern-{action}"), Person(action)
    if transport == "stdio":
        state = tmp_path / "state"
        server: Any = StdioServerParameters(command=GATEWAY[0], args=[
            *GATEWAY[1:], "--upstream-command", upstream_command(state), "--store",
            f"sqlite:///{tmp_path / 's.db'}", "--actor", str(ACTOR_FILE), *DOCUMENTS],
            cwd=str(REPO))
        async with Client(server, elicitation_callback=person) as client:
            assert client.session.protocol_version == "2026-07-28"
            result = await client.call_tool("sendMessage", message(text))
        upstream = Upstream(state)
    else:
        gateway, upstream = request.getfixturevalue("http_gateway")
        token = request.getfixturevalue("keys").token(CLAIMS)
        async with create_mcp_http_client(
                headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(gateway.url, http_client=http),
                              elicitation_callback=person) as client:
                assert client.session.protocol_version == "2026-07-28"
                result = await client.call_tool("sendMessage", message(text))
    assert len(person.asked) == 1
    assert len(upstream.messages(text)) == (1 if action == "accept" else 0)
    assert result.is_error is (action != "accept")
