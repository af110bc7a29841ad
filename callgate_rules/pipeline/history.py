"""The run so far, as the rules see it: the CEL variable ``history``.

``history`` is a list, oldest first, of the run's earlier proposals as they ended — every
proposal ``Gate.handle`` decided for the same ``Run`` (its ``run_id``), whatever the route.
Each element is a map with these fields (``ENTRY_TYPE`` is the same, for lint):

============== ========= ===============================================================
field          type      what it holds
============== ========= ===============================================================
tool           string    the tool proposed
args           map       its validated arguments; fields the contract masks read ``***``
route          string    how it ended: ``return_result``, ``await_confirmation``, ``refuse``…
error_class    string    why it did not simply run (``""`` when nothing went wrong)
executed       bool      known to have run: a read answered, a write that succeeded
                         (a held write becomes executed when its confirmation runs it)
at             timestamp when it was decided
executed_at    timestamp when it ran (only when ``executed``: ask ``has(h.executed_at)``)
result         dyn       the destination's result, only for a contract that declares
                         ``spec.result`` (masked fields masked); else absent
request_id     string    the user's request it was proposed in
operation_id   string    a write's operation ID (``""`` for a read)
============== ========= ===============================================================

A person's approval that covers later calls (``approval_covers``, ``pipeline.approvals``)
is kept in the run's history too, as an entry whose route is ``approval``; it is not a
proposal, and ``history`` leaves it out.

A proposal of the same write within one request that returns the earlier receipt is an
entry with ``executed`` false (route ``return_receipt``): the write ran once, in the entry
before it, so a sum over executed entries counts it once.

Where it is kept: by the gate's receipt store (``store.history``) when the store keeps
histories (every store callgate ships does), so every gate on one store sees one history;
else in the gate's own memory. A host that keeps its own passes ``history=`` (a list of
``HistoryEntry``), and then the gate records nothing: ``Gate.history_entry`` makes the
entry to keep. The history is read only for a tool whose expressions read ``history``,
and written only when some expression of the configuration reads it.

Such a tool, handled in a run the host names, reads it holding the run's lease
(``pipeline.runs.RunHold``) until its own entry is written: several instances deciding one
run's calls take turns, so a cumulative limit over ``history`` holds exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from callgate_rules.cel import types as t
from callgate_rules.documents.model import Contract
from callgate_rules.errors import StoreError
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.record import mask
from callgate_rules.store.history import HistoryEntry
from callgate_rules.taxonomy import Route

# The route of an approval's history entry (``pipeline.approvals.APPROVAL_ROUTE``: defined
# here, which that module imports, so the two cannot differ)
APPROVAL_ROUTE = "approval"

ENTRY_TYPE = t.object_of(t.Shape((
    ("tool", t.Field(t.STRING, required=True)),
    ("args", t.Field(t.OPEN_OBJECT, required=True)),
    ("route", t.Field(t.STRING, required=True)),
    ("error_class", t.Field(t.STRING, required=True)),
    ("executed", t.Field(t.BOOL, required=True)),
    ("at", t.Field(t.TIMESTAMP, required=True)),
    ("executed_at", t.Field(t.TIMESTAMP)),
    ("result", t.Field(t.DYN)),
    ("request_id", t.Field(t.STRING, required=True)),
    ("operation_id", t.Field(t.STRING, required=True)),
), declared=True, closed=True))
HISTORY_TYPE = t.list_of(ENTRY_TYPE)


def variable(entries: Sequence[HistoryEntry]) -> list[dict[str, Any]]:
    """The value of ``history`` for these entries (oldest first): the proposals, without
    the approvals a person gave (``pipeline.approvals``), which no rule reads."""
    return [_element(entry) for entry in entries if entry.route != APPROVAL_ROUTE]


def _element(entry: HistoryEntry) -> dict[str, Any]:
    element: dict[str, Any] = {
        "tool": entry.tool, "args": dict(entry.arguments), "route": entry.route,
        "error_class": entry.error_class or "", "executed": entry.executed, "at": entry.at,
        "request_id": entry.request_id, "operation_id": entry.operation_id or "",
    }
    if entry.executed_at is not None:
        element["executed_at"] = entry.executed_at
    if entry.result is not None:
        element["result"] = entry.result
    return element


def entry_of(decision: Decision, contract: Contract, run_id: str, request_id: str,
             at: datetime) -> HistoryEntry:
    """The history entry of a decision about a call of ``contract``, as it ended at
    ``at``."""
    executed = decision.route == Route.RETURN_RESULT
    return HistoryEntry(
        run_id=run_id, at=at, tool=contract.name,
        arguments=mask(decision.arguments or {}, contract.mask), route=str(decision.route),
        error_class=str(decision.error_class) if decision.error_class else None,
        request_id=request_id, operation_id=decision.operation_id,
        executed=executed, executed_at=at if executed else None,
        result=kept_result(contract, decision.result) if executed else None)


def kept_result(contract: Contract, result: Any) -> Any:
    """What of a result the history keeps: nothing unless the contract declares its
    shape (``spec.result``); its masked paths masked when it is an object."""
    if contract.result_schema is None or result is None:
        return None
    if isinstance(result, Mapping):
        return mask(result, contract.mask)
    return result


def kept_in_history(write: Callable[[], Any], count: Callable[[str], None]) -> None:
    """A history write made after the call ended: a store that fails it is counted
    (``history_not_recorded``), never raised — the next read of the run fails closed."""
    try:
        write()
    except StoreError:
        count("history_not_recorded")
