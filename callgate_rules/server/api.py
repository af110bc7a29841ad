"""The versioned decision API: ``/v1/decide``, ``/v1/claim``, ``/v1/finish``,
``/v1/reconcile``, ``/v1/confirm``, the pending confirmations and the review queue.

Each endpoint is one call of ``pipeline.hosted.HostedWrites``, run in a worker thread (the
gate is synchronous) under the service's concurrency limit. The host authenticates with a
bearer token (``integrations.identity``); the ``actor`` of a request is the host's word for
who the call is for, and any actor field the token maps is pinned: a body that contradicts
it is refused (403), a body that lacks it gets it from the token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request

from callgate_rules.integrations.identity import identity_of
from callgate_rules.pipeline.hosted import Failure
from callgate_rules.server.models import (
    ClaimRequest,
    ConfirmRequest,
    DecideRequest,
    DecisionOut,
    FinishRequest,
    PendingOut,
    ReconcileRequest,
    ResolveRequest,
    ReviewOut,
    StepOut,
)
from callgate_rules.server.problems import Problem
from callgate_rules.server.service import Service
from callgate_rules.store.base import ReviewStatus
from callgate_rules.taxonomy import ErrorClass

PROBLEMS: dict[int | str, dict[str, Any]] = {
    status: {"description": title, "content": {"application/problem+json": {}}}
    for status, title in ((400, "Malformed JSON or bad input"), (401, "No valid bearer token"),
                          (403, "The actor contradicts the token"), (404, "Unknown operation"),
                          (409, "Lease lost, or the operation was settled meanwhile"),
                          (413, "Body too large"), (415, "Not JSON"),
                          (422, "The body does not match its schema"),
                          (503, "Receipt store unavailable, or the request took too long"))}


def pinned_actor(request: Request, actor: Mapping[str, Any]) -> dict[str, Any]:
    """The body's actor, with every field the verified token maps pinned to the token's."""
    identity = identity_of(request.scope)
    if identity is None:
        return dict(actor)
    for name, value in identity.actor.items():
        if name in actor and actor[name] != value:
            raise Problem(403, "Actor not allowed", f"actor.{name} is not the token's",
                          [{"field": f"body.actor.{name}",
                            "message": "must equal the value the bearer token carries"}])
    return {**actor, **identity.actor}


def principal(request: Request) -> str:
    identity = identity_of(request.scope)
    return identity.principal if identity is not None else "anonymous"


def api_router(service: Service) -> APIRouter:
    router = APIRouter(prefix="/v1", responses=PROBLEMS)
    hosted = service.hosted

    @router.post("/decide", response_model=DecisionOut, tags=["decisions"])
    async def decide(request: Request, body: DecideRequest) -> DecisionOut:
        """Steps 1–4 and the route, without executing anything; an allowed write carries
        its operation ID, a write that needs a person its draft and confirmation token."""
        actor = pinned_actor(request, body.actor)
        decision = await service.run("decide", lambda: hosted.decide(
            body.model_output, actor=actor, request_id=body.request_id,
            session=body.session, conversation=body.conversation, run_id=body.run_id),
            body.records)
        return DecisionOut.of(decision)

    @router.post("/claim", response_model=StepOut, tags=["writes"])
    async def claim(request: Request, body: ClaimRequest) -> StepOut:
        """The atomic claim of an allowed write: execute now (operation ID, deadline,
        lease), reconcile, retry later, or done with the earlier receipt."""
        actor = pinned_actor(request, body.actor)
        if body.operation_id is not None:
            operation = body.operation_id
            step = await service.run("claim", lambda: hosted.claim_operation(
                operation, actor=actor, session=body.session), body.records)
        else:
            request_id = body.request_id or ""
            step = await service.run("claim", lambda: hosted.claim(
                body.model_output, actor=actor, request_id=request_id, session=body.session,
                conversation=body.conversation, run_id=body.run_id), body.records)
        return StepOut.of(step)

    @router.post("/finish", response_model=StepOut, tags=["writes"])
    async def finish(request: Request, body: FinishRequest) -> StepOut:
        """What the destination answered (``result``) or how it failed (``failure``):
        verified, recorded, and the next step."""
        actor = pinned_actor(request, body.actor)
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
        step = await service.run("reconcile", lambda: hosted.reconcile(
            body.operation_id, body.lease, actor=actor, found=body.found,
            session=body.session), body.records)
        return StepOut.of(step)

    @router.post("/confirm", response_model=StepOut, tags=["writes"])
    async def confirm(request: Request, body: ConfirmRequest) -> StepOut:
        """A person confirmed: the token and the actor's rights are checked again and the
        write is claimed for the host to execute."""
        actor = pinned_actor(request, body.actor)
        step = await service.run("confirm", lambda: hosted.confirm(
            body.confirmation_token, actor=actor, confirmed_by=body.confirmed_by,
            session=body.session), body.records)
        return StepOut.of(step)

    @router.get("/confirmations", response_model=list[PendingOut], tags=["people"])
    async def confirmations() -> list[PendingOut]:
        """The writes waiting for a person, oldest first, with their drafts."""
        pending = await service.run("confirmations", lambda: hosted.pending())
        return [PendingOut.of(receipt) for receipt in pending]

    @router.get("/reviews", response_model=list[ReviewOut], tags=["people"])
    async def reviews(status: ReviewStatus | None = None) -> list[ReviewOut]:
        """The review queue (hand-overs), optionally of one status."""
        items = await service.run("reviews", lambda: hosted.gate.store.list_reviews(
            status=status))
        return [ReviewOut.of(item) for item in items]

    @router.post("/reviews/take", response_model=ReviewOut | None, tags=["people"])
    async def take(request: Request) -> ReviewOut | None:
        """The oldest open item, now the caller's (the token's principal); null if none."""
        who = principal(request)
        item = await service.run("take", lambda: hosted.gate.store.take_review(
            reviewer=who, now=hosted.gate.clock()))
        return ReviewOut.of(item) if item is not None else None

    @router.post("/reviews/{review_id}/resolve", response_model=ReviewOut, tags=["people"])
    async def resolve(request: Request, review_id: str, body: ResolveRequest) -> ReviewOut:
        """Close an item as succeeded or failed with a note; its receipt takes that state."""
        who = principal(request)
        item = await service.run("resolve", lambda: service.resolve(
            review_id, body.resolution, body.note, who))
        return ReviewOut.of(item)

    return router
