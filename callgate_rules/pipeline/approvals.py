"""A person's approval that covers later calls with the same values: ``approval_covers``.

A rule that holds a call for a person (``error_class: confirmation_required``), or a
contract's ``confirmation.required``, may declare argument paths::

    approval_covers: [args.recipient]

Once a person approves a call that declaration held, a later call of the **same run**, by
the **same actor**, whose values at **every** declared path are exactly the approved ones
(canonical JSON equality: ``950`` and ``950.0`` are one value, ``"Bob"`` and ``"bob"`` are
two, an absent argument equals only an absent one) is not held by that declaration again.
Nothing else changes: the actor's rights, every other rule (another rule that asks still
asks), the limits and the run's budgets are checked on the later call as on any call.
Never by default: a declaration without ``approval_covers`` asks every time.

The approval is a question's answer, identified by a key: SHA-256 over the canonical JSON
of the question (``contract/rule``, or ``contract/confirmation``), the actor, and the value
at each declared path. The values themselves are never stored (and a masked argument
cannot be declared: the compiler refuses it, as a secret's hash is not kept). What is
stored is an entry of the run's history (``store.history``) whose route is ``approval``,
made when the person's confirmation is accepted: ``Gate.confirm`` (the token verified,
unexpired, unused, the actor's rights and the rules checked again, the write claimed),
``HostedWrites.confirm``, or a review-page approval when the host claims the released
write (``HostedWrites.claim_operation``, rights and rules checked again). A declined,
expired or refused confirmation records nothing, and so covers nothing. The entry lives
with the run: every gate instance on the same store reads it with the run's history, and
it goes when the history's retention purges it. Rules never see it: ``history`` leaves it
out.

A call a covering approval let through says so: its trace has ``covered`` for the rule,
naming the approved operation, who approved it and when, and its log record lists the
approvals under ``covered_by``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from callgate_rules.canonical import canonical_json
from callgate_rules.documents.model import Contract
from callgate_rules.errors import StoreError
from callgate_rules.pipeline.decision import Decision, RawTraceEntry
from callgate_rules.pipeline.history import APPROVAL_ROUTE, kept_in_history
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.record import ASKED, COVERED  # the log record lists them
from callgate_rules.store.base import Receipt
from callgate_rules.store.history import HistoryEntry, RunHistory
from callgate_rules.taxonomy import ErrorClass

__all__ = ["APPROVAL_ROUTE", "ASKED", "COVERED", "RUN_APPROVALS", "Approval", "Question",
           "approval_entries", "approval_entries_of", "approvals_of", "asked_of", "covered",
           "covered_of", "declares_covering", "question_key"]

# Where a decision's variables keep what covering needs; keys no CEL name can spell, so no
# expression reads them and no template can name them.
RUN_APPROVALS = "\0approvals"  # the run's approvals, by key (read with the history)
_ABSENT = {"\0absent": True}  # an absent argument: equal only to an absent one


@dataclass(frozen=True)
class Approval:
    """A person's approval of one question's values in a run."""

    key: str
    question: str  # contract/rule, or contract/confirmation
    operation_id: str  # the write the person approved
    approved_by: str
    at: datetime

    def described(self) -> str:
        return f"approval of {self.operation_id} by {self.approved_by} at {self.at.isoformat()}"

    def as_log(self) -> dict[str, str]:
        return {"question": self.question, "operation_id": self.operation_id,
                "approved_by": self.approved_by, "at": self.at.isoformat()}


@dataclass(frozen=True)
class Question:
    """A question for a person, asked of this call, that an approval could cover."""

    key: str
    question: str

    def as_log(self) -> dict[str, str]:
        return {"question": self.question, "key": self.key}


def declares_covering(contract: Contract) -> bool:
    """Does any question of ``contract`` declare ``approval_covers``?"""
    return bool(contract.confirmation.approval_covers) or any(
        rule.approval_covers for rule in contract.rules)


def question_key(question: str, actor: Mapping[str, Any], arguments: Mapping[str, Any],
                 paths: Sequence[tuple[str, ...]]) -> str | None:
    """The key of ``question`` for this actor and these values; ``None`` when the actor or
    a value has no JSON form (then nothing covers it, and it covers nothing)."""
    values = [[".".join(path), _at(arguments, path)] for path in paths]
    try:
        text = canonical_json([question, dict(actor), values])
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _at(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = arguments
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def covered(question: str, paths: Sequence[tuple[str, ...]], rejection: Rejection | None,
            variables: dict[str, Any], trace: list[RawTraceEntry], subject: str) -> bool:
    """Is the question this call's ``rejection`` asks covered by an approval of the run?
    When it is, the trace says by which (``subject``: the rule's trace subject); when it is
    not, the question is noted (``ASKED``) so the person's approval can cover it next time.
    Only a confirmation a rule asked because it was false is covered: one asked because
    the rule could not be evaluated is asked again."""
    if (rejection is None or rejection.error_class != ErrorClass.CONFIRMATION_REQUIRED
            or rejection.extra.get("evaluation_error")):
        return False
    key = question_key(question, variables["actor"], variables["args"], paths)
    if key is None:
        return False
    approval = variables.get(RUN_APPROVALS, {}).get(key)
    if approval is None:
        variables.setdefault(ASKED, []).append(Question(key, question))
        return False
    trace.append(("validate", subject, "covered", approval.described()))
    variables.setdefault(COVERED, []).append(approval)
    return True


def approvals_of(entries: Iterable[HistoryEntry]) -> dict[str, Approval]:
    """The approvals among a run's history entries, by key (the first of each key)."""
    found: dict[str, Approval] = {}
    for entry in entries:
        if entry.route == APPROVAL_ROUTE:
            recorded = entry.arguments
            found.setdefault(str(recorded["key"]), Approval(
                str(recorded["key"]), str(recorded["question"]),
                str(recorded["operation_id"]), str(recorded["approved_by"]), entry.at))
    return found


def approval_entries(asked: Iterable[Question], *, run_id: str, tool: str, operation_id: str,
                     request_id: str, approved_by: str, at: datetime) -> list[HistoryEntry]:
    """The history entries that record a person's approval of the questions ``asked``
    (``ASKED`` of the approved call's decision). ``operation_id`` is kept in the entry's
    arguments, not its own field: ``mark_executed`` changes the entries of an operation."""
    return [HistoryEntry(
        run_id=run_id, at=at, tool=tool,
        arguments={"key": question.key, "question": question.question,
                   "operation_id": operation_id, "approved_by": approved_by},
        route=APPROVAL_ROUTE, error_class=None, request_id=request_id)
        for question in asked]


def approval_entries_of(decision: Decision, *, run_id: str, request_id: str,
                        approved_by: str, at: datetime) -> list[HistoryEntry]:
    """For a host that keeps the run's history itself (``Gate.check(history=...)``):
    the entries that record a person's approval of ``decision``, a call held for a person
    (its log's ``approval_questions``), to keep beside the call's own entry."""
    asked = [Question(item["key"], item["question"])
             for item in decision.log.get("approval_questions", ())]
    return approval_entries(asked, run_id=run_id, tool=decision.tool or "",
                            operation_id=decision.operation_id or "", request_id=request_id,
                            approved_by=approved_by, at=at)


def asked_of(variables: Mapping[str, Any]) -> list[Question]:
    """The questions a decision asked that an approval could cover."""
    asked: list[Question] = variables.get(ASKED, [])
    return asked


def covered_of(variables: Mapping[str, Any]) -> list[Approval]:
    """The approvals that covered questions of a decision."""
    approvals: list[Approval] = variables.get(COVERED, [])
    return approvals


def record_approval(histories: RunHistory, count: Callable[[str], None],
                    variables: Mapping[str, Any], receipt: Receipt, *, approved_by: str,
                    now: datetime, run_id: str | None = None) -> None:
    """A person's confirmation of ``receipt``'s write was accepted: the questions it
    answered that declare ``approval_covers`` (``variables``: the write decided again for
    the confirmation) are recorded in its run's history, where they cover later calls of
    the run with the same values. A write in no run the store knows records nothing; a
    store that fails it is counted (``count``) and the next call asks again."""
    asked = asked_of(variables)
    if not asked:
        return
    try:
        run_id = run_id or histories.run_of(receipt.operation_id)
    except StoreError:
        count("history_not_recorded")
        return
    if run_id is None:
        return
    entries = approval_entries(asked, run_id=run_id, tool=receipt.tool,
                               operation_id=receipt.operation_id,
                               request_id=receipt.request_id, approved_by=approved_by, at=now)

    def record() -> None:
        for entry in entries:
            histories.record_history(entry)
    kept_in_history(record, count)
