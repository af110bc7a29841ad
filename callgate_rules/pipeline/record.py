"""What a decision leaves for engineers and for the person who confirms it: the log record
(one JSON line, the contract's sensitive fields masked) and the draft of a held write.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from callgate_rules.confirmation.drafts import Draft, draft_of
from callgate_rules.decision_log import replay_record
from callgate_rules.documents.model import Contract
from callgate_rules.masking import COMPACT_JSON, values_at
from callgate_rules.masking import MASK as MASK
from callgate_rules.masking import Masking as Masking
from callgate_rules.masking import mask as mask
from callgate_rules.taxonomy import ErrorClass

if TYPE_CHECKING:  # types only: the decision works its log out here
    from callgate_rules.pipeline.decision import Decided, Decision, Finished
    from callgate_rules.provenance.conversation import Conversation


# Where a decision's variables list the approvals that covered its questions, and the
# questions it asks that an approval could cover (``pipeline.approvals``): keys no CEL name
# can spell.
COVERED = "\0covered"
ASKED = "\0asked"


def log_of(decision: Decision) -> dict[str, Any]:
    """A decision's log record, worked out from its record: the check's
    (``log_record``), or an executed call's (``executed_log``)."""
    if decision.finished is not None:
        return executed_log(decision.finished)
    assert decision.decided is not None, "a decision not made by step 7 is given its log"
    record = log_record(decision.decided)
    if decision.operation_id is not None:  # an allowed write a host runs (``hosted``)
        record["operation_id"] = decision.operation_id
    return record


def counted_of(decided: Decided) -> dict[str, Any]:
    """What ``decision_log.count`` reads of ``log_record(decided)``, without the rest of it:
    a decision of steps 1–4 has not been retried, reconciled or sent."""
    return {"route": str(decided.route),
            "error_class": str(decided.error_class) if decided.error_class else None,
            "shadow": [verdict.__dict__ for verdict in decided.shadow]}


def log_record(decided: Decided) -> dict[str, Any]:
    """The log record of steps 1–4: one JSON line for engineers, with the actor summarised
    and the contract's sensitive arguments masked, wherever they appear in it; for a call
    that parsed, the inputs ``callgate replay`` decides it again with (``replay``)."""
    contract, call, arguments = decided.contract, decided.call, decided.arguments
    extra = decided.rejection.extra if decided.rejection is not None else {}
    record: dict[str, Any] = {
        "ts": datetime.fromtimestamp(decided.decided_at, UTC).isoformat(),
        "request_id": decided.request_id,
        "tool": contract.name if contract else extra.get("proposed_tool"),
        "contract_version": contract.version if contract else None,
        "versions": dict(decided.versions),
        "route": str(decided.route),
        "error_class": str(decided.error_class) if decided.error_class else None,
        "rule": decided.rule,
        "detail": decided.detail,
        "actor": _actor_summary(decided.actor),
        "arguments": arguments,
        "shadow": [v.__dict__ for v in decided.shadow],
        "elapsed_ms": round(decided.elapsed * 1000, 3),
    }
    if "evaluation_error" in extra:
        record["evaluation_error"] = extra["evaluation_error"]
    if call is not None and call.note:
        record["note"] = call.note
    masking = None
    if contract is not None and contract.mask and arguments is not None:
        masking = Masking(contract, arguments)
        record.update({key: masking(record[key]) for key in _MAY_ECHO if key in record})
        record["arguments"] = masking.arguments
    variables = decided.variables
    if COVERED in variables:  # which approvals a person gave
        record["covered_by"] = [approval.as_log() for approval in variables[COVERED]]
    if ASKED in variables:  # what a person's approval would cover
        record["approval_questions"] = [question.as_log() for question in variables[ASKED]]
    if contract is not None and arguments is not None:
        record["replay"] = _replay_inputs(decided, masking)
    return record


def executed_log(finished: Finished) -> dict[str, Any]:
    """The log record of an executed call: the check's, with what execution did, masked
    like the arguments it may echo."""
    counted = finished.counted
    masking = Masking(finished.contract, finished.basis.arguments or {})
    return {
        **finished.basis.log,
        "route": counted["route"],
        "error_class": counted["error_class"],
        "detail": masking(finished.detail),
        "operation_id": finished.operation,
        "receipt_state": finished.receipt_state,
        # the destination's own answer, never the model's retelling; masked like the
        # arguments it may echo
        "result": masking(finished.result),
        "retries": counted["retries"],
        "reconciled": counted["reconciled"],
        "unknown_outcome": counted["unknown_outcome"],
        "review_id": finished.review_id,
        "elapsed_ms": finished.elapsed_ms,
    }


def _replay_inputs(decided: Decided, masking: Masking | None) -> dict[str, Any]:
    """What the decision read (``decision_log.ReplayInputs``), masked as the arguments
    are: the records looked up may echo a sensitive argument, so they are masked like any
    other text of the record."""
    contract, arguments, variables = decided.contract, decided.arguments, decided.variables
    assert contract is not None and arguments is not None
    error_class, rule = decided.error_class, decided.rule
    now = variables.get("now")
    looked_up = {lookup.name: (lookup.collection, variables[lookup.name])
                 for lookup in contract.lookups if lookup.name in variables}
    if error_class == ErrorClass.NOT_FOUND and rule is not None:
        for lookup in contract.lookups:  # the look-up that found nothing: asked, none found
            if rule == f"{contract.name}/lookup.{lookup.name}":
                looked_up[lookup.name] = (lookup.collection, [])
    if masking is not None and masking.may_be_in([found for _, found in looked_up.values()]):
        looked_up = {name: (collection, masking(found))
                     for name, (collection, found) in looked_up.items()}
    origins = variables.get("origins")  # its parts quote the arguments' texts
    if origins is not None and masking is not None and masking.may_be_in(origins):
        origins = masking(origins)
    return replay_record(
        now=now.isoformat() if isinstance(now, datetime) else None, actor=decided.actor,
        session=decided.session or {}, records=looked_up, provenance=variables.get("provenance"),
        masked=tuple(".".join(path) for path in contract.mask if values_at(arguments, path))
        if contract.mask else (),
        decided=(str(decided.route), str(error_class) if error_class else None, rule),
        origins=origins, reads=variables.get("reads"))


# What in a log record may repeat an argument's value: a check's detail quotes it, a rule's
# verdict renders it, a destination's answer echoes it.
_MAY_ECHO = ("detail", "shadow", "evaluation_error", "result", "note")


def _actor_summary(actor: Mapping[str, Any]) -> dict[str, Any]:
    """Identify the actor in logs without copying everything the host knows about them."""
    return {k: actor[k] for k in ("id", "tenant", "role", "roles") if k in actor}


def draft(contract: Contract, variables: Mapping[str, Any],
          conversation: Conversation | None = None, rule: str | None = None,
          user_message: str | None = None) -> Draft:
    """What the person confirms (``confirmation.drafts``): the summary, a row per argument
    from the canonical arguments, its warnings and their evidence, the rule that held it."""
    return draft_of(contract, variables, conversation, rule, user_message)


def compact(value: Any) -> str:
    """A value as short JSON for a message or a draft: at most 2,000 characters."""
    text = COMPACT_JSON.encode(value)
    return text if len(text) <= 2000 else text[:1997] + "..."

