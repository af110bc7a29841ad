"""The review and confirmation page in a real browser: headless Chromium (Debian's
``chromium`` package) driven by Playwright, against a real ``callgate serve``.

A person signs in, approves a payment draft that shows a provenance warning, declines
another, takes and resolves a review item; each asserts the resulting receipt. A
screenshot of the approval page is saved under ``tests/artifacts/``.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from callgate_rules.store import ReceiptState, ReviewStatus, SqliteStore

from .conftest import (
    DANA,
    INJECTED,
    REPO,
    REVIEWERS,
    SESSION,
    Server,
    injected_conversation,
    payment,
    start_server,
)

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                                                             "(pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("the chromium package is not installed (Debian: apt-get install chromium); "
                "the browser tests never download a browser", allow_module_level=True)
ARTIFACTS = REPO / "tests" / "artifacts"


@pytest.fixture(scope="module")
def page_server(documents: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[Server, Path]]:
    path = tmp_path_factory.mktemp("page") / "receipts.db"
    server = start_server(documents, f"sqlite:///{path}")
    try:
        yield server, path
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def hold(client: httpx.Client, amount: float, **extra: Any) -> str:
    held = client.post("/v1/decide", json={
        "model_output": payment(INJECTED, amount, **extra), "actor": DANA,
        "session": SESSION, "request_id": f"page-{uuid.uuid4().hex[:8]}",
        "conversation": injected_conversation()}).json()
    assert held["route"] == "await_confirmation", held
    return str(held["operation_id"])


def sign_in(page: Any, server: Server) -> None:
    page.goto(f"{server.url}/review")
    assert page.url.endswith("/review/login")
    page.fill("#login", "erin")
    page.fill("#password", REVIEWERS["erin"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/review")


def test_a_person_approves_declines_takes_and_resolves(
        page_server: tuple[Server, Path], browser: Any) -> None:
    server, path = page_server
    with server.client() as client:
        approved = hold(client, 1200.5, reference="<script>alert('x')</script> INV-42")
        declined = hold(client, 980)
        step = client.post("/v1/claim", json={
            "model_output": payment(amount=15), "actor": DANA, "session": SESSION,
            "request_id": f"page-{uuid.uuid4().hex[:8]}"}).json()
        handed = client.post("/v1/finish", json={
            "operation_id": step["operation_id"], "lease": step["lease"], "actor": DANA,
            "result": {"unexpected": True}}).json()
        assert handed["decision"]["route"] == "review"
    dialogs: list[str] = []
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, server)

    # approve the 1,200.50 EUR draft, whose IBAN came only from an e-mail
    page.click(f"a[href='/review/confirmations/{approved}']")
    page.wait_for_selector(".warning")
    assert "1200.5 EUR to GB33BUKB20201555555555" in page.inner_text("h1")
    warning = page.inner_text(".warning")
    assert "recipientIban was not given by the user" in warning
    assert "content the assistant read" in warning
    assert "<script>alert('x')</script> INV-42" in page.inner_text("table")  # shown as text
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "approval-page.png"
    page.screenshot(path=str(screenshot), full_page=True)
    print(f"screenshot of the approval page: {screenshot}")
    page.fill("#approve-note", "checked with Northwind by phone")
    page.click("button.approve")
    page.wait_for_url(f"{server.url}/review?said=*")
    assert "approved" in page.inner_text(".said")

    # decline the other one
    page.click(f"a[href='/review/confirmations/{declined}']")
    page.fill("#decline-note", "not a supplier of ours")
    page.click("button.decline")
    page.wait_for_url(f"{server.url}/review?said=*")
    assert "declined" in page.inner_text(".said")

    # take the review item and resolve it with a note
    page.click("text=Take the next open item")
    page.wait_for_url(f"{server.url}/review/items/*")
    assert "reconcile_failed" in page.inner_text("main")
    assert "does not pass the contract's verify rule" in page.inner_text("main")
    page.check("input[value=failed]")
    page.fill("#note", "the bank shows no such payment")
    page.click("button:has-text('Resolve')")
    page.wait_for_url(f"{server.url}/review/items/*?said=resolved")
    assert "failed by erin" in page.inner_text("main")
    cookies = {c["name"]: c["value"] for c in context.cookies()}
    context.close()
    assert dialogs == []  # the script in the draft never ran

    store = SqliteStore(path)
    try:
        held = store.get(approved)
        assert held is not None and held.confirmed_by == "erin"
        assert held.state == ReceiptState.FAILED and held.error_class == "transient"
        refused = store.get(declined)
        assert refused is not None and refused.state == ReceiptState.FAILED
        assert refused.detail == "declined by erin: not a supplier of ours"
        [item] = [i for i in store.list_reviews() if i.operation_id == step["operation_id"]]
        assert item.status == ReviewStatus.RESOLVED and item.resolved_by == "erin"
        assert item.note == "the bank shows no such payment"
        receipt = store.get(step["operation_id"])
        assert receipt is not None and receipt.state == ReceiptState.FAILED
    finally:
        store.close()

    with server.client() as client:
        # the approved write is released: the host's next claim executes it, once
        # ... with the actor's rights checked again: the host's session must pass now
        signed_out = client.post("/v1/claim", json={
            "operation_id": approved, "actor": DANA,
            "session": {"authenticated": False}}).json()
        assert signed_out["action"] == "done"
        assert signed_out["decision"]["route"] == "refuse"
        released = client.post("/v1/claim", json={"operation_id": approved, "actor": DANA,
                                                  "session": SESSION}).json()
        assert released["action"] == "execute"
        done = client.post("/v1/finish", json={
            "operation_id": approved, "lease": released["lease"], "actor": DANA,
            "result": {"iban": INJECTED, "id": "pay-1200"}}).json()
        assert done["decision"]["route"] == "return_result"
        refused_claim = client.post("/v1/claim", json={"operation_id": declined,
                                                       "actor": DANA}).json()
        assert refused_claim["decision"]["route"] == "refuse"

    # a form without the session's CSRF token is refused, even with the session cookie
    forged = httpx.post(f"{server.url}/review/take", cookies=cookies,
                        data={"csrf": "guessed"}, follow_redirects=False)
    assert forged.status_code == 403
    assert httpx.post(f"{server.url}/review/take", data={},
                      follow_redirects=False).headers["location"] == "/review/login"
    cross_site = httpx.post(f"{server.url}/review/login", data={
        "login": "erin", "password": REVIEWERS["erin"]},
        headers={"origin": "https://evil.example"}, follow_redirects=False)
    assert cross_site.status_code == 403


def test_wrong_password_and_escaping_on_the_login(page_server: tuple[Server, Path]) -> None:
    server, _ = page_server
    wrong = httpx.post(f"{server.url}/review/login", data={
        "login": "<b>erin</b>", "password": "nope"}, follow_redirects=False)
    assert wrong.status_code == 401 and "<b>" not in wrong.text
    assert "default-src 'none'" in wrong.headers["content-security-policy"]
