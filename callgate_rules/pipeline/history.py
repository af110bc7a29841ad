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

**Read once, then only what changed** (``RunViews``): a process keeps, per store and run, the
entries it read and the variable's elements made of them, and each later read asks the store
only for what was written or changed since (``store.history``'s ``history_changes``): rows
past its mark, a held write marked executed by another instance, an entry gone in a purge
(then the run is read afresh). So a decision costs the same with ten entries or a thousand,
but for what its rules do with them, and every instance on one store still sees every entry.
The elements are shared by the decisions that read them: nothing writes into a variable.
Bounded: ``VIEWED_ENTRIES`` entries in all, the runs read longest ago forgotten first.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from callgate_rules.cel import types as t
from callgate_rules.documents.model import Contract
from callgate_rules.errors import StoreError
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.record import mask
from callgate_rules.store.base import as_utc
from callgate_rules.store.history import (
    HISTORY_LIMIT,
    HistoryChanges,
    HistoryEntry,
    HistoryFeed,
    RunHistory,
)
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


# Entries kept decoded, with their elements, by all of a process's views of one store: about
# 1.5 kB each, so some 30 MB; twenty runs of ``HISTORY_LIMIT`` entries.
VIEWED_ENTRIES = 20 * HISTORY_LIMIT


class RunView:
    """One run as this process last read it: its entries at or after ``since``, in the
    store's order (``at``, then position), at most ``HISTORY_LIMIT`` (the newest, when
    ``complete`` is false); and, side by side, their elements (``None`` for an approval).
    The lists a read hands out (``history``: the elements without the approvals) are the
    decisions' to read, never changed: a change copies them first."""

    __slots__ = ("lock", "mark", "since", "complete", "keys", "entries", "elements",
                 "approvals", "history")

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one read of the run at a time, in this process
        self.mark: int | None = None  # None: read afresh next time
        self.since = datetime.max.replace(tzinfo=UTC)
        self.complete = True
        self.keys: list[tuple[datetime, int]] = []  # (at, position), ascending
        self.entries: list[HistoryEntry] = []
        self.elements: list[dict[str, Any] | None] = []
        self.approvals = 0
        self.history: list[dict[str, Any]] | None = None  # handed out: copy before a change

    def read(self, feed: HistoryFeed, run_id: str,
             since: datetime) -> tuple[list[HistoryEntry], list[dict[str, Any]]]:
        """The run's entries and the value of ``history``, as ``run_history`` reads them
        now, asking ``feed`` only what changed since the last read: afresh the first
        time, for an older ``since``, and when the store no longer keeps what the view
        does (a purge)."""
        if self.mark is None or since < self.since or not self._caught_up(feed, run_id,
                                                                             since):
            self._fresh(feed.history_changes(run_id, since=since, mark=None,
                                             limit=HISTORY_LIMIT), since)
        if self.history is None:
            self.history = cast(list[dict[str, Any]], self.elements if not self.approvals
                                else [element for element in self.elements
                                      if element is not None])
        return self.entries, self.history

    def _caught_up(self, feed: HistoryFeed, run_id: str, since: datetime) -> bool:
        """Apply what changed since the last read; whether the view is then the store's."""
        changes = feed.history_changes(run_id, since=since, mark=self.mark,
                                       limit=HISTORY_LIMIT)
        gone = bisect.bisect_left(self.keys, (since,))
        if gone:  # below the retention now: what is left is all there is at or after since
            self._forget(gone)
            self.complete = True
        self.mark, self.since = changes.mark, since
        for position, entry in changes.entries:
            if entry.at >= since:
                self._put(position, entry)
        oldest = self.keys[0][0] if self.keys else None
        if self.complete or oldest is None or changes.oldest is None:
            return oldest == changes.oldest
        return changes.oldest <= oldest  # the store keeps older ones the view left out

    def _fresh(self, changes: HistoryChanges, since: datetime) -> None:
        self.mark, self.since, self.complete = changes.mark, since, changes.complete
        self.keys = [(entry.at, position) for position, entry in changes.entries]
        self.entries = [entry for _, entry in changes.entries]
        self.elements = [_element_of(entry) for entry in self.entries]
        self.approvals = self.elements.count(None)
        self.history = None

    def _changing(self) -> None:
        """Before a change: the lists handed out are copied, not changed."""
        if self.history is not None:
            self.entries, self.elements, self.history = (list(self.entries),
                                                         list(self.elements), None)

    def _put(self, position: int, entry: HistoryEntry) -> None:
        """The entry at ``position``, new or changed (a change keeps its ``at``), put in
        its place; a new one older than every entry of an incomplete view (which holds the
        newest ``HISTORY_LIMIT``) is not among them."""
        key = (entry.at, position)
        index = bisect.bisect_left(self.keys, key)
        element = _element_of(entry)
        self._changing()
        if index < len(self.keys) and self.keys[index] == key:
            self.approvals += (element is None) - (self.elements[index] is None)
            self.entries[index], self.elements[index] = entry, element
            return
        if index == 0 and not self.complete:
            return
        self.keys.insert(index, key)
        self.entries.insert(index, entry)
        self.elements.insert(index, element)
        self.approvals += element is None
        if len(self.keys) > HISTORY_LIMIT:
            self._forget(len(self.keys) - HISTORY_LIMIT)
            self.complete = False

    def _forget(self, count: int) -> None:
        """Drop the ``count`` oldest entries."""
        self._changing()
        self.approvals -= self.elements[:count].count(None)
        del self.keys[:count], self.entries[:count], self.elements[:count]


def _element_of(entry: HistoryEntry) -> dict[str, Any] | None:
    return None if entry.route == APPROVAL_ROUTE else _element(entry)


def feed_of(store: RunHistory) -> HistoryFeed | None:
    """``store`` when it says what changed in a run and its ``history_changes`` is the
    one of its own ``run_history`` (a subclass that reads runs otherwise is read whole; a
    wrapper that hands both on to the store it wraps, by ``__getattr__``, is the store's)."""
    if not isinstance(store, HistoryFeed):
        return None
    reader = next((kind for kind in type(store).__mro__ if "run_history" in vars(kind)), None)
    return store if reader is None or "history_changes" in vars(reader) else None


def run_history_now(store: RunHistory, run_id: str,
                    since: datetime) -> tuple[Sequence[HistoryEntry], list[dict[str, Any]]]:
    """The run's entries at or after ``since`` (the newest ``HISTORY_LIMIT``), as
    ``store.run_history`` reads them, and the value of ``history`` made of them: read
    through this process's view of the run (``RunViews``)."""
    return RunViews.for_store(store).read(store, run_id, since)


class RunViews:
    """A process's views of the runs of one store (``for_store``; they hold no reference
    to it), the runs read longest ago forgotten first once all hold more than
    ``VIEWED_ENTRIES`` entries. A store that is no ``HistoryFeed`` is read whole every
    time."""

    _of_store: weakref.WeakKeyDictionary[Any, RunViews] = weakref.WeakKeyDictionary()
    _registry_lock = threading.Lock()

    def __init__(self, store: RunHistory) -> None:
        self.feeds = feed_of(store) is not None
        self.runs: OrderedDict[str, RunView] = OrderedDict()
        self.viewed = 0  # entries held by the views in ``runs``
        self.lock = threading.Lock()

    @classmethod
    def for_store(cls, store: RunHistory) -> RunViews:
        """The views of ``store``'s runs in this process (new ones for a store that cannot
        be a weak key: one that is unhashable or takes no weak reference)."""
        try:
            views = cls._of_store.get(store)
            if views is None:
                with cls._registry_lock:
                    views = cls._of_store.get(store)
                    if views is None:
                        views = cls._of_store[store] = cls(store)
        except TypeError:
            return cls(store)
        return views

    def read(self, store: RunHistory, run_id: str,
             since: datetime) -> tuple[Sequence[HistoryEntry], list[dict[str, Any]]]:
        """``run_history_now`` of ``store``, whose views these are."""
        since = as_utc(since)
        if not self.feeds:
            entries = store.run_history(run_id, since=since)
            return entries, variable(entries)
        with self.lock:
            view = self.runs.get(run_id)
            if view is None:
                view = self.runs[run_id] = RunView()
            else:
                self.runs.move_to_end(run_id)
        with view.lock:
            held = len(view.keys)
            try:
                return view.read(cast(HistoryFeed, store), run_id, since)
            except BaseException:
                view.mark = None  # half applied, perhaps: read afresh next time
                raise
            finally:
                self._count(run_id, view, len(view.keys) - held)

    def _count(self, run_id: str, view: RunView, grown: int) -> None:
        """Count what ``view`` grew by; forget the runs read longest ago while there are
        too many entries."""
        with self.lock:
            if self.runs.get(run_id) is view:  # not forgotten meanwhile
                self.viewed += grown
            while self.viewed > VIEWED_ENTRIES and len(self.runs) > 1:
                _, forgotten = self.runs.popitem(last=False)
                self.viewed -= len(forgotten.keys)


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
