"""The versioned decision API: ``/v1/decide``, ``/v1/claim``, ``/v1/finish``,
``/v1/reconcile``, ``/v1/confirm``, the pending confirmations and the review queue.

Each endpoint is one call of ``pipeline.hosted.HostedWrites``, run in a worker thread (the
gate is synchronous) under the service's concurrency limit; but a decision that waits on
nothing (outside a named run, no look-up over HTTP, no decision log file) and whose body is
small (``ON_THE_LOOP_BYTES``) is made on the event loop, under the same limit, as the hop
to a thread costs more than it does (``decided_here``). ``POST /v1/decide``, the call a
host makes for every tool call, is answered ahead of FastAPI's routing
(``DecideEndpoint``), by the route's own model, decision and answer. The host
authenticates with a bearer token (``integrations.identity``); the ``actor`` of a request
is the host's word for who the call is for, and any actor field the token maps is pinned:
a body that contradicts it is refused (403), a body that lacks it gets it from the token.

Everything a caller sees or acts on is scoped by those pinned fields (``caller_scope``):
the pending confirmations, the review queue (list, take, resolve) and every operation
(claim, finish, reconcile, confirm). Another tenant's item answers exactly as a missing
one: the same status and the same body.

The host's ``request_id`` and ``run_id`` are scoped by them too (``scoped_request_id``):
two tenants that send the same call under the same request ID make two operations, so
neither can find, block or confirm the other's write, and one tenant's IDs stay the same
across instances and restarts (exactly once holds per tenant).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from fastapi import APIRouter, Request
from pydantic import ValidationError

from callgate_rules.integrations.identity import ASGIApp, Identity, Receive, Send, identity_of
from callgate_rules.integrations.identity import Scope as ASGIScope
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.hosted import Failure, HostedWrites, UnknownOperation
from callgate_rules.pipeline.progress import Progress
from callgate_rules.server.bundles import CurrentHosted
from callgate_rules.server.models import (
    ClaimRequest,
    ConfirmRequest,
    DecideRequest,
    DecisionOut,
    FinishRequest,
    PendingOut,
    ReceiptOut,
    ReconcileRequest,
    ResolveRequest,
    ReviewOut,
    StepOut,
)
from callgate_rules.server.problems import Problem, error_response, read_body
from callgate_rules.server.service import Service
from callgate_rules.store.base import ReviewStatus
from callgate_rules.store.scoping import NOTHING, Scope, pinned_scope
from callgate_rules.taxonomy import ErrorClass

PROBLEMS: dict[int | str, dict[str, Any]] = {
    status: {"description": title, "content": {"application/problem+json": {}}}
    for status, title in ((400, "Malformed JSON or bad input"), (401, "No valid bearer token"),
                          (403, "The actor contradicts the token"), (404, "Unknown operation"),
                          (409, "Lease lost, or the operation was settled meanwhile"),
                          (408, "The body did not arrive in time"),
                          (413, "Body too large"), (415, "Not JSON"),
                          (422, "The body does not match its schema"),
                          (429, "Too many unfinished requests from this client"),
                          (503, "Receipt store unavailable, or the request took too long"))}


def pinned_actor(request: Request, actor: Mapping[str, Any]) -> dict[str, Any]:
    """The body's actor, with every field the verified token maps pinned to the token's."""
    return actor_pinned_by(identity_of(request.scope), actor)


def actor_pinned_by(identity: Identity | None, actor: Mapping[str, Any]) -> dict[str, Any]:
    """``pinned_actor`` for the identity the request's token verified as (``None``: no
    token)."""
    if identity is None:
        return dict(actor)
    for name, value in identity.actor.items():
        if name in actor and actor[name] != value:
            raise Problem(403, "Actor not allowed", f"actor.{name} is not the token's",
                          [{"field": f"body.actor.{name}",
                            "message": "must equal the value the bearer token carries"}])
    return {**actor, **identity.actor}


def scoped_request_id(request: Request, given: str) -> str:
    """The host's request ID (or run ID) in the namespace of its token's pinned claims:
    ``p<digest>:<given>``, the digest a SHA-256 of their canonical JSON (the same in every
    instance, without a secret: it separates tenants, it hides nothing). The operation ID
    is made from it, so another tenant's identical call is another operation. Without
    ``--auth`` (loopback only: the operator) the ID is the host's as given."""
    return scoped_by(identity_of(request.scope), given)


def scoped_by(identity: Identity | None, given: str) -> str:
    """``scoped_request_id`` for the identity the request's token verified as."""
    if identity is None or not identity.actor:
        return given
    return f"p{identity.actor_digest[:24]}:{given}"


def caller_scope(request: Request, service: Service) -> Scope:
    """What this caller may see and act on: the writes of the actor fields its verified
    token pins; a token that pins none gets what ``--unscoped`` says; without ``--auth``
    (loopback only) the caller is the operator and sees everything."""
    identity = identity_of(request.scope)
    if identity is None:
        return Scope() if service.settings.verifier is None else NOTHING
    if not identity.actor:
        return service.unscoped()
    return pinned_scope(identity.actor)


def scoped_ids(request: Request, request_id: str,
               run_id: str | None) -> tuple[str, str | None]:
    """The request ID and the run ID (a run's history and budgets), both scoped."""
    identity = identity_of(request.scope)
    return (scoped_by(identity, request_id),
            None if run_id is None else scoped_by(identity, run_id))


def principal(request: Request) -> str:
    identity = identity_of(request.scope)
    return identity.principal if identity is not None else "anonymous"


async def decided(service: Service, scope: ASGIScope, body: DecideRequest) -> Decision:
    """``POST /v1/decide``'s decision for the request of ``scope``, as the route and
    ``DecideEndpoint`` both make it: ``HostedWrites.decide`` in a worker thread under the
    service's concurrency limit; but a decision that waits on nothing (``decided_here``)
    is made on the event loop, as the hop to a thread costs more than it does, when its
    body is small enough to be decided in a bounded time (``ON_THE_LOOP_BYTES``).
    Whatever could take long goes to a worker, which the request's time limit can leave
    behind."""
    identity = identity_of(scope)
    actor = actor_pinned_by(identity, body.actor)
    request_id = scoped_by(identity, body.request_id)
    run_id = None if body.run_id is None else scoped_by(identity, body.run_id)
    if run_id is None and service.blocks_on_nothing and _small(scope):
        return await decided_here(service, body, actor, request_id)
    hosted = cast(HostedWrites, CurrentHosted(service))  # follows a reloaded bundle
    return await service.run("decide", lambda: hosted.decide(
        body.model_output, actor=actor, request_id=request_id, session=body.session,
        conversation=body.conversation, run_id=run_id), body.records)


# A body at most this long is decided on the event loop (when it waits on nothing): its
# steps take a millisecond or so, bounded. A longer one (a long conversation, many records)
# could hold the loop, and every other request with it, past any time limit.
ON_THE_LOOP_BYTES = 16 * 1024


def _small(scope: ASGIScope) -> bool:
    read = read_body(scope)
    return read is not None and len(read.raw) <= ON_THE_LOOP_BYTES


async def decided_here(service: Service, body: DecideRequest, actor: dict[str, Any],
                       request_id: str) -> Decision:
    """``HostedWrites.decide`` with its steps on the event loop: outside a named run
    (whose history is in the store) and with look-ups that wait on nothing, they read and
    write nothing. Only a write held for a person goes on in a worker thread: the hold is
    written to the store. The steps and the rest take one place under the concurrency
    limit, as a worker's call would (``Service.run_here``)."""
    serving = service.serving  # one policy for the whole request
    flow, records = serving.hosted, body.records

    def decide() -> Decision | tuple[Decision, Progress]:
        steps = flow.gate.decide_steps(
            body.model_output, actor, flow.gate.clock(), request_id=request_id,
            session=body.session, conversation=body.conversation)
        if flow.holds(*steps):
            return steps  # finished in a worker, below
        return flow.decided(*steps, actor=actor, request_id=request_id)

    with service.metrics.timed("decide"):
        made = await service.run_here(decide, records, serving)
        if isinstance(made, Decision):
            return made
        decision, progress = made
        return await service.in_worker(lambda: flow.decided(
            decision, progress, actor=actor, request_id=request_id), records, serving)


DECIDE_PATH = "/v1/decide"


@dataclass
class DecideEndpoint:
    """``POST /v1/decide`` answered ahead of FastAPI's middleware, routing and dependency
    injection, which cost more than the decision: the body ``RequestLimits`` already read
    is validated against the route's own model (``DecideRequest``), decided as the route
    decides (``decided``) and answered in the route's bytes (``DecisionOut.json_of``),
    an error as the application's handlers answer it (``error_response``). A body that
    does not validate goes on to the route, which answers it as for any endpoint (422 with
    the fields named); so does every other request. Bearer tokens and the request limits
    wrap this as they wrap the application."""

    app: ASGIApp
    service: Service

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != DECIDE_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        read = read_body(scope)
        try:
            body = DecideRequest.model_validate(None if read is None else read.json)
        except ValidationError:
            await self.app(scope, receive, send)
            return
        try:
            answer = DecisionOut.json_of(await decided(self.service, scope, body))
        except Exception as error:  # answered as the application's handlers answer it
            await error_response("POST", DECIDE_PATH, error)(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-length", str(len(answer)).encode()),
            (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})


def api_router(service: Service) -> APIRouter:
    router = APIRouter(prefix="/v1", responses=PROBLEMS)
    hosted = cast(HostedWrites, CurrentHosted(service))  # follows a reloaded bundle

    def visible(request: Request, operation_id: str) -> None:
        """A caller with no scope acts on no stored operation: answered as a missing one
        (the same words ``HostedWrites`` uses). A token's pinned actor fields already
        restrict the rest: an operation of another actor reads as unknown."""
        if caller_scope(request, service) == NOTHING:
            raise UnknownOperation(f"no operation {operation_id!r} for this actor")

    @router.post("/decide", response_model=DecisionOut, tags=["decisions"])
    async def decide(request: Request, body: DecideRequest) -> DecisionOut:
        """Steps 1–4 and the route, without executing anything; an allowed write carries
        its operation ID, a write that needs a person its draft and confirmation token."""
        return DecisionOut.of(await decided(service, request.scope, body))

    @router.post("/claim", response_model=StepOut, tags=["writes"])
    async def claim(request: Request, body: ClaimRequest) -> StepOut:
        """The atomic claim of an allowed write: execute now (operation ID, deadline,
        lease), reconcile, retry later, or done with the earlier receipt."""
        actor = pinned_actor(request, body.actor)
        if body.operation_id is not None:
            operation = body.operation_id
            visible(request, operation)
            step = await service.run("claim", lambda: hosted.claim_operation(
                operation, actor=actor, session=body.session), body.records)
        else:
            request_id, run_id = scoped_ids(request, body.request_id or "", body.run_id)
            step = await service.run("claim", lambda: hosted.claim(
                body.model_output, actor=actor, request_id=request_id, session=body.session,
                conversation=body.conversation, run_id=run_id), body.records)
        return StepOut.of(step)

    @router.post("/finish", response_model=StepOut, tags=["writes"])
    async def finish(request: Request, body: FinishRequest) -> StepOut:
        """What the destination answered (``result``) or how it failed (``failure``):
        verified, recorded, and the next step."""
        actor = pinned_actor(request, body.actor)
        visible(request, body.operation_id)
        failure = None if body.failure is None else Failure(
            sent=body.failure.sent, detail=body.failure.detail,
            error_class=ErrorClass(body.failure.error_class) if body.failure.error_class
            else None, retry_after=body.failure.retry_after)
        step = await service.run("finish", lambda: hosted.finish(
            body.operation_id, body.lease, actor=actor, result=body.result, failure=failure,
            session=body.session), body.records)
        return StepOut.of(step)

    @router.post("/reconcile", response_model=StepOut, tags=["writes"])
    async def reconcile(request: Request, body: ReconcileRequest) -> StepOut:
        """What the destination holds under the operation ID: a late confirmation, a safe
        resend, or a person's review."""
        actor = pinned_actor(request, body.actor)
        visible(request, body.operation_id)
        step = await service.run("reconcile", lambda: hosted.reconcile(
            body.operation_id, body.lease, actor=actor, found=body.found,
            session=body.session), body.records)
        return StepOut.of(step)

    @router.post("/confirm", response_model=StepOut, tags=["writes"])
    async def confirm(request: Request, body: ConfirmRequest) -> StepOut:
        """A person confirmed: the token and the actor's rights are checked again and the
        write is claimed for the host to execute."""
        actor = pinned_actor(request, body.actor)
        scope = caller_scope(request, service)
        step = await service.run("confirm", lambda: hosted.confirm(
            body.confirmation_token, actor=actor, confirmed_by=body.confirmed_by,
            session=body.session, scope=scope), body.records)
        return StepOut.of(step)

    @router.get("/confirmations", response_model=list[PendingOut], tags=["people"])
    async def confirmations(request: Request) -> list[PendingOut]:
        """The writes waiting for a person, oldest first, with their drafts: those of the
        actors the caller's token pins."""
        scope = caller_scope(request, service)
        pending = await service.run("confirmations", lambda: hosted.pending(scope=scope))
        return [PendingOut.of(receipt) for receipt in pending]

    @router.get("/operations/{operation_id}", response_model=ReceiptOut, tags=["writes"])
    async def operation(request: Request, operation_id: str) -> ReceiptOut:
        """The receipt of one write: its state, attempts and the hash of the decision log
        line of the decision that executed it. One out of the caller's scope answers as a
        missing one (404)."""
        visible(request, operation_id)
        scope = caller_scope(request, service)
        receipt = await service.run("operation", lambda: service.visible_receipt(
            operation_id, scope))
        if receipt is None:
            raise UnknownOperation(f"no operation {operation_id!r} for this actor")
        return ReceiptOut.of(receipt)

    @router.get("/reviews", response_model=list[ReviewOut], tags=["people"])
    async def reviews(request: Request, status: ReviewStatus | None = None
                      ) -> list[ReviewOut]:
        """The review queue (hand-overs) in the caller's scope, optionally of one status."""
        scope = caller_scope(request, service)
        items = await service.run("reviews", lambda: hosted.gate.store.list_reviews(
            status=status, scope=scope))
        return [ReviewOut.of(item) for item in items]

    @router.post("/reviews/take", response_model=ReviewOut | None, tags=["people"])
    async def take(request: Request) -> ReviewOut | None:
        """The oldest open item in the caller's scope, now the caller's (the token's
        principal); null if none."""
        who, scope = principal(request), caller_scope(request, service)
        item = await service.run("take", lambda: hosted.gate.store.take_review(
            reviewer=who, now=hosted.gate.clock(), scope=scope))
        return ReviewOut.of(item) if item is not None else None

    @router.post("/reviews/{review_id}/resolve", response_model=ReviewOut, tags=["people"])
    async def resolve(request: Request, review_id: str, body: ResolveRequest) -> ReviewOut:
        """Close an item as succeeded or failed with a note; its receipt takes that state.
        An item out of the caller's scope answers as a missing one (404)."""
        who, scope = principal(request), caller_scope(request, service)
        item = await service.run("resolve", lambda: service.resolve(
            review_id, body.resolution, body.note, who, scope))
        return ReviewOut.of(item)

    return router
