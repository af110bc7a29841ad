"""Masking on every view of the review page, in a real browser (headless Chromium driven by
Playwright) against a real ``callgate serve``: a value at a path the contract's
``spec.mask`` names — an e-mail's ``body``, a follow-up's ``note`` — appears in no page a
reviewer can open: the list, the confirmation's draft, a review item with the destination's
answer echoing it, a resolution note quoting it, the resolved list.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from callgate_rules.store import SqliteStore
from callgate_rules.store.base import NewReviewItem
from callgate_rules.visible_text import shown

from .conftest import DANA, SESSION, Server
from .test_page import browser, page_server, sign_in  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration

RECIPIENT = "anna.petrova@northwind.example"


def rid() -> str:
    return f"mask-{uuid.uuid4().hex[:10]}"


def email(body: str) -> dict[str, Any]:
    return {"name": "sendEmail", "arguments": {
        "to": RECIPIENT, "subject": "Your ticket T-1001", "body": body}}


def asked() -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Write to {RECIPIENT} about her ticket."}]


def held_email(client: httpx.Client, body: str) -> str:
    held = client.post("/v1/decide", json={
        "model_output": email(body), "actor": DANA, "session": SESSION,
        "request_id": rid(), "conversation": asked()}).json()
    assert held["route"] == "await_confirmation", held
    return str(held["operation_id"])


def test_a_masked_value_appears_in_no_page_view(
        page_server: tuple[Server, Path], browser: Any) -> None:  # noqa: F811
    server, _ = page_server
    body_secret = f"Account PIN 7731-{uuid.uuid4().hex[:8]}-private"
    note_secret = f"customer said: password is hunter2-{uuid.uuid4().hex[:8]}"
    reply_secret = f"second mail {uuid.uuid4().hex[:8]} confidential body"
    with server.client() as client:
        waiting = held_email(client, body_secret)
        released = held_email(client, reply_secret)
        step = client.post("/v1/claim", json={
            "model_output": {"name": "createFollowUp", "arguments": {
                "ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z",
                "note": note_secret}},
            "actor": DANA, "session": SESSION, "request_id": rid()}).json()
        assert step["action"] == "execute", step
        handed = client.post("/v1/finish", json={
            "operation_id": step["operation_id"], "lease": step["lease"], "actor": DANA,
            "result": {"unexpected": True, "note": note_secret,
                       "echo": f"created with {note_secret}"}}).json()
        assert handed["decision"]["route"] == "review", handed

    context = browser.new_context()
    page = context.new_page()
    secrets = (body_secret, note_secret, reply_secret)
    views: list[str] = []

    def check(path: str) -> None:
        page.goto(f"{server.url}{path}")
        html, text = page.content(), page.inner_text("body")
        for secret in secrets:
            assert secret not in html and secret not in text, (path, secret)
        views.append(path)

    try:
        sign_in(page, server)
        check("/review")
        check(f"/review/confirmations/{waiting}")
        assert "***" in page.inner_text("main")  # the body's row is there, masked
        # approve the second e-mail; the destination answers without a messageId and
        # echoes the body: verify fails and the item goes to a person
        check(f"/review/confirmations/{released}")
        page.click("button.approve")
        page.wait_for_url(f"{server.url}/review?said=*")
        with server.client() as client:
            run = client.post("/v1/claim", json={"operation_id": released, "actor": DANA,
                                                 "session": SESSION}).json()
            assert run["action"] == "execute", run
            answered = client.post("/v1/finish", json={
                "operation_id": released, "lease": run["lease"], "actor": DANA,
                "result": {"status": "queued", "body": reply_secret}}).json()
            assert answered["decision"]["route"] == "review", answered
            items = client.get("/v1/reviews").json()
        by_operation = {i["operation_id"]: i["review_id"] for i in items}
        check("/review")
        for operation in (step["operation_id"], released):
            check(f"/review/items/{by_operation[operation]}")
            assert "***" in page.inner_text("main")
        # a person's resolution note that quotes the value is masked when shown
        page.check("input[value=failed]")
        page.fill("#note", f"destination echoed {reply_secret} back")
        page.click("button:has-text('Resolve')")
        page.wait_for_url(f"{server.url}/review/items/*?said=resolved")
        check(page.url.removeprefix(server.url))
        check("/review")
    finally:
        context.close()
    assert len(views) == 8


def test_a_masked_value_with_a_line_break_or_an_invisible_character_appears_in_no_view(
        page_server: tuple[Server, Path], browser: Any) -> None:  # noqa: F811
    """The page shows a value made visible (``↵``, ``⟨U+200B …⟩``) and JSON escaped: a
    masked one is masked by its path, not searched for as it was sent. A hand-over item
    with no receipt (the MCP gateway's confirmation item, which carries the model's
    arguments in its payload) is masked by the contract of its tool."""
    server, path = page_server
    tag = uuid.uuid4().hex[:8]
    newline_secret = f"PIN 7731-{tag}-topsecret\nline two of it"
    invisible_secret = f"PIN\u200b7731-{tag}-zerowidth"
    handed_secret = f"handed {tag} over\nwith a PIN 4417"
    fragments = (f"7731-{tag}", "topsecret", "zerowidth", f"handed {tag}", "PIN 4417")
    with server.client() as client:
        held = [held_email(client, body) for body in (newline_secret, invisible_secret)]
    item = SqliteStore(path).open_review(NewReviewItem(  # as gateway.confirm writes it
        tool="sendEmail", reason="confirmation",
        summary=f"confirm sendEmail op-{tag}: Email to {RECIPIENT}: {handed_secret}",
        payload={"operation_id": f"op-{tag}", "draft": f"  body: {shown(handed_secret)}",
                 "arguments": {"to": RECIPIENT, "body": handed_secret}, "actor": DANA,
                 "requested_by": "mcp-host"}), now=datetime.now(UTC))

    context = browser.new_context()
    page = context.new_page()
    views: list[str] = []

    def check(view: str) -> None:
        page.goto(f"{server.url}{view}")
        html, text = page.content(), page.inner_text("body")
        for fragment in fragments:
            assert fragment not in html and fragment not in text, (view, fragment)
        views.append(view)

    try:
        sign_in(page, server)
        check("/review")
        for operation in held:
            check(f"/review/confirmations/{operation}")
            body = page.locator("tr.argument[data-name=body] code.value").inner_text()
            assert body == "***", body
        check(f"/review/items/{item.review_id}")
        assert "***" in page.inner_text("main")
    finally:
        context.close()
    assert len(views) == 4
