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
import logging
import secrets
from typing import Any, cast
from urllib.parse import urlsplit

import jwt
from fastapi import APIRouter, Request
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse, RedirectResponse, Response

from callgate_rules.confirmation.drafts import Draft, of_receipt, shown_lines
from callgate_rules.errors import CallgateError
from callgate_rules.integrations.identity import InvalidToken
from callgate_rules.pipeline.hosted import HostedWrites
from callgate_rules.server.bundles import CurrentHosted
from callgate_rules.server.masked import shown_item, shown_receipt
from callgate_rules.server.problems import Problem, public_message
from callgate_rules.server.service import Service
from callgate_rules.server.users import LoginThrottle, Session, Sessions, User
from callgate_rules.store.base import Receipt, ReviewItem, ReviewStatus
from callgate_rules.store.scoping import Scope, pinned_scope
from callgate_rules.store.sessions import PageSessions

COOKIE = "callgate_review"
LOGGER = logging.getLogger("callgate.server.page")
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
ENVIRONMENT = Environment(loader=PackageLoader("callgate_rules.server", "templates"),
                          autoescape=select_autoescape(default=True, default_for_string=True))


def receipt_draft(receipt: Receipt) -> Draft:
    """A held write's draft as its receipt keeps it (``confirmation.drafts``): the page
    renders its rows, warnings and evidence; it formats no argument itself."""
    return of_receipt(receipt.detail, receipt.tool, receipt.arguments)


def page_router(service: Service) -> APIRouter:
    router = APIRouter(prefix="/review", include_in_schema=False)
    settings = service.settings
    hosted = cast(HostedWrites, CurrentHosted(service))  # approvals follow a reloaded bundle
    store = hosted.gate.store
    config = hosted.gate.config
    sessions = Sessions(settings.secret or secrets.token_bytes(32),
                        cast(PageSessions, store), idle=settings.session_idle,
                        lifetime=settings.session_lifetime)
    throttle = LoginThrottle(settings.login_limits)

    def render(name: str, session: Session | None, status: int = 200,
               **context: Any) -> HTMLResponse:
        html = ENVIRONMENT.get_template(name).render(session=session, **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    async def signed_in(request: Request) -> Session | None:
        """The live session of the request's cookie. Its signature and end are checked
        here on the event loop: a forged, tampered or ended cookie is refused without a
        store call or a worker. Only a signed one is checked against the store, on the
        sign-ins' budget (never the decision API's)."""
        signed = sessions.signed(request.cookies.get(COOKIE))
        if signed is None:
            return None
        return await service.run_session(lambda: sessions.live(signed))

    def scope_of(session: Session) -> Scope:
        """What this person may review: a token login's pinned claims, else the users
        file's ``scope`` for the login, else what ``--unscoped`` says."""
        if session.scope is not None:
            return session.scope
        user = settings.users.by_login.get(session.login) if settings.users else None
        scope = user.scope if user is not None else None
        return scope if scope is not None else service.unscoped()

    def shown(receipts: list[Receipt]) -> list[Receipt]:
        return [shown_receipt(config, receipt) for receipt in receipts]

    def shown_items(items: list[ReviewItem]) -> list[ReviewItem]:
        """Each item masked by its receipt's arguments (read only for masking contracts)."""
        def one(item: ReviewItem) -> ReviewItem:
            contract = config.contracts.get(item.tool)
            if contract is None or not contract.mask:
                return item
            receipt = None if item.operation_id is None else store.get(item.operation_id)
            return shown_item(config, item, receipt)  # no receipt: by its payload's arguments
        return [one(item) for item in items]

    def failed_sign_in(request: Request, login: str, reason: str) -> None:
        """Logged (never the password) and counted in /metrics."""
        service.metrics.login_failures.labels(reason).inc()
        LOGGER.warning("failed sign-in to the review page: login %r from %s (%s)",
                       login[:80], _address(request), reason)

    def throttled(request: Request, login: str) -> HTMLResponse | None:
        wait = throttle.admit(_address(request), login)
        if wait is None:
            return None
        failed_sign_in(request, login, "rate_limited")
        page = login_page(429, f"Too many sign-in attempts; try again in {int(wait) + 1} "
                               "seconds.")
        page.headers["retry-after"] = str(int(wait) + 1)
        return page

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

    signs_in = settings.users is not None or settings.review_verifier is not None

    def login_page(status: int = 200, error: str | None = None) -> HTMLResponse:
        return render("login.html", None, status, error=error,
                      passwords=settings.users is not None,
                      tokens=settings.review_verifier is not None)

    async def signed_in_as(user: User, scope: Scope | None = None,
                           ends_by: float | None = None) -> Response:
        cookie = await service.run_session(lambda: sessions.issue(user, scope, ends_by))
        response = RedirectResponse("/review", status_code=303)
        response.set_cookie(COOKIE, cookie, httponly=True, samesite="strict",
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
        given = (fields.get("token", "").strip() or
            request.headers.get("authorization", "").removeprefix("Bearer ").strip())
        too_many = throttled(request, "(token)")
        if too_many is not None:
            return too_many
        try:
            identity = verifier.verify(given) if given else None
        except InvalidToken as error:
            failed_sign_in(request, "(token)", "bad_token")
            return login_page(401, f"The token was not accepted: {error}.")
        if identity is None:
            return login_page(401, "Paste a token to sign in with it.")
        ends_by = token_expiry(given)  # the session ends when the token does
        if ends_by is not None and ends_by <= sessions.clock():
            failed_sign_in(request, "(token)", "bad_token")
            return login_page(401, "The token was not accepted: the token has expired.")
        # the token's pinned actor fields are the person's scope; none: --unscoped decides
        # (kept in the session: a token login never takes a users-file login's scope)
        scope = pinned_scope(identity.actor) if identity.actor else service.unscoped()
        return await signed_in_as(User(identity.principal, "", identity.principal), scope,
                                  ends_by)

    @router.post("/login")
    async def login(request: Request) -> Response:
        users = service.settings.users
        if users is None:
            return render("off.html", None, 404)
        try:
            fields = await form_of(request, None)
        except _Refused as refused:
            return login_page(403, str(refused))
        login_name = fields.get("login", "")[:200]
        too_many = throttled(request, login_name)
        if too_many is not None:
            return too_many
        try:  # on the sign-ins' own budget, never the decision API's
            user = await service.run_login(lambda: users.authenticate(
                login_name, fields.get("password", "")))
        except Problem as busy:
            failed_sign_in(request, login_name, "busy")
            return login_page(busy.status, f"{busy.detail}.")
        if user is None:
            throttle.failed(login_name)
            failed_sign_in(request, login_name, "bad_credentials")
            return login_page(401, "Unknown login or wrong password.")
        return await signed_in_as(user)

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        """Sign out: the session is revoked in the store, on every instance at once."""
        session = await signed_in(request)
        if session is not None:
            try:
                await form_of(request, session)
            except _Refused as error:
                return render("error.html", session, 403, message=str(error))
            cookie = request.cookies.get(COOKIE)
            await service.run_session(lambda: sessions.revoke(cookie))
        response = to_login()
        response.delete_cookie(COOKIE, path="/review")
        return response

    @router.get("")
    async def index(request: Request, said: str = "") -> Response:
        session = await signed_in(request)
        if session is None:
            return to_login()
        scope = scope_of(session)
        pending, items = await service.run("page", lambda: (
            shown(hosted.pending(scope=scope)), shown_items(store.list_reviews(scope=scope))))
        drafts = [(receipt, receipt_draft(receipt)) for receipt in pending]
        open_items = [i for i in items if i.status != ReviewStatus.RESOLVED]
        resolved = [i for i in items if i.status == ReviewStatus.RESOLVED][-20:]
        return render("index.html", session, drafts=drafts, open_items=open_items,
                      resolved=resolved, said=said)

    @router.get("/confirmations/{operation_id}")
    async def confirmation_page(request: Request, operation_id: str) -> Response:
        session = await signed_in(request)
        if session is None:
            return to_login()
        scope = scope_of(session)
        found = await service.run("page", lambda: service.visible_receipt(operation_id,
                                                                          scope))
        if found is None:  # another tenant's reads exactly as a missing one
            return render("missing.html", session, 404, what="confirmation")
        receipt = shown_receipt(config, found)
        return render("confirmation.html", session, receipt=receipt,
                      draft=receipt_draft(receipt))

    @router.post("/confirmations/{operation_id}/{verdict}")
    async def settle(request: Request, operation_id: str, verdict: str) -> Response:
        session = await signed_in(request)
        if session is None:
            return to_login()
        if verdict not in ("approve", "decline"):
            return render("missing.html", session, 404, what="action")
        scope = scope_of(session)
        if await service.run("page", lambda: service.visible_receipt(
                operation_id, scope)) is None:
            return render("missing.html", session, 404, what="confirmation")
        try:
            note = (await form_of(request, session)).get("note", "").strip()[:2000]
            if verdict == "approve":
                await service.run("approve", lambda: hosted.approve(
                    operation_id, approver=session.login, note=note))
            else:
                await service.run("decline", lambda: hosted.decline(
                    operation_id, by=session.login, note=note))
        except (_Refused, CallgateError) as error:
            return render("error.html", session, 409, message=public_message(error))
        done = "approved" if verdict == "approve" else "declined"
        return back("/review", f"{done} {operation_id[:12]}")

    @router.get("/items/{review_id}")
    async def item_page(request: Request, review_id: str, said: str = "") -> Response:
        session = await signed_in(request)
        if session is None:
            return to_login()
        scope = scope_of(session)
        item, receipt = await service.run("page", lambda: _item_and_receipt(
            service, review_id, scope))
        if item is None:
            return render("missing.html", session, 404, what="review item")
        return render("item.html", session, item=item, receipt=receipt, said=said,
                      payload=shown_lines(json.dumps(dict(item.payload), indent=2,
                                                     ensure_ascii=False, default=str)),
                      result=shown_lines(json.dumps(receipt.result, indent=2,
                                                    ensure_ascii=False, default=str))
                      if receipt else "")

    @router.post("/take")
    async def take(request: Request) -> Response:
        session = await signed_in(request)
        if session is None:
            return to_login()
        try:
            await form_of(request, session)
        except _Refused as error:
            return render("error.html", session, 403, message=str(error))
        scope = scope_of(session)
        item = await service.run("take", lambda: store.take_review(
            reviewer=session.login, now=hosted.gate.clock(), scope=scope))
        if item is None:
            return back("/review", "no open item to take")
        return back(f"/review/items/{item.review_id}")

    @router.post("/items/{review_id}/resolve")
    async def resolve(request: Request, review_id: str) -> Response:
        session = await signed_in(request)
        if session is None:
            return to_login()
        scope = scope_of(session)
        try:
            fields = await form_of(request, session)
            resolution, note = fields.get("resolution", ""), fields.get("note", "").strip()
            if resolution not in ("succeeded", "failed") or not note:
                raise _Refused("choose done or not done, and write a note")
            await service.run("resolve", lambda: service.resolve(
                review_id, resolution, note[:4000], session.login, scope))
        except (_Refused, CallgateError, Problem) as error:
            return render("error.html", session, 409, message=public_message(error))
        return back(f"/review/items/{review_id}", "resolved")

    return router


class _Refused(Exception):
    """A form the page will not act on; its text is shown to the person."""


def token_expiry(token: str) -> float | None:
    """The ``exp`` of a token ``verify`` has just accepted (so its signature holds: the
    claims are read again here only because ``Identity`` does not carry them), or ``None``
    when it has none (``require_expiry: false``)."""
    try:
        expiry = jwt.decode(token, options={"verify_signature": False}).get("exp")
    except jwt.InvalidTokenError:
        return None
    return (float(expiry) if isinstance(expiry, int | float) and
        not isinstance(expiry, bool) else None)


def _address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def _item_and_receipt(service: Service, review_id: str,
                      scope: Scope) -> tuple[ReviewItem | None, Receipt | None]:
    """The item in ``scope`` and its receipt, both masked as the page shows them."""
    config, store = service.hosted.gate.config, service.hosted.gate.store
    item = service.review_item(review_id, scope)
    if item is None:
        return None, None
    receipt = None if item.operation_id is None else store.get(item.operation_id)
    return (shown_item(config, item, receipt),
            None if receipt is None else shown_receipt(config, receipt))
