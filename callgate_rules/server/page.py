"""The review and confirmation page for people: ``/review``.

Server-rendered HTML (Jinja2, autoescaped everywhere), plain forms that work without
JavaScript. A person signs in with a login from the users file, or with a bearer token
(a JWT verified as ``--review-auth`` says, the token's principal their name); the session
is a signed cookie (HttpOnly, SameSite=Strict). Every form carries the session's CSRF token, and a
POST whose Origin is another site is refused.

- the pending confirmations, each with its draft — what will be sent, to whom, for how
  much — and its provenance warnings in plain words; approve or decline, with a note, the
  approver recorded from their login;
- the review queue: take the next item, see its history (the hand-over, the receipt, what
  reconciliation found), resolve it as done or not done with a note.
"""

from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse, RedirectResponse, Response

from callgate_rules.errors import CallgateError
from callgate_rules.integrations.identity import InvalidToken
from callgate_rules.server.problems import Problem
from callgate_rules.server.service import Service
from callgate_rules.server.users import Session, Sessions, User
from callgate_rules.store.base import Receipt, ReviewItem, ReviewStatus

COOKIE = "callgate_review"
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
ENVIRONMENT = Environment(loader=PackageLoader("callgate_rules.server", "templates"),
                          autoescape=select_autoescape(default=True, default_for_string=True))


@dataclass(frozen=True)
class Draft:
    """A held write's draft, read for a person: the summary, each argument, the warnings."""

    summary: str
    fields: list[tuple[str, str]]
    warnings: list[str]

    @classmethod
    def of(cls, receipt: Receipt) -> Draft:
        lines = (receipt.detail or "").splitlines()
        summary = lines[0].rstrip(":") if lines else f"Run {receipt.tool}"
        fields, warnings = [], []
        for line in lines[1:]:
            if line.startswith("WARNING: "):
                warnings.append(line.removeprefix("WARNING: "))
            elif ":" in line:
                key, _, value = line.strip().partition(":")
                fields.append((key, value.strip()))
        if not lines:  # held without a draft: show the arguments as they are
            fields = [(k, v if isinstance(v, str) else json.dumps(v))
                      for k, v in receipt.arguments.items()]
        return cls(summary, fields, warnings)


def page_router(service: Service) -> APIRouter:
    router = APIRouter(prefix="/review", include_in_schema=False)
    sessions = Sessions(service.settings.secret or secrets.token_bytes(32))
    hosted = service.hosted
    store = hosted.gate.store

    def render(name: str, session: Session | None, status: int = 200,
               **context: Any) -> HTMLResponse:
        html = ENVIRONMENT.get_template(name).render(session=session, **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def signed_in(request: Request) -> Session | None:
        return sessions.read(request.cookies.get(COOKIE))

    async def form_of(request: Request, session: Session | None) -> dict[str, str]:
        """The form's fields, after the Origin and CSRF checks."""
        origin = request.headers.get("origin")
        if origin and urlsplit(origin).netloc != request.headers.get("host"):
            raise _Refused("this form came from another site")
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        if session is not None and not hmac.compare_digest(
                fields.get("csrf", "").encode(), session.csrf.encode()):
            raise _Refused("the form's CSRF token does not match your session; reload the "
                           "page and try again")
        return fields

    def to_login() -> Response:
        return RedirectResponse("/review/login", status_code=303)

    def back(path: str, message: str = "") -> Response:
        suffix = f"?said={message}" if message else ""
        return RedirectResponse(path + suffix.replace(" ", "+"), status_code=303)

    settings = service.settings
    signs_in = settings.users is not None or settings.review_verifier is not None

    def login_page(status: int = 200, error: str | None = None) -> HTMLResponse:
        return render("login.html", None, status, error=error,
                      passwords=settings.users is not None,
                      tokens=settings.review_verifier is not None)

    def signed_in_as(user: User) -> Response:
        response = RedirectResponse("/review", status_code=303)
        response.set_cookie(COOKIE, sessions.issue(user), httponly=True, samesite="strict",
                            secure=settings.secure_cookies, path="/review")
        return response

    @router.get("/login")
    async def login_form(request: Request) -> Response:
        if not signs_in:
            return render("off.html", None, 404)
        return login_page()

    @router.post("/login/token")
    async def token_login(request: Request) -> Response:
        """A bearer token (a JWT from the organisation's identity provider, verified as
        ``--review-auth`` says) in the form or the Authorization header: the same signed
        session as a password login, the token's principal recorded as the approver."""
        verifier = settings.review_verifier
        if verifier is None:
            return render("off.html", None, 404)
        try:
            fields = await form_of(request, None)
        except _Refused as refused:
            return login_page(403, str(refused))
        given = fields.get("token", "").strip() or \
            request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        try:
            identity = verifier.verify(given) if given else None
        except InvalidToken as error:
            return login_page(401, f"The token was not accepted: {error}.")
        if identity is None:
            return login_page(401, "Paste a token to sign in with it.")
        return signed_in_as(User(identity.principal, "", identity.principal))

    @router.post("/login")
    async def login(request: Request) -> Response:
        users = service.settings.users
        if users is None:
            return render("off.html", None, 404)
        try:
            fields = await form_of(request, None)
        except _Refused as refused:
            return login_page(403, str(refused))
        user = await service.run("login", lambda: users.authenticate(
            fields.get("login", ""), fields.get("password", "")))
        if user is None:
            return login_page(401, "Unknown login or wrong password.")
        return signed_in_as(user)

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        response = to_login()
        response.delete_cookie(COOKIE, path="/review")
        return response

    @router.get("")
    async def index(request: Request, said: str = "") -> Response:
        session = signed_in(request)
        if session is None:
            return to_login()
        pending, items = await service.run("page", lambda: (
            hosted.pending(), store.list_reviews()))
        drafts = [(receipt, Draft.of(receipt)) for receipt in pending]
        open_items = [i for i in items if i.status != ReviewStatus.RESOLVED]
        resolved = [i for i in items if i.status == ReviewStatus.RESOLVED][-20:]
        return render("index.html", session, drafts=drafts, open_items=open_items,
                      resolved=resolved, said=said)

    @router.get("/confirmations/{operation_id}")
    async def confirmation_page(request: Request, operation_id: str) -> Response:
        session = signed_in(request)
        if session is None:
            return to_login()
        receipt = await service.run("page", lambda: store.get(operation_id))
        if receipt is None:
            return render("missing.html", session, 404, what="confirmation")
        return render("confirmation.html", session, receipt=receipt, draft=Draft.of(receipt))

    @router.post("/confirmations/{operation_id}/{verdict}")
    async def settle(request: Request, operation_id: str, verdict: str) -> Response:
        session = signed_in(request)
        if session is None:
            return to_login()
        if verdict not in ("approve", "decline"):
            return render("missing.html", session, 404, what="action")
        try:
            note = (await form_of(request, session)).get("note", "").strip()[:2000]
            if verdict == "approve":
                await service.run("approve", lambda: hosted.approve(
                    operation_id, approver=session.login, note=note))
            else:
                await service.run("decline", lambda: hosted.decline(
                    operation_id, by=session.login, note=note))
        except (_Refused, CallgateError) as error:
            return render("error.html", session, 409, message=str(error))
        done = "approved" if verdict == "approve" else "declined"
        return back("/review", f"{done} {operation_id[:12]}")

    @router.get("/items/{review_id}")
    async def item_page(request: Request, review_id: str, said: str = "") -> Response:
        session = signed_in(request)
        if session is None:
            return to_login()
        item, receipt = await service.run("page", lambda: _item_and_receipt(service,
                                                                            review_id))
        if item is None:
            return render("missing.html", session, 404, what="review item")
        return render("item.html", session, item=item, receipt=receipt, said=said,
                      payload=json.dumps(dict(item.payload), indent=2, ensure_ascii=False,
                                         default=str),
                      result=json.dumps(receipt.result, indent=2, ensure_ascii=False,
                                        default=str) if receipt else "")

    @router.post("/take")
    async def take(request: Request) -> Response:
        session = signed_in(request)
        if session is None:
            return to_login()
        try:
            await form_of(request, session)
        except _Refused as error:
            return render("error.html", session, 403, message=str(error))
        item = await service.run("take", lambda: store.take_review(
            reviewer=session.login, now=hosted.gate.clock()))
        if item is None:
            return back("/review", "no open item to take")
        return back(f"/review/items/{item.review_id}")

    @router.post("/items/{review_id}/resolve")
    async def resolve(request: Request, review_id: str) -> Response:
        session = signed_in(request)
        if session is None:
            return to_login()
        try:
            fields = await form_of(request, session)
            resolution, note = fields.get("resolution", ""), fields.get("note", "").strip()
            if resolution not in ("succeeded", "failed") or not note:
                raise _Refused("choose done or not done, and write a note")
            await service.run("resolve", lambda: service.resolve(
                review_id, resolution, note[:4000], session.login))
        except (_Refused, CallgateError, Problem) as error:
            return render("error.html", session, 409, message=str(error))
        return back(f"/review/items/{review_id}", "resolved")

    return router


class _Refused(Exception):
    """A form the page will not act on; its text is shown to the person."""


def _item_and_receipt(service: Service,
                      review_id: str) -> tuple[ReviewItem | None, Receipt | None]:
    store = service.hosted.gate.store
    item = next((i for i in store.list_reviews() if i.review_id == review_id), None)
    if item is None or item.operation_id is None:
        return item, None
    return item, store.get(item.operation_id)
