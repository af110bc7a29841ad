"""Where a gate keeps its runs' state, beside the receipts: each run's history
(``store.history``) and intent (``store.intents``), in the receipt store when it keeps them,
else in the gate's own memory; and the host's side of run intents (``pipeline.intents``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from callgate_rules.decision_log import DecisionLog
from callgate_rules.documents.model import GateConfig
from callgate_rules.intent import BoundIntent, IntentSource
from callgate_rules.pipeline import intents
from callgate_rules.pipeline.budgets import Run
from callgate_rules.provenance import Sealer, read_conversation
from callgate_rules.store.base import ReceiptStore
from callgate_rules.store.history import MemoryHistory, RunHistory
from callgate_rules.store.intents import MemoryIntents, RunIntents


class KeepsRuns:
    """Where a ``Gate`` keeps its runs' state — their histories (``histories``) and
    intents (``intents``) — and how a host declares a run's intent (``declare_intent``,
    ``intent_of``)."""

    # where histories are kept, for the store it was worked out for (an isinstance of a
    # protocol costs as much as a small decision: asked once per store, not per call)
    _histories: tuple[object, RunHistory] | None = None
    _intents: tuple[object, RunIntents] | None = None

    config: GateConfig
    decision_log: DecisionLog | None
    sealer: Sealer
    history_retention: timedelta
    clock: Callable[[], datetime]

    if TYPE_CHECKING:  # supplied by the Gate
        @property
        def store(self) -> ReceiptStore: ...
        def count(self, counter: str) -> None: ...

    @property
    def histories(self) -> RunHistory:
        """Where runs' histories are kept: the receipt store, when it keeps them; else the
        gate's own memory."""
        store = self.store
        if self._histories is None or self._histories[0] is not store:
            kept = store if isinstance(store, RunHistory) else MemoryHistory()
            self._histories = (store, kept)
        return self._histories[1]

    @cached_property
    def own_intents(self) -> MemoryIntents:
        """Runs' intents, when the store keeps none."""
        return MemoryIntents()

    @cached_property
    def compiled_intents(self) -> intents.CompiledIntents:
        return intents.CompiledIntents()

    @property
    def intents(self) -> RunIntents:
        """Where runs' intents are kept: the receipt store, when it keeps them; else the
        gate's own memory (worked out once per store, as ``histories`` is)."""
        store = self.store
        if self._intents is None or self._intents[0] is not store:
            kept = store if isinstance(store, RunIntents) else self.own_intents
            self._intents = (store, kept)
        return self._intents[1]

    def declare_intent(self, run: Run | str, intent: IntentSource, *, declared_by: str,
                       now: datetime | None = None, conversation: Any = None) -> BoundIntent:
        """Bind ``intent`` (a ``RunIntent``, its document or spec as a mapping, or YAML
        text) to the run, or narrow the run's intent to it: every instance on the same
        store then judges the run's calls by it (``pipeline.intents``). The first is
        refused once the run has decided a call, or when ``conversation`` holds tool
        output; a later one that widens the bound is refused (``IntentWidened``), counted
        and logged. ``IntentError`` names each problem of an intent that is not valid."""
        run_id = run if isinstance(run, str) else run.run_id
        read = (read_conversation(conversation, sealer=self.sealer)
                if conversation is not None else None)
        return intents.declare(self, run_id, intent, declared_by=declared_by,
                               now=now or self.clock(), conversation=read, count=self.count)

    def intent_of(self, run: Run | str) -> BoundIntent | None:
        """The run's intent as bound now, or ``None``."""
        return intents.bound(self, self.config, run if isinstance(run, str) else run.run_id)
