"""A simulated destination for any tool, told to fail in every way a real one does.

Tests, PolicyTests and scenario suites bind the gate to a ``Destination`` instead of a real
system. Each tool is a ``SimulatedTool``: whether it reads or writes, and how it answers.
By default a write answers with a new record built from its arguments (a sequential ``id``,
the arguments, the ``operationId``) and keeps it, so ``verify`` (``result.x == args.x``) and
``reconcile.match`` (``found.x == args.x``) hold; a read answers with the records its
look-ups found, or with its arguments. A scenario or test can declare the answer instead
(``results: {tool: {...}}``, with ``{args.NAME}``, ``{operation_id}`` and ``{id}``
placeholders), and a Python configuration can answer with its own function — the support
desk (``support_desk.py``) is such a configuration.

``Faults`` choose, per tool, what goes wrong — before sending (nothing can have happened),
after applying (the write happened but the answer was lost), or in what the destination
answers and stores. ``find`` answers reconciliation by operation ID.

Everything is deterministic: IDs are sequential, nothing sleeps, nothing is random, and every
write and every attempted call is recorded so a test can count them.
"""

from __future__ import annotations

import copy
import re
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
Effect = Literal["read", "write"]
Record = dict[str, Any]


@dataclass(frozen=True)
class Faults:
    """What goes wrong for one tool. The defaults describe a healthy destination.

    Counters ("the next N calls") are consumed by the destination as calls arrive; the flags
    hold for every call until the faults are replaced with ``Destination.set_faults``.
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


def faults_by_tool(mapping: Mapping[str, Any],
                   tools: Mapping[str, Any] | None = None) -> dict[str, Faults]:
    """A scenario file's faults section, e.g. ``{createFollowUp: {timeout_after_applying: 1}}``.
    With ``tools``, a tool not among them is an error here; without, when the destination
    is built."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"faults must map tool names to faults, not {mapping!r}")
    result: dict[str, Faults] = {}
    for tool, tool_faults in mapping.items():
        if tools is not None:
            check_tool(tool, tools)
        try:
            result[str(tool)] = Faults.from_mapping(tool_faults)
        except ValueError as error:
            raise ValueError(f"{tool}: {error}") from None
    return result


# Answers a call: (the destination, the request, a copy of its arguments) → the result.
# Called with the destination's lock held; it may use ``records``, ``next_id`` and
# ``find_record``, and raise a ToolError (Refused, StateConflict, ...) as a real one would.
Respond = Callable[["Destination", ExecutionRequest, Record], Any]
NOT_DECLARED: Any = object()


@dataclass(frozen=True)
class SimulatedTool:
    """How the destination answers one tool."""

    effect: Effect
    # None: the generic answer (a declared ``result``, else built from the arguments).
    respond: Respond | None = None
    # The answer a scenario or test declared, with {args.NAME}/{operation_id}/{id} filled in.
    result: Any = NOT_DECLARED
    # Where the generic answer keeps the writes in ``snapshot()``; default: the tool's name.
    collection: str | None = None
    # The fields ``corrupt_result`` changes; None: every field equal to an argument.
    echoed: tuple[str, ...] | None = None
    # The field ``lookup_mismatch`` changes; None: every field equal to an argument.
    edited: str | None = None
    # The ID prefix of the generic answer's records; default: the tool's name.
    id_prefix: str | None = None


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


class Destination:
    """Destination systems in memory, one ``SimulatedTool`` per tool, faults on request."""

    def __init__(
        self,
        world: Mapping[str, list[Record]],
        faults: Mapping[str, Faults] | None,
        tools: Mapping[str, SimulatedTool],
    ) -> None:
        self._lock = threading.Lock()
        self.tools: Mapping[str, SimulatedTool] = dict(tools)
        self._world: dict[str, list[Record]] = {
            name: copy.deepcopy(list(records)) for name, records in world.items()
        }
        for name, tool in self.tools.items():
            if tool.effect == "write":
                self._world.setdefault(tool.collection or name, [])
        self._faults: dict[str, Faults] = {}
        self._remaining: dict[str, _Remaining] = {}
        for tool_name in self.tools:
            self._set_faults(tool_name, Faults())
        for tool_name, tool_faults in (faults or {}).items():
            self._set_faults(tool_name, tool_faults)
        self._ids = _Sequence()
        self._stored: dict[tuple[str, str], _Stored] = {}
        self._writes: list[Write] = []
        self._calls: list[Call] = []
        self._finds: list[Find] = []

    # -- what the gate is bound to ------------------------------------------------------------

    def executors(self) -> dict[str, Executor]:
        """One executor per tool."""
        return {tool: partial(self._execute, tool) for tool in sorted(self.tools)}

    def find(self, tool: str, operation_id: str) -> Any:
        """The destination's stored result for ``operation_id``, or None (a ``Finder``)."""
        check_tool(tool, self.tools)
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
                found = _mismatched(self.tools[tool], found, self._arguments_of(tool,
                                                                                 operation_id))
            return found

    # -- what a test controls and inspects ----------------------------------------------------

    def set_faults(self, tool: str, faults: Faults) -> None:
        """Replace one tool's faults mid-run (e.g. the destination recovers); counters restart."""
        with self._lock:
            self._set_faults(tool, faults)

    def update(self, collection: str, record_id: str, **changes: Any) -> None:
        """Change a record behind the gate's back, as another user of the destination would."""
        with self._lock:
            record = self.find_record(collection, record_id)
            if record is None:
                raise KeyError(f"no record {record_id!r} in {collection!r}")
            record.update(copy.deepcopy(changes))

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

    # -- for a configuration's ``respond`` functions (called with the lock held) --------------

    def records(self, collection: str) -> list[Record]:
        """The live records of ``collection`` (a new, empty one if there is none)."""
        return self._world.setdefault(collection, [])

    def next_id(self, prefix: str) -> str:
        return self._ids.next(prefix)

    def find_record(self, collection: str, record_id: Any) -> Record | None:
        for record in self._world.get(collection, []):
            if record.get("id") == record_id:
                return record
        return None

    # -- one call -----------------------------------------------------------------------------

    def _execute(self, tool: str, request: ExecutionRequest) -> Any:
        if request.tool != tool:
            raise ValueError(f"the {tool} executor was called with a request for {request.tool}")
        arguments = copy.deepcopy(dict(request.arguments))
        simulated = self.tools[tool]
        with self._lock:
            faults = self._faults[tool]
            remaining = self._remaining[tool]
            applied = False
            try:
                self._fail_before_applying(faults, remaining)
                if simulated.effect == "write":
                    result, applied = self._write(tool, request, arguments, faults)
                else:
                    result = self._answer(tool, request, arguments)
            except ToolError as error:
                self._calls.append(Call(tool, request.operation_id, arguments, False, error))
                raise
            if faults.corrupt_result:
                result = _corrupted(simulated, result, arguments)
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
        result = self._answer(tool, request, arguments)
        self._writes.append(Write(tool, request.operation_id, arguments, copy.deepcopy(result)))
        # Without deduplication the same operation ID can name several records; a lookup
        # by it finds the first, as a query ordered by creation would.
        self._stored.setdefault(key, _Stored(copy.deepcopy(result), faults.confirm_late))
        return result, True

    def _answer(self, tool: str, request: ExecutionRequest, arguments: Record) -> Any:
        simulated = self.tools[tool]
        if simulated.result is not NOT_DECLARED:
            return filled(simulated.result, request, lambda: self.next_id(
                simulated.id_prefix or tool))
        if simulated.respond is not None:
            return simulated.respond(self, request, arguments)
        if simulated.effect == "read":
            found = {name: record for name, record in request.records.items()
                     if record is not None}
            if len(found) == 1:
                return copy.deepcopy(next(iter(found.values())))
            return copy.deepcopy(found) if found else arguments
        record: Record = {"id": self.next_id(simulated.id_prefix or tool), **arguments,
                          "operationId": request.operation_id}
        self.records(simulated.collection or tool).append(copy.deepcopy(record))
        return record

    def _arguments_of(self, tool: str, operation_id: str) -> Mapping[str, Any]:
        for write in self._writes:
            if write.tool == tool and write.operation_id == operation_id:
                return write.arguments
        return {}

    def _set_faults(self, tool: str, faults: Faults) -> None:
        check_tool(tool, self.tools)
        if self.tools[tool].effect == "read" and faults.write_only:
            raise ValueError(f"{tool} is a read; {', '.join(faults.write_only)} "
                             f"can only happen to a write")
        self._faults[tool] = faults
        self._remaining[tool] = _Remaining.of(faults)


def check_tool(tool: Any, tools: Mapping[str, Any]) -> None:
    if tool not in tools:
        raise ValueError(f"unknown tool {tool!r}; the simulated destination runs "
                         f"{', '.join(sorted(tools)) or 'no tool'}")


# A declared answer ---------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{(args\.[A-Za-z_][A-Za-z0-9_]*|operation_id|id)\}")


def filled(template: Any, request: ExecutionRequest, new_id: Callable[[], str]) -> Any:
    """``template`` with its placeholders filled: a string that is one placeholder takes the
    value as it is (a number stays a number); inside a longer string it is written out."""
    made: dict[str, str] = {}

    def value(name: str) -> Any:
        if name == "operation_id":
            return request.operation_id
        if name == "id":
            if "id" not in made:
                made["id"] = new_id()
            return made["id"]
        return request.arguments.get(name.removeprefix("args."))

    def fill(node: Any) -> Any:
        if isinstance(node, str):
            whole = _PLACEHOLDER.fullmatch(node)
            if whole:
                return copy.deepcopy(value(whole.group(1)))
            return _PLACEHOLDER.sub(lambda m: str(value(m.group(1))), node)
        if isinstance(node, Mapping):
            return {key: fill(child) for key, child in node.items()}
        if isinstance(node, list):
            return [fill(child) for child in node]
        return node

    return fill(template)


# Faults that change what the destination says -------------------------------------------------


def _corrupted(tool: SimulatedTool, result: Any, arguments: Mapping[str, Any]) -> Any:
    """An answer about something else: the fields that echo the call get other values; an
    answer with no such field comes back empty."""
    result = copy.deepcopy(result)
    rows = result if isinstance(result, list) else [result]
    changed = False
    for row in rows:
        if not isinstance(row, dict):
            continue
        for name in _echoing(row, tool.echoed, arguments):
            row[name] = other_value(row[name])
            changed = True
    if changed:
        return result
    return [] if isinstance(result, list) else {}


def _mismatched(tool: SimulatedTool, found: Any, arguments: Mapping[str, Any]) -> Any:
    if not isinstance(found, dict):
        return found
    names = (tool.edited,) if tool.edited else _echoing(found, None, arguments)
    for name in names:
        if name in found:
            found[name] = other_value(found[name])
    return found


def _echoing(row: Mapping[str, Any], declared: tuple[str, ...] | None,
             arguments: Mapping[str, Any]) -> tuple[str, ...]:
    if declared is not None:
        return tuple(name for name in declared if name in row)
    values = [value for value in arguments.values()]
    return tuple(name for name, value in row.items()
                 if name not in ("id", "operationId") and any(
                     value == argument and type(value) is type(argument)
                     for argument in values))


def other_value(value: Any) -> Any:
    """A value that differs from ``value`` but keeps its kind: a timestamp stays one, a
    number stays a number."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        bumped = value + 1
        return bumped if bumped != value else -value  # past 2**53 a float + 1 is itself
    if isinstance(value, str):
        try:
            moved = datetime.fromisoformat(value) + timedelta(days=1)
        except ValueError:
            return f"{value}-other"
        text = moved.isoformat()
        return text.replace("+00:00", "Z") if value.endswith("Z") else text
    return f"{value}-other"
