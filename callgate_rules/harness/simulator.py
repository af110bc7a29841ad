"""A stand-in for the support desk that can be told to fail in every way a real one does.

Tests and the scenario suite bind the gate to a ``Simulator`` instead of a real destination:
its executors run the six reference tools against an in-memory copy of a world, and its
``find`` answers reconciliation by operation ID. ``Faults`` choose, per tool, what goes
wrong — before sending (nothing can have happened), after applying (the write happened but
the answer was lost), or in what the destination answers and stores.

Everything is deterministic: IDs are sequential, nothing sleeps, nothing is random, and every
write and every attempted call is recorded so a test can count them.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal

from callgate_rules.errors import (
    OutcomeTimeout,
    RateLimited,
    Refused,
    StateConflict,
    ToolError,
    Unavailable,
)
from callgate_rules.pipeline.execute import ExecutionRequest, Executor

Idempotency = Literal["honor", "ignore"]
Record = dict[str, Any]

WRITE_TOOLS = frozenset({"createFollowUp", "createEvent", "sendEmail", "sendPayment"})
READ_TOOLS = frozenset({"getTicketStatus", "searchContacts", "getInvoice"})
TOOLS = WRITE_TOOLS | READ_TOOLS

# Where the simulator keeps what the write tools create, next to the world's collections.
FOLLOW_UPS = "follow_ups"
EVENTS = "events"
EMAILS = "emails"
PAYMENTS = "payments"


@dataclass(frozen=True)
class Faults:
    """What goes wrong for one tool. The defaults describe a healthy destination.

    Counters ("the next N calls") are consumed by the simulator as calls arrive; the flags
    hold for every call until the faults are replaced with ``Simulator.set_faults``.
    """

    # The next N calls raise Unavailable before anything reaches the destination.
    fail_before_sending: int = 0
    # The next N calls raise RateLimited(retry_after=...) before anything is applied.
    rate_limit: int = 0
    retry_after: float = 1.0
    # The next N calls that reach the destination raise OutcomeTimeout after it answered:
    # the write is applied (or deduplicated) and only the answer is lost. Writes only.
    timeout_after_applying: int = 0
    # Each write stays invisible to ``find`` for this many find calls, then shows up.
    # Writes only.
    confirm_late: int = 0
    # Every call raises StateConflict, without applying anything.
    conflict: bool = False
    # Every call raises Refused, without applying anything.
    refuse: bool = False
    # "honor": an operation ID already applied returns its first result, no new write.
    # "ignore": the destination does not deduplicate; every execution writes. Writes only.
    idempotency: Idempotency = "honor"
    # The answer describes something other than what was asked, so ``verify`` fails; what
    # the destination stores (and ``find`` returns) stays correct.
    corrupt_result: bool = False
    # ``find`` returns the operation's record with a field that differs from the arguments,
    # as if someone edited it after the write; reconciliation must notice. Writes only.
    lookup_mismatch: bool = False

    def __post_init__(self) -> None:
        for name in ("fail_before_sending", "rate_limit", "timeout_after_applying",
                     "confirm_late"):
            value = getattr(self, name)
            # bool is an int in Python; `rate_limit: true` in YAML is a mistake, not a 1.
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
        for name in ("conflict", "refuse", "corrupt_result", "lookup_mismatch"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, not {value!r}")
        retry_after = self.retry_after
        if (isinstance(retry_after, bool) or not isinstance(retry_after, int | float)
                or retry_after < 0):
            raise ValueError(f"retry_after must be a non-negative number, not {retry_after!r}")
        if self.idempotency not in ("honor", "ignore"):
            raise ValueError(f'idempotency must be "honor" or "ignore", not {self.idempotency!r}')

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> Faults:
        """One tool's faults from a scenario file, e.g. ``{timeout_after_applying: 1}``."""
        if not isinstance(mapping, Mapping):
            raise ValueError(f"faults must be a mapping of fault names to values, not "
                             f"{mapping!r}")
        known = {f.name for f in fields(cls)}
        for key in mapping:
            if key not in known:
                raise ValueError(f"unknown fault {key!r}; known faults: "
                                 f"{', '.join(sorted(known))}")
        return cls(**mapping)

    @property
    def write_only(self) -> tuple[str, ...]:
        """The faults set here that only a write tool can show."""
        healthy = Faults()
        return tuple(
            name for name in ("timeout_after_applying", "confirm_late", "idempotency",
                              "lookup_mismatch")
            if getattr(self, name) != getattr(healthy, name)
        )


def faults_by_tool(mapping: Mapping[str, Any]) -> dict[str, Faults]:
    """A scenario file's faults section, e.g. ``{createFollowUp: {timeout_after_applying: 1}}``."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"faults must map tool names to faults, not {mapping!r}")
    result: dict[str, Faults] = {}
    for tool, tool_faults in mapping.items():
        _check_tool(tool)
        try:
            result[tool] = Faults.from_mapping(tool_faults)
        except ValueError as error:
            raise ValueError(f"{tool}: {error}") from None
    return result


@dataclass(frozen=True)
class Write:
    """One write the destination applied: a new record or message exists because of it."""

    tool: str
    operation_id: str
    arguments: Mapping[str, Any]
    result: Any


@dataclass(frozen=True)
class Call:
    """One executor call as the destination saw it.

    ``applied`` says whether it made a new write; ``error`` is what the executor raised,
    if anything. A timeout after applying has both.
    """

    tool: str
    operation_id: str
    arguments: Mapping[str, Any]
    applied: bool
    error: ToolError | None = None

    @property
    def outcome(self) -> str:
        """``applied``, ``not applied``, or the exception's name, e.g. ``applied, then
        OutcomeTimeout``."""
        done = "applied" if self.applied else "not applied"
        if self.error is None:
            return done
        name = type(self.error).__name__
        return f"applied, then {name}" if self.applied else name


@dataclass(frozen=True)
class Find:
    """One ``find`` call: whether the destination admitted knowing the operation."""

    tool: str
    operation_id: str
    found: bool


@dataclass
class _Stored:
    """The destination's memory of one operation ID."""

    result: Any
    hidden_finds: int  # how many more finds must miss it (a late confirmation)


@dataclass
class _Remaining:
    """What is left of one tool's "next N calls" faults."""

    fail_before_sending: int
    rate_limit: int
    timeout_after_applying: int

    @classmethod
    def of(cls, faults: Faults) -> _Remaining:
        return cls(faults.fail_before_sending, faults.rate_limit, faults.timeout_after_applying)


@dataclass
class _Sequence:
    """Sequential IDs per prefix, so a run's IDs are the same every time."""

    next_numbers: dict[str, int] = field(default_factory=dict)

    def next(self, prefix: str) -> str:
        number = self.next_numbers.get(prefix, 1)
        self.next_numbers[prefix] = number + 1
        return f"{prefix}-{number}"


class Simulator:
    """The support desk's destination systems, in memory, with faults on request."""

    def __init__(
        self,
        world: Mapping[str, list[Record]],
        faults: Mapping[str, Faults] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._world: dict[str, list[Record]] = {
            name: copy.deepcopy(list(records)) for name, records in world.items()
        }
        for created in (FOLLOW_UPS, EVENTS, EMAILS, PAYMENTS):
            self._world.setdefault(created, [])
        self._faults: dict[str, Faults] = {}
        self._remaining: dict[str, _Remaining] = {}
        for tool in TOOLS:
            self._set_faults(tool, Faults())
        for tool, tool_faults in (faults or {}).items():
            self._set_faults(tool, tool_faults)
        self._ids = _Sequence()
        self._stored: dict[tuple[str, str], _Stored] = {}
        self._writes: list[Write] = []
        self._calls: list[Call] = []
        self._finds: list[Find] = []

    # -- what the gate is bound to ------------------------------------------------------------

    def executors(self) -> dict[str, Executor]:
        """One executor per reference tool."""
        return {tool: partial(self._execute, tool) for tool in sorted(TOOLS)}

    def find(self, tool: str, operation_id: str) -> Any:
        """The destination's stored result for ``operation_id``, or None (a ``Finder``)."""
        _check_tool(tool)
        with self._lock:
            stored = self._stored.get((tool, operation_id))
            visible = stored is not None and stored.hidden_finds == 0
            if stored is not None and not visible:
                stored.hidden_finds -= 1
            self._finds.append(Find(tool, operation_id, visible))
            if stored is None or not visible:
                return None
            found = copy.deepcopy(stored.result)
            if self._faults[tool].lookup_mismatch:
                found = _mismatched(tool, found)
            return found

    # -- what a test controls and inspects ----------------------------------------------------

    def set_faults(self, tool: str, faults: Faults) -> None:
        """Replace one tool's faults mid-run (e.g. the destination recovers); counters restart."""
        with self._lock:
            self._set_faults(tool, faults)

    def update(self, collection: str, record_id: str, **changes: Any) -> None:
        """Change a record behind the gate's back, as another user of the destination would."""
        with self._lock:
            self._record(collection, record_id).update(copy.deepcopy(changes))

    def close_ticket(self, ticket_id: str) -> None:
        self.update("tickets", ticket_id, status="closed")

    def snapshot(self) -> dict[str, list[Record]]:
        """A copy of every collection, including the records the writes created."""
        with self._lock:
            return copy.deepcopy(self._world)

    @property
    def writes(self) -> list[Write]:
        with self._lock:
            return list(self._writes)

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    @property
    def finds(self) -> list[Find]:
        with self._lock:
            return list(self._finds)

    def write_count(self, tool: str | None = None) -> int:
        with self._lock:
            return sum(1 for w in self._writes if tool is None or w.tool == tool)

    # -- one call -----------------------------------------------------------------------------

    def _execute(self, tool: str, request: ExecutionRequest) -> Any:
        if request.tool != tool:
            raise ValueError(f"the {tool} executor was called with a request for {request.tool}")
        arguments = copy.deepcopy(dict(request.arguments))
        with self._lock:
            faults = self._faults[tool]
            remaining = self._remaining[tool]
            applied = False
            try:
                self._fail_before_applying(faults, remaining)
                if tool in WRITE_TOOLS:
                    result, applied = self._write(tool, request, arguments, faults)
                else:
                    result = _READS[tool](self, request)
            except ToolError as error:
                self._calls.append(Call(tool, request.operation_id, arguments, False, error))
                raise
            if faults.corrupt_result:
                result = _corrupted(tool, result)
            if remaining.timeout_after_applying:
                remaining.timeout_after_applying -= 1
                timeout = OutcomeTimeout(f"{tool}: no answer after sending (simulated)")
                self._calls.append(Call(tool, request.operation_id, arguments, applied, timeout))
                raise timeout
            self._calls.append(Call(tool, request.operation_id, arguments, applied))
            return copy.deepcopy(result)

    def _fail_before_applying(self, faults: Faults, remaining: _Remaining) -> None:
        if remaining.fail_before_sending:
            remaining.fail_before_sending -= 1
            raise Unavailable("destination unreachable (simulated)")
        if remaining.rate_limit:
            remaining.rate_limit -= 1
            raise RateLimited("rate limited (simulated)", retry_after=faults.retry_after)
        if faults.refuse:
            raise Refused("the destination refused the request (simulated)")
        if faults.conflict:
            raise StateConflict("the record's state forbids this (simulated)")

    def _write(
        self, tool: str, request: ExecutionRequest, arguments: Record, faults: Faults
    ) -> tuple[Any, bool]:
        """Apply one write, or recognise its operation ID; return the result and whether it
        was a new write."""
        key = (tool, request.operation_id)
        stored = self._stored.get(key)
        # A destination that honours idempotency keys checks the key before anything else,
        # so a retry succeeds even if the record's state changed since the first attempt.
        if stored is not None and faults.idempotency == "honor":
            return copy.deepcopy(stored.result), False
        result = _WRITES[tool](self, request, arguments)
        self._writes.append(Write(tool, request.operation_id, arguments, copy.deepcopy(result)))
        # Without deduplication the same operation ID can name several records; a lookup
        # by it finds the first, as a query ordered by creation would.
        self._stored.setdefault(key, _Stored(copy.deepcopy(result), faults.confirm_late))
        return result, True

    # -- the tools ----------------------------------------------------------------------------

    def _create_follow_up(self, request: ExecutionRequest, arguments: Record) -> Record:
        ticket = self._live_ticket(arguments["ticketId"])
        # The gate checked this too, but the ticket may have closed since.
        if ticket.get("status") == "closed":
            raise StateConflict(f"ticket {ticket['id']} is closed")
        follow_up: Record = {
            "id": self._ids.next("F"),
            "ticketId": arguments["ticketId"],
            "assigneeId": arguments["assigneeId"],
            "dueAt": arguments["dueAt"],
        }
        if "note" in arguments:
            follow_up["note"] = arguments["note"]
        follow_up["operationId"] = request.operation_id
        self._world[FOLLOW_UPS].append(copy.deepcopy(follow_up))
        return follow_up

    def _create_event(self, request: ExecutionRequest, arguments: Record) -> Record:
        resolved = request.records.get("contact")
        # The gate resolves a contact named by its full name; the destination takes IDs.
        contact_id = resolved["id"] if isinstance(resolved, Mapping) else arguments["contact"]
        contact = self._find_record("contacts", contact_id)
        if contact is None:
            raise Refused(f"no contact {contact_id}")
        event: Record = {
            "id": self._ids.next("E"),
            "contactId": contact["id"],
            "title": arguments["title"],
            "startsAt": arguments["startsAt"],
            "operationId": request.operation_id,
        }
        self._world[EVENTS].append(copy.deepcopy(event))
        return event

    def _send_payment(self, request: ExecutionRequest, arguments: Record) -> Record:
        payment_id = self._ids.next("P")
        payment: Record = {
            "id": payment_id, "iban": arguments["recipientIban"],
            "amount": arguments["amount"], "currency": arguments["currency"],
            "operationId": request.operation_id,
        }
        self._world[PAYMENTS].append(copy.deepcopy(payment))
        return payment

    def _send_email(self, request: ExecutionRequest, arguments: Record) -> Record:
        message_id = self._ids.next("M")
        self._world[EMAILS].append({
            "id": message_id, **copy.deepcopy(arguments), "operationId": request.operation_id,
        })
        return {"messageId": message_id, "to": arguments["to"], "subject": arguments["subject"]}

    def _get_ticket_status(self, request: ExecutionRequest) -> Record:
        ticket = self._live_ticket(request.arguments["ticketId"])
        return {key: ticket.get(key) for key in ("id", "status", "team", "subject")}

    def _search_contacts(self, request: ExecutionRequest) -> list[Record]:
        query = str(request.arguments["name"]).casefold()
        # No tenant on the actor matches no contact: the search must never widen to all.
        tenant = request.actor.get("tenant")
        return [
            {key: contact.get(key) for key in ("id", "name", "company")}
            for contact in self._world.get("contacts", [])
            if tenant is not None and contact.get("tenant") == tenant
            and query in str(contact.get("name", "")).casefold()
        ]

    def _get_invoice(self, request: ExecutionRequest) -> Record:
        number = request.arguments["invoiceNumber"]
        organization = request.arguments["organizationId"]
        for invoice in self._world.get("invoices", []):
            if invoice.get("number") == number and invoice.get("organization") == organization:
                return {key: invoice.get(key)
                        for key in ("number", "organization", "amount", "currency")}
        raise Refused(f"no invoice {number} for {organization}")

    # -- helpers ------------------------------------------------------------------------------

    def _set_faults(self, tool: str, faults: Faults) -> None:
        _check_tool(tool)
        if tool in READ_TOOLS and faults.write_only:
            raise ValueError(f"{tool} is a read; {', '.join(faults.write_only)} "
                             f"can only happen to a write")
        self._faults[tool] = faults
        self._remaining[tool] = _Remaining.of(faults)

    def _find_record(self, collection: str, record_id: Any) -> Record | None:
        for record in self._world.get(collection, []):
            if record.get("id") == record_id:
                return record
        return None

    def _record(self, collection: str, record_id: str) -> Record:
        record = self._find_record(collection, record_id)
        if record is None:
            raise KeyError(f"no record {record_id!r} in {collection!r}")
        return record

    def _live_ticket(self, ticket_id: Any) -> Record:
        ticket = self._find_record("tickets", ticket_id)
        if ticket is None or "deleted_at" in ticket:
            raise Refused(f"no ticket {ticket_id}")
        return ticket


_WRITES: dict[str, Callable[[Simulator, ExecutionRequest, Record], Any]] = {
    "createFollowUp": Simulator._create_follow_up,
    "createEvent": Simulator._create_event,
    "sendEmail": Simulator._send_email,
    "sendPayment": Simulator._send_payment,
}
_READS: dict[str, Callable[[Simulator, ExecutionRequest], Any]] = {
    "getTicketStatus": Simulator._get_ticket_status,
    "searchContacts": Simulator._search_contacts,
    "getInvoice": Simulator._get_invoice,
}


def _check_tool(tool: Any) -> None:
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}; the simulator runs {', '.join(sorted(TOOLS))}")


# Faults that change what the destination says -------------------------------------------------

# The fields each contract's ``verify`` compares with the arguments: corrupting them is what
# makes a wrong answer detectable.
_ECHOED_FIELDS = {
    "createFollowUp": ("ticketId", "assigneeId"),
    "createEvent": ("contactId",),
    "getTicketStatus": ("id",),
    "getInvoice": ("number",),
    "searchContacts": ("id",),
    "sendPayment": ("iban",),
}

# The field a later edit changes, among those each contract's ``reconcile.match`` compares.
_EDITED_FIELD = {
    "createFollowUp": "dueAt",
    "createEvent": "startsAt",
    "sendEmail": "to",
    "sendPayment": "iban",
}


def _corrupted(tool: str, result: Any) -> Any:
    result = copy.deepcopy(result)
    if tool == "sendEmail":
        # sendEmail's verify only asks for a message ID, so an answer without one is wrong.
        result.pop("messageId", None)
        return result
    rows = result if isinstance(result, list) else [result]
    for row in rows:
        for name in _ECHOED_FIELDS[tool]:
            if name in row:
                row[name] = _other_value(row[name])
    return result


def _mismatched(tool: str, found: Any) -> Any:
    name = _EDITED_FIELD[tool]
    if isinstance(found, dict) and name in found:
        found[name] = _other_value(found[name])
    return found


def _other_value(value: Any) -> Any:
    """A value that differs from ``value`` but keeps its kind: a timestamp stays one."""
    if isinstance(value, str):
        try:
            moved = datetime.fromisoformat(value) + timedelta(days=1)
        except ValueError:
            return f"{value}-other"
        text = moved.isoformat()
        return text.replace("+00:00", "Z") if value.endswith("Z") else text
    return f"{value}-other"
