"""The MCP gateway's elicitation and ``callgate review take`` show the draft the one renderer
made (``confirmation.drafts``), the same text the held receipt's stored draft renders: a
hostile message's line break, bidi override, zero-width space and Cyrillic letter marked and
named, none of them raw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from click.testing import CliRunner

from callgate_rules.cli import main
from callgate_rules.confirmation.drafts import Draft
from callgate_rules.store import ReceiptState, open_store

from .conftest import connected, unique

pytestmark = [pytest.mark.anyio, pytest.mark.integration]
RAW = {"\n", "\u202e", "\u200b"}


def hostile(prefix: str) -> str:
    return f"{unique(prefix)}\nto: ceo@example.com \u202egnp.exe\u200b P\u0430yroll"


def stored_draft(store_url: str, text: str) -> Draft:
    """The draft the gateway's store keeps for the held message ``text``."""
    store = open_store(store_url)
    try:
        [receipt] = [r for r in store.list_receipts(
            state=ReceiptState.AWAITING_CONFIRMATION, limit=1000)
            if r.arguments.get("text") == text]
    finally:
        store.close()
    draft = Draft.from_stored(receipt.detail)
    assert draft is not None
    return draft


def assert_marked(shown: str) -> None:
    lines = shown.splitlines()
    assert not (RAW - {"\n"}) & set(shown) and not any(line.startswith("to:") for line in lines)
    for named in ("U+202E RIGHT-TO-LEFT OVERRIDE", "U+200B ZERO WIDTH SPACE",
                  "U+0430 CYRILLIC SMALL LETTER A"):
        assert any(line.startswith("WARNING: ") and named in line for line in lines), named


async def test_the_elicitation_shows_the_renderers_draft(tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="decline")

    text = hostile("elicited")
    async with connected("stdio", tmp_path, request, elicitation=person) as gateway:
        await gateway.session.call_tool("sendMessage", {"to": "bo@example.com", "text": text})
        store = gateway.store
    [shown] = asked
    draft = stored_draft(store, text)
    assert draft.text() in shown.message  # the same renderer's output, whole
    assert_marked(shown.message)


async def test_callgate_review_take_shows_the_renderers_draft(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    text = hostile("taken")
    async with connected("stdio", tmp_path, request) as gateway:  # no elicitation
        await gateway.session.call_tool("sendMessage", {"to": "bo@example.com", "text": text},
                                        meta={"callgate/request_id": unique("r")})
        store = gateway.store
    taken = CliRunner().invoke(main, ["review", "take", "--by", "alice", "--store", store])
    assert taken.exit_code == 0, taken.output
    draft = stored_draft(store, text)
    assert draft.text() in taken.output
    assert_marked(taken.output)
