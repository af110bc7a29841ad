"""A run's intent over HTTP: ``PUT /v1/runs/{run_id}/intent`` declares it (or narrows it),
``GET /v1/runs/{run_id}/intent`` reads it (``pipeline.intents``).

The run ID is scoped by the token's pinned actor fields, as ``/v1/decide``'s is
(``api.scoped_request_id``): the intent a tenant declares bounds the runs it names in
``/v1/decide``, and another tenant naming the same run reaches another run — answered, for
a read, exactly as a run with no intent. A token that pins no actor field, which
``--unscoped none`` gives nothing, may neither declare nor read one. What the service
refuses:

- 422 — the intent is not valid (each problem in ``errors``, with its field);
- 409 — it would widen the run's intent (each widening in ``errors``; counted, logged),
  or the run cannot take one now: the configuration takes no run intents, or the run has
  already decided a call, or the conversation holds tool output.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from callgate_rules.intent import BoundIntent, IntentError
from callgate_rules.pipeline.hosted import HostedWrites
from callgate_rules.pipeline.intents import IntentRefused, IntentWidened
from callgate_rules.server.api import PROBLEMS, caller_scope, principal, scoped_request_id
from callgate_rules.server.bundles import CurrentHosted
from callgate_rules.server.models import Strict
from callgate_rules.server.problems import Problem
from callgate_rules.server.service import Service
from callgate_rules.store.scoping import NOTHING

RUN_PATH = "/runs/{run_id}/intent"


class IntentRequest(Strict):
    intent: dict[str, Any] = Field(description="The run's intent: a RunIntent document, or "
                                               "its spec (tools, totals, request)")
    declared_by: str | None = Field(default=None, min_length=1, max_length=200,
                                    description="Who made it (a planner, a form, a person); "
                                                "the caller's principal is recorded too")
    conversation: list[Any] | None = Field(
        default=None, description="The conversation so far: a first intent is refused "
                                  "once it holds tool output")


class IntentOut(BaseModel):
    run_id: str = Field(description="The run, as the caller named it")
    version: int = Field(description="1 when first declared, one more each time narrowed")
    intent: dict[str, Any]
    declared_by: str
    declared_at: datetime

    @classmethod
    def of(cls, run_id: str, bound: BoundIntent) -> IntentOut:
        return cls(run_id=run_id, version=bound.version, intent=bound.intent.as_data(),
                   declared_by=bound.declared_by, declared_at=bound.declared_at)


def intents_router(service: Service) -> APIRouter:
    router = APIRouter(prefix="/v1", responses=PROBLEMS)
    hosted = cast(HostedWrites, CurrentHosted(service))  # follows a reloaded bundle

    @router.put(RUN_PATH, response_model=IntentOut, tags=["runs"])
    async def declare(request: Request, run_id: str, body: IntentRequest) -> IntentOut:
        """Bind the run's intent, made from the user's request before the run read any tool
        output; or narrow it. A call of the run outside it then goes where the policy says
        (a person's confirmation by default)."""
        if caller_scope(request, service) == NOTHING:
            raise Problem(403, "Not allowed", "this caller's token pins no actor field, and "
                          "the service gives such callers nothing (--unscoped)")
        scoped = scoped_request_id(request, _checked(run_id))
        caller = principal(request)
        declared_by = caller if body.declared_by is None else (
            f"{body.declared_by} (via {caller})")
        try:
            bound = await service.run("intent", lambda: hosted.gate.declare_intent(
                scoped, body.intent, declared_by=declared_by,
                conversation=body.conversation))
        except IntentWidened as widened:
            raise Problem(409, "The intent would widen", str(widened).split(":\n")[0],
                          [{"field": "body.intent", "message": part}
                           for part in widened.widenings]) from None
        except IntentRefused as refused:
            raise Problem(409, "The run cannot take an intent now", refused.problems[0],
                          [{"field": "body.intent", "message": problem}
                           for problem in refused.problems]) from None
        except IntentError as error:
            raise Problem(422, "The intent cannot be used", "see errors",
                          [{"field": "body.intent", "message": problem}
                           for problem in error.problems]) from None
        return IntentOut.of(run_id, bound)

    @router.get(RUN_PATH, response_model=IntentOut, tags=["runs"])
    async def read(request: Request, run_id: str) -> IntentOut:
        """The run's intent as bound now; 404 when none was declared."""
        if caller_scope(request, service) == NOTHING:  # as a run with none
            raise Problem(404, "No intent", f"run {run_id!r} has no intent")
        scoped = scoped_request_id(request, _checked(run_id))
        bound = await service.run("intent", lambda: hosted.gate.intent_of(scoped))
        if bound is None:
            raise Problem(404, "No intent", f"run {run_id!r} has no intent")
        return IntentOut.of(run_id, bound)

    return router


def _checked(run_id: str) -> str:
    if not 0 < len(run_id) <= 200:
        raise Problem(422, "Bad run ID", "a run ID is 1 to 200 characters",
                      [{"field": "path.run_id", "message": "1 to 200 characters"}])
    return run_id
