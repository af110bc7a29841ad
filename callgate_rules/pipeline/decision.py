"""What the gate answers: one record of what was decided (``Decided``), and the decision a
host reads (``Decision``): its route, three messages and a trace.

Step 7 makes the record once. The decision's plain fields are set from it at once; its
messages, log record and trace are worked out from it by plain functions
(``rejection_messages.messages_of``, ``record.log_of``, ``trace_entries``) on first read and
kept: most decisions' logs and traces are never read by anyone, and building them is a good
part of a decision's cost. Each of those functions depends on the record alone (the request
ID is drawn when the record is made), so two threads reading one decision at once get the
same answer and no lock is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from callgate_rules.pipeline import record, rejection_messages
from callgate_rules.taxonomy import ErrorClass, Route

if TYPE_CHECKING:
    from callgate_rules.documents.model import Contract, Routing
    from callgate_rules.pipeline.outcome import Rejection
    from callgate_rules.pipeline.parse import ParsedCall
    from callgate_rules.provenance import Sealer


@dataclass(frozen=True)
class TraceEntry:
    """One step or rule evaluated, with its result, for ``--explain``."""

    step: str  # propose, parse, validate, authorize, execute, reconcile, route
    subject: str  # what was checked: a rule name, a lookup, "schema", ...
    result: str  # "pass", "fail", "allow", "deny", "skip", "error", "match", ...
    detail: str = ""

    def __str__(self) -> str:
        detail = f" — {self.detail}" if self.detail else ""
        return f"{self.step:<9} {self.subject}: {self.result}{detail}"


# What the steps record while deciding: (step, subject, result) or (step, subject, result,
# detail). The steps append plain tuples; ``Decision.trace`` makes them entries when read.
RawTraceEntry = tuple[str, str, str] | tuple[str, str, str, str]


def trace_entries(raw: tuple[RawTraceEntry, ...]) -> tuple[TraceEntry, ...]:
    return tuple(TraceEntry(*entry) for entry in raw)


@dataclass(frozen=True)
class ShadowVerdict:
    """A verdict of a rule in ``warn`` or ``audit`` mode: recorded, not enforced."""

    rule: str
    mode: str
    error_class: str
    message: str


class Decided(NamedTuple):
    """What step 7 decided about one proposal, made once: everything a decision's messages
    and log record are worked out from. What the host handed in and may change afterwards
    (the actor, the arguments) is copied, one level deep.

    A named tuple, made from its fields in their order (``Router.decided``): one is made per
    decision, and a frozen dataclass, or a call by keyword, would cost several times as
    much as the rest of the record."""

    # the verdict
    route: Route
    error_class: ErrorClass | None
    rule: str | None  # the deciding rule: the allow rule's name, or the rejection's
    detail: str  # for the log only
    rejection: Rejection | None  # None when allowed
    # what it was about, and what it read, as decided on
    contract: Contract | None
    call: ParsedCall | None
    versions: Mapping[str, str]  # the documents decided with; the plan's, never changed
    actor: dict[str, Any]
    arguments: dict[str, Any] | None
    session: Mapping[str, Any] | None
    variables: Mapping[str, Any]  # what the rules read
    more: dict[str, Any] | None  # for a rejection the plan prepared: what its messages read
    shadow: tuple[ShadowVerdict, ...]
    # when, and for which request
    request_id: str  # the host's, or one named for the decision when it gave none
    decided_at: float  # seconds since the epoch
    elapsed: float  # seconds spent on steps 1–4
    # how its messages are worded
    routing: Routing
    tools: str  # the tools an unknown one is told about


class Finished(NamedTuple):
    """What steps 5–7 added to a decision that went on to execution: the log of such a
    decision is the check's (``basis.log``) with these facts."""

    basis: Decision  # the decision of steps 1–4
    contract: Contract
    operation: str | None
    detail: str  # for the log only: what an executor, a finder or a store said
    receipt_state: str | None
    result: Any
    review_id: str | None
    elapsed_ms: float
    counted: Mapping[str, Any]  # what the counters read, worked out when it ended


# A message, log or trace not given: worked out from the decision's record when first read.
FROM_RECORD: Any = object()


class Decision:
    """The gate's answer to one proposal. ``error_class`` is ``None`` when all went well.

    A decision made by step 7 (``Decision.of``) works out ``agent_message``,
    ``user_message``, ``log`` and ``trace`` from its record (``decided``; ``finished`` once
    executed) when first read; one made otherwise (a refused confirmation, say) is given
    them. A field below with a default holds it until set (``Decision.of`` sets only what
    step 7 decided)."""

    route: Route
    error_class: ErrorClass | None
    tool: str | None = None
    contract_version: str | None = None
    rule: str | None = None  # the rule that decided, as ``document/rule`` or ``tool/rule``
    versions: Mapping[str, str]  # every document that took part; the decision's own
    arguments: Mapping[str, Any] | None = None  # the validated arguments
    call_id: str | None = None  # the model's own call ID, to answer it in its format
    candidates: tuple[Mapping[str, Any], ...] = ()  # for ``ambiguous``: permitted fields only
    warnings: tuple[ShadowVerdict, ...] = ()
    operation_id: str | None = None
    result: Any = None  # the destination's own result, apart from the model's retelling
    draft: str | None = None  # what a person confirms, for ``await_confirmation``
    confirmation_token: str | None = None
    limit_path: str | None = None  # set when a budget's limit decided the route
    retry_after: float | None = None  # seconds to wait, for ``retry``
    extra: Mapping[str, Any] = MappingProxyType({})
    sealer: Sealer | None = None  # what the formats helpers seal the agent message with
    decided: Decided | None = None  # the record step 7 made
    finished: Finished | None = None  # what steps 5–7 added to it
    # Given, or worked out from the record when first read (a message is its error when it
    # could not be rendered: ``_read``).
    _agent_message: str | Exception = FROM_RECORD  # back into the model's context
    _user_message: str | Exception = FROM_RECORD  # safe to show the person in the chat
    _log: Mapping[str, Any] = FROM_RECORD  # for engineers: masked, structured, one JSON line
    _trace: tuple[TraceEntry, ...] | tuple[RawTraceEntry, ...] = ()

    def __init__(
        self, route: Route, error_class: ErrorClass | None, *, tool: str | None = None,
        contract_version: str | None = None, rule: str | None = None,
        agent_message: str = FROM_RECORD, user_message: str = FROM_RECORD,
        log: Mapping[str, Any] = FROM_RECORD, versions: Mapping[str, str] | None = None,
        trace: tuple[TraceEntry, ...] | tuple[RawTraceEntry, ...] = (),
        arguments: Mapping[str, Any] | None = None, call_id: str | None = None,
        candidates: tuple[Mapping[str, Any], ...] = (),
        warnings: tuple[ShadowVerdict, ...] = (), operation_id: str | None = None,
        result: Any = None, draft: str | None = None, confirmation_token: str | None = None,
        limit_path: str | None = None, retry_after: float | None = None,
        extra: Mapping[str, Any] | None = None, sealer: Sealer | None = None,
        decided: Decided | None = None, finished: Finished | None = None,
    ) -> None:
        if decided is None and FROM_RECORD in (agent_message, user_message, log):
            raise TypeError("a decision without a record (decided) is given agent_message, "
                            "user_message and log")
        self.route, self.error_class = route, error_class
        self.tool, self.contract_version, self.rule = tool, contract_version, rule
        self._agent_message, self._user_message = agent_message, user_message
        self._log, self._trace = log, trace
        self.versions = {} if versions is None else versions
        self.arguments, self.call_id = arguments, call_id
        self.candidates, self.warnings = candidates, warnings
        self.operation_id, self.result = operation_id, result
        self.draft, self.confirmation_token = draft, confirmation_token
        self.limit_path, self.retry_after = limit_path, retry_after
        if extra is not None:
            self.extra = extra
        self.sealer, self.decided, self.finished = sealer, decided, finished

    @classmethod
    def of(cls, decided: Decided, trace: tuple[RawTraceEntry, ...],
           agent_message: str = FROM_RECORD, user_message: str = FROM_RECORD) -> Decision:
        """The decision step 7 makes of its record: the fields the host reads at once are
        set from it, the others keep their defaults; the messages (unless given), the log
        and the trace are worked out when first read. (Made without ``__init__``, whose
        twenty-odd keyword arguments would cost a tenth of a whole decision.)"""
        # the verdict and what it was about, the record's first eight fields, read at once (a
        # named tuple's field read by name costs several times a local's)
        route, error_class, rule, _, rejection, contract, call, versions = decided[:8]
        decision = object.__new__(cls)
        decision.route, decision.error_class, decision.rule = route, error_class, rule
        decision.decided, decision._trace = decided, trace
        if contract is not None:
            decision.tool, decision.contract_version = contract.name, contract.version
        decision.versions = dict(versions)  # the decision's own, to change at will
        if call is not None:
            decision.arguments, decision.call_id = call.arguments, call.call_id
        if rejection is not None and rejection.candidates:
            decision.candidates = rejection.candidates
        if decided.shadow:  # warn-mode verdicts travel with the decision; audit ones in the log
            decision.warnings = tuple(v for v in decided.shadow if v.mode == "warn")
        if agent_message is not FROM_RECORD:
            decision._agent_message, decision._user_message = agent_message, user_message
        return decision

    @property
    def agent_message(self) -> str:
        """What goes back into the model's context."""
        if self._agent_message is FROM_RECORD:
            self._word()
        return _read(self._agent_message)

    @property
    def user_message(self) -> str:
        """What is safe to show the person in the chat."""
        if self._user_message is FROM_RECORD:
            self._word()
        return _read(self._user_message)

    @property
    def log(self) -> Mapping[str, Any]:
        """The log record: masked, structured, one JSON line for engineers."""
        if self._log is FROM_RECORD:
            self._log = record.log_of(self)
        return self._log

    @property
    def trace(self) -> tuple[TraceEntry, ...]:
        """Each step and rule evaluated, with its result (``callgate check --explain``)."""
        trace = self._trace
        if trace and type(trace[0]) is tuple:  # the steps' raw entries, made entries now
            trace = self._trace = trace_entries(trace)
        return trace  # type: ignore[return-value]

    @property
    def allowed(self) -> bool:
        return self.error_class is None

    def counted(self) -> Mapping[str, Any]:
        """What ``decision_log.count`` reads of the log: for a decision whose log nobody has
        read yet, the few facts it counts (an executed call's, worked out when it ended), so
        that counting does not build the whole record; else the log."""
        if self._log is FROM_RECORD:
            if self.finished is not None:
                return self.finished.counted
            if self.decided is not None:
                return record.counted_of(self.decided)
        return self.log

    def _word(self) -> None:
        """The messages still to be worked out, both together on the first read of either
        (one given by ``replace`` is kept)."""
        assert self.decided is not None, "a decision not made by step 7 is given its messages"
        agent, user = rejection_messages.messages_of(self.decided)
        if self._agent_message is FROM_RECORD:
            self._agent_message = agent
        if self._user_message is FROM_RECORD:
            self._user_message = user

    def replace(self, **changes: Any) -> Decision:
        """A copy with ``changes`` (any of the constructor's arguments); what is still to be
        worked out from the record stays so in the copy, a message given is kept."""
        return self.replaced(changes)

    def replaced(self, changes: Mapping[str, Any]) -> Decision:
        """``replace``, the changes given as a mapping: an executed write makes one copy per
        call, and keyword arguments gathered into a dict cost more than a dict display.

        The copy is this decision's attributes with the changes set over them, not a new
        ``__init__`` of every field."""
        if not _REPLACEABLE.issuperset(changes):
            unknown = ", ".join(sorted(changes.keys() - _REPLACEABLE))
            raise TypeError(f"Decision has no field {unknown}")
        copy = object.__new__(type(self))
        attributes = copy.__dict__
        attributes.update(self.__dict__)
        attributes.update(changes)
        for name, stored in _STORED_AS.items():  # kept under the names their properties read
            if name in changes:  # (four look-ups: cheaper than a set of the keys in common)
                attributes[stored] = attributes.pop(name)
        # None means what the constructor makes of it: no versions, the shared empty extra
        if attributes["versions"] is None:
            attributes["versions"] = {}
        if "extra" in changes and changes["extra"] is None:
            del attributes["extra"]
        return copy

    def fields(self) -> dict[str, Any]:
        """Every public field by name, each read (so worked out)."""
        return {name: getattr(self, name) for name in PUBLIC_FIELDS}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return self.fields() == other.fields()

    __hash__ = None  # type: ignore[assignment]  # it holds dicts

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.fields().items())
        return f"Decision({shown})"

    def __getstate__(self) -> dict[str, Any]:
        """What ``pickle`` and ``copy`` take: every public field worked out (the record may
        hold what cannot be pickled). A message that cannot be rendered is copied as it
        is, to fail again when the copy reads it; the sealer, which holds a key, is left
        out: a copy seals with the default sealer."""
        if FROM_RECORD in (self._agent_message, self._user_message):
            self._word()
        state = {name: getattr(self, name) for name in PUBLIC_FIELDS
                 if name not in MESSAGE_FIELDS}
        state["agent_message"], state["user_message"] = self._agent_message, self._user_message
        state["extra"] = dict(self.extra)  # the shared empty default is read-only
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``callgate check --format json``."""
        return {
            "route": str(self.route),
            "error_class": str(self.error_class) if self.error_class else None,
            "tool": self.tool,
            "contract_version": self.contract_version,
            "rule": self.rule,
            "agent_message": self.agent_message,
            "user_message": self.user_message,
            "versions": dict(self.versions),
            "arguments": self.arguments,
            "candidates": [dict(c) for c in self.candidates],
            "warnings": [w.__dict__ for w in self.warnings],
            "operation_id": self.operation_id,
            "result": self.result,
            "draft": self.draft,
            "confirmation_token": self.confirmation_token,
            "limit_path": self.limit_path,
            "log": dict(self.log),
            "trace": [entry.__dict__ for entry in self.trace],
        }


MESSAGE_FIELDS = ("agent_message", "user_message")
# The plain fields, as the class declares them (what ``replace`` copies as it is), and the
# fields a host reads: those but the three for the gate's own use, and the four worked out
# from the record.
_PLAIN = tuple(name for name in Decision.__annotations__ if not name.startswith("_"))
PUBLIC_FIELDS = (*(name for name in _PLAIN if name not in ("sealer", "decided", "finished")),
                 *MESSAGE_FIELDS, "log", "trace")
# What ``replace`` may change, and where a decision keeps the fields worked out when read.
_STORED_AS = {"agent_message": "_agent_message", "user_message": "_user_message",
              "log": "_log", "trace": "_trace"}
_REPLACEABLE = frozenset((*_PLAIN, *_STORED_AS))


def _read(message: str | Exception) -> str:
    """A message, or, when it could not be rendered, its error raised on every read, as a
    message of its own would (the other message is read all the same)."""
    if isinstance(message, Exception):
        raise message.with_traceback(None)
    return message
