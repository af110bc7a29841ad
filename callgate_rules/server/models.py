"""The shapes of the decision API, as the OpenAPI document shows them.

Request bodies forbid unknown fields (a misspelt ``request_id`` is an error, not silently
a new request). The field names are the library's parameter names.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticSerializationError, to_json

from callgate_rules.confirmation.drafts import of_receipt
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.hosted import Step
from callgate_rules.store.base import Receipt, ReviewItem

ID = Field(min_length=1, max_length=200)
ACTOR = Field(description="Who the call is for, as the host knows them (never taken from the "
                          "model's output); fields the host's token pins must match")
SESSION = Field(default=None, description="Facts about the session no argument can prove")
RECORDS = Field(default=None, description="The records the call's look-ups need, by look-up "
                                          "name: a record, a list of them, or null for none; "
                                          "each checked against the look-up's schema")
RUN_ID = Field(default=None, min_length=1, max_length=200,
               description="The agent run (or session) this proposal belongs to: the "
                           "routing table's per-run limits hold across requests")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DecideRequest(Strict):
    model_output: Any = Field(description="The model's tool call, in any format the library "
                                          "accepts: an object, a list, or text")
    actor: dict[str, Any] = ACTOR
    request_id: str = Field(min_length=1, max_length=200,
                            description="The user's request: the same call proposed twice "
                                        "within it is one operation")
    session: dict[str, Any] | None = SESSION
    conversation: list[Any] | None = Field(
        default=None, description="The messages that led to the call (OpenAI or Anthropic "
                                  "format), from which every value's provenance is read")
    run_id: str | None = RUN_ID
    records: dict[str, Any] | None = RECORDS


# /v1/claim takes one of two shapes; the OpenAPI document says so exactly (a key given as
# null counts as given, so "neither" and "both" are refused however they are spelt).
CLAIM_SHAPES: dict[str, Any] = {"oneOf": [
    {"title": "a call, decided again and claimed",
     "required": ["model_output", "request_id"],
     "properties": {"model_output": {"not": {"type": "null"}},
                    "request_id": {"type": "string"}},
     "not": {"required": ["operation_id"]}},
    {"title": "an operation the store already has",
     "required": ["operation_id"],
     "properties": {"operation_id": {"type": "string"}},
     "not": {"required": ["model_output"]}},
]}


class ClaimRequest(Strict):
    """Either the call (decided again, then claimed) or the ID of a stored operation."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=CLAIM_SHAPES)

    model_output: Any = Field(default=None, description="The call, as for /v1/decide")
    operation_id: str | None = Field(default=None, min_length=1, max_length=200,
                                     description="An operation the store already has")
    actor: dict[str, Any] = ACTOR
    request_id: str | None = Field(default=None, min_length=1, max_length=200)
    session: dict[str, Any] | None = SESSION
    conversation: list[Any] | None = None
    run_id: str | None = RUN_ID
    records: dict[str, Any] | None = RECORDS

    @model_validator(mode="after")
    def one_of(self) -> ClaimRequest:
        given = self.model_fields_set
        if ("model_output" in given) == ("operation_id" in given):
            raise ValueError("give either model_output (with request_id) or operation_id, "
                             "not both and not neither")
        if "operation_id" in given and self.operation_id is None:
            raise ValueError("operation_id may not be null")
        if "model_output" in given and self.model_output is None:
            raise ValueError("model_output may not be null")
        if "model_output" in given and self.request_id is None:
            raise ValueError("request_id is required with model_output")
        return self


class FailureReport(Strict):
    sent: bool = Field(description="Could the request have reached the destination?")
    detail: str = Field(default="", max_length=2000)
    error_class: Literal["transient", "unknown_outcome", "permanent", "conflict"] | None = None
    retry_after: float | None = Field(default=None, ge=0, le=3600)


class FinishRequest(Strict):
    operation_id: str = ID
    lease: str = ID
    actor: dict[str, Any] = ACTOR
    session: dict[str, Any] | None = SESSION
    result: Any = Field(default=None, description="The destination's answer, as it gave it")
    failure: FailureReport | None = Field(default=None, description="Instead of a result")
    records: dict[str, Any] | None = RECORDS


class ReconcileRequest(Strict):
    operation_id: str = ID
    lease: str = ID
    actor: dict[str, Any] = ACTOR
    session: dict[str, Any] | None = SESSION
    found: Any = Field(default=None, description="What the destination holds under the "
                                                 "operation ID; null when nothing")
    records: dict[str, Any] | None = RECORDS


class ConfirmRequest(Strict):
    confirmation_token: str = Field(min_length=1, max_length=4000)
    actor: dict[str, Any] = ACTOR
    confirmed_by: str = Field(min_length=1, max_length=200,
                              description="The person who confirmed, as the host knows them")
    session: dict[str, Any] | None = SESSION
    records: dict[str, Any] | None = RECORDS


class ResolveRequest(Strict):
    resolution: Literal["succeeded", "failed"]
    note: str = Field(min_length=1, max_length=4000)


_ENCODER = msgspec.json.Encoder()


def answerable(value: Any) -> Any:
    """``value`` with every text encodable as UTF-8: a lone surrogate the model wrote (and
    a decision echoes, e.g. as the tool's name) is answered as its escape, ``\\ud800``,
    since no JSON answer can carry it."""
    try:  # what encodes as JSON (most answers): as it is, without a walk in Python
        _ENCODER.encode(value)
        return value
    except (TypeError, ValueError):  # another type, or a lone surrogate (UnicodeEncodeError)
        return _answerable(value)


def _answerable(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, Mapping):
        return {_answerable(key): _answerable(member) for key, member in value.items()}
    if isinstance(value, list | tuple):
        return [_answerable(member) for member in value]
    return value


class Answer(BaseModel):
    """An answer of the API: every text in it can be sent (``answerable``)."""

    @model_validator(mode="before")
    @classmethod
    def encodable(cls, data: Any) -> Any:
        return answerable(data)


class DecisionOut(Answer):
    route: str
    error_class: str | None
    tool: str | None
    contract_version: str | None
    rule: str | None
    agent_message: str
    user_message: str
    versions: dict[str, str]
    candidates: list[dict[str, Any]]
    warnings: list[dict[str, Any]]
    operation_id: str | None
    result: Any = None
    draft: str | None
    confirmation_token: str | None
    limit_path: str | None
    retry_after: float | None
    review_id: str | None

    @classmethod
    def of(cls, decision: Decision) -> DecisionOut:
        return cls(**decision_fields(decision))

    @staticmethod
    def json_of(decision: Decision) -> bytes:
        """``of(decision).model_dump_json()``, the same bytes, without building the model:
        ``POST /v1/decide`` answers this way (``api.DecideEndpoint``), once per request.
        (A model writes a non-finite number as null; ``to_json`` would write ``Infinity``,
        which is not JSON, unless told.) The fields are written as they are, and made
        ``answerable`` only when ``to_json`` refuses them (a lone surrogate, which
        ``answerable`` escapes): looking for one first cost a third as much again."""
        fields = decision_fields(decision)
        try:
            return to_json(fields, inf_nan_mode="null")
        except PydanticSerializationError:
            return to_json(answerable(fields), inf_nan_mode="null")


def decision_fields(decision: Decision) -> dict[str, Any]:
    """A decision as ``DecisionOut``'s fields, in their order."""
    return {
        "route": str(decision.route),
        "error_class": str(decision.error_class) if decision.error_class else None,
        "tool": decision.tool, "contract_version": decision.contract_version,
        "rule": decision.rule, "agent_message": decision.agent_message,
        "user_message": decision.user_message, "versions": dict(decision.versions),
        "candidates": [dict(c) for c in decision.candidates],
        "warnings": [dict(w.__dict__) for w in decision.warnings],
        "operation_id": decision.operation_id, "result": decision.result,
        "draft": decision.draft, "confirmation_token": decision.confirmation_token,
        "limit_path": decision.limit_path, "retry_after": decision.retry_after,
        # a hand-over's review, in ``extra`` whichever way it ended (never the whole log)
        "review_id": decision.extra.get("review_id")}


class StepOut(Answer):
    action: Literal["execute", "reconcile", "retry", "done"] = Field(
        description="execute: send it now under operation_id before deadline; reconcile: ask "
                    "the destination what it holds under operation_id and report it; retry: "
                    "claim again after retry_after; done: the decision says how it ended")
    operation_id: str
    lease: str | None
    lease_expires_at: datetime | None
    deadline: datetime | None
    retry_after: float | None
    arguments: dict[str, Any] | None
    decision: DecisionOut | None

    @classmethod
    def of(cls, step: Step) -> StepOut:
        return cls(action=step.action.value, operation_id=step.operation_id, lease=step.lease,
                   lease_expires_at=step.lease_expires_at, deadline=step.deadline,
                   retry_after=step.retry_after,
                   arguments=dict(step.arguments) if step.arguments is not None else None,
                   decision=DecisionOut.of(step.decision) if step.decision else None)


class PendingOut(Answer):
    operation_id: str
    tool: str
    arguments: dict[str, Any]
    actor: dict[str, Any]
    draft: str | None
    draft_rows: dict[str, Any] = Field(description=(
        "The draft as rows (confirmation.drafts.Draft): each argument's shown value, its "
        "warnings and their evidence, the rule that held it, the user's requests"))
    created_at: datetime
    expires_at: datetime | None

    @classmethod
    def of(cls, receipt: Receipt) -> PendingOut:
        held = of_receipt(receipt.detail, receipt.tool, receipt.arguments)
        return cls(operation_id=receipt.operation_id, tool=receipt.tool,
                   arguments=dict(receipt.arguments), actor=dict(receipt.actor),
                   draft=held.text(), draft_rows=held.as_dict(),
                   created_at=receipt.created_at, expires_at=receipt.confirmation_expires_at)


class ReceiptOut(Answer):
    """A receipt as a host may read it: where its operation stands, without its arguments
    or result (the host sent the one and received the other)."""

    operation_id: str
    state: str
    tool: str
    contract_version: str
    request_id: str
    args_hash: str
    error_class: str | None
    attempts: int
    confirmed_by: str | None
    created_at: datetime
    updated_at: datetime
    log_line: str | None = Field(description=(
        "The SHA-256 of the decision log line of the decision that executed the write "
        "(`callgate log verify --store` holds the two together); null when no decision log "
        "was written, or the write did not run here"))

    @classmethod
    def of(cls, receipt: Receipt) -> ReceiptOut:
        return cls(operation_id=receipt.operation_id, state=str(receipt.state),
                   tool=receipt.tool, contract_version=receipt.contract_version,
                   request_id=receipt.request_id, args_hash=receipt.args_hash,
                   error_class=receipt.error_class, attempts=receipt.attempts,
                   confirmed_by=receipt.confirmed_by, created_at=receipt.created_at,
                   updated_at=receipt.updated_at, log_line=receipt.log_line)


class ReviewOut(Answer):
    review_id: str
    tool: str
    reason: str
    summary: str
    operation_id: str | None
    payload: dict[str, Any]
    status: str
    created_at: datetime
    taken_by: str | None
    resolution: str | None
    note: str | None
    resolved_by: str | None

    @classmethod
    def of(cls, item: ReviewItem) -> ReviewOut:
        return cls(review_id=item.review_id, tool=item.tool, reason=item.reason,
                   summary=item.summary, operation_id=item.operation_id,
                   payload=dict(item.payload), status=str(item.status),
                   created_at=item.created_at, taken_by=item.taken_by,
                   resolution=item.resolution, note=item.note, resolved_by=item.resolved_by)
