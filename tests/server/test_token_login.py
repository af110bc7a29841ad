"""The review page's bearer-token session (``--review-auth``): a person signs in with a JWT
from their identity provider, gets the same signed session as a password login, and their
token's principal is recorded as the approver. A real ``callgate serve`` over SQLite."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from callgate_rules.store import ReceiptState, SqliteStore

from .conftest import (
    DANA,
    INJECTED,
    SESSION,
    Server,
    injected_conversation,
    payment,
    start_server,
    token,
)


@pytest.fixture(scope="module")
def token_server(documents: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    path = tmp_path_factory.mktemp("token-login") / "receipts.db"
    server = start_server(documents, f"sqlite:///{path}", "--review-auth",
                          str(documents / "auth.yaml"))
    try:
        yield server, path
    finally:
        server.stop()


def held_payment(server: Server, amount: float) -> str:
    with server.client() as client:
        held = client.post("/v1/decide", json={
            "model_output": payment(INJECTED, amount), "actor": DANA, "session": SESSION,
            "request_id": f"tok-{uuid.uuid4().hex[:8]}",
            "conversation": injected_conversation()}).json()
    assert held["route"] == "await_confirmation", held
    return str(held["operation_id"])


def test_a_token_signs_in_and_its_principal_approves(token_server: tuple[Server, Path]) -> None:
    server, path = token_server
    operation = held_payment(server, 640.0)
    with httpx.Client(base_url=server.url, follow_redirects=False) as browser:
        form = browser.get("/review/login")
        assert form.status_code == 200
        assert 'action="/review/login/token"' in form.text  # both ways to sign in
        assert 'action="/review/login"' in form.text
        signed = browser.post("/review/login/token",
                              data={"token": token("erin@idp.example")})
        assert signed.status_code == 303 and signed.headers["location"] == "/review"
        cookie = signed.cookies.get("callgate_review")
        assert cookie and "HttpOnly" in signed.headers["set-cookie"]
        index = browser.get("/review")
        assert index.status_code == 200 and "erin@idp.example" in index.text
        page = browser.get(f"/review/confirmations/{operation}")
        match = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert match is not None
        approved = browser.post(f"/review/confirmations/{operation}/approve",
                                data={"csrf": match.group(1), "note": "checked by phone"})
        assert approved.status_code == 303
    store = SqliteStore(path)
    try:
        receipt = store.get(operation)
        assert receipt is not None and receipt.state == ReceiptState.FAILED
        assert receipt.confirmed_by == "erin@idp.example"
        assert receipt.detail is not None and "confirmed by erin@idp.example" in receipt.detail
    finally:
        store.close()


@pytest.mark.parametrize(("sent", "words"), [
    ({"token": token("erin", seconds=-60)}, "the token has expired"),
    ({"token": token("erin")[:-4] + "AAAA"}, "the token is not valid"),
    ({"token": "<script>alert(1)</script>"}, "the token is not a JWT"),
    ({}, "Paste a token"),
])
def test_a_bad_token_is_refused_with_a_reason_and_no_session(
        token_server: tuple[Server, Path], sent: dict[str, str], words: str) -> None:
    server, _ = token_server
    answer = httpx.post(f"{server.url}/review/login/token", data=sent, follow_redirects=False)
    assert answer.status_code == 401
    assert words in answer.text and "<script>alert" not in answer.text
    assert "callgate_review" not in answer.headers.get("set-cookie", "")


def test_a_token_from_another_site_or_the_header_alone(
        token_server: tuple[Server, Path]) -> None:
    server, _ = token_server
    cross_site = httpx.post(f"{server.url}/review/login/token",
                            data={"token": token("erin")},
                            headers={"origin": "https://evil.example"},
                            follow_redirects=False)
    assert cross_site.status_code == 403
    by_header = httpx.post(f"{server.url}/review/login/token",
                           headers={"authorization": f"Bearer {token('sam')}"},
                           follow_redirects=False)
    assert by_header.status_code == 303 and by_header.cookies.get("callgate_review")


def test_without_review_auth_there_is_no_token_login(server: Server) -> None:
    answer = httpx.post(f"{server.url}/review/login/token", data={"token": token("erin")},
                        follow_redirects=False)
    assert answer.status_code == 404
    assert 'action="/review/login/token"' not in httpx.get(f"{server.url}/review/login").text
