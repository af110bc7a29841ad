"""What the steps of one decision have learnt so far (``Progress``), so a rejection at any
step can still name the tool and the versions; and what routing reads of a tool's plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from callgate_rules.documents.model import Contract
from callgate_rules.pipeline import parse
from callgate_rules.pipeline.decision import RawTraceEntry, ShadowVerdict
from callgate_rules.provenance import Conversation


class ToolPlanView(Protocol):
    """What routing reads of a tool's plan (``plan.ToolPlan``)."""

    @property
    def versions(self) -> Mapping[str, str]: ...

    @property
    def passed(self) -> str: ...


class Progress:
    """What the steps have learnt so far, so a rejection can still name tool and versions.

    A plain class with slots: one is made per decision, and a dataclass's generated
    ``__init__`` with default factories costs noticeably more."""

    __slots__ = ("trace", "shadow", "call", "variables", "started", "session",
                 "conversation", "contract_only", "plan", "decided_entries")

    def __init__(self, started: float, session: dict[str, Any],
                 conversation: Conversation | None) -> None:
        self.trace: list[RawTraceEntry] = []
        self.shadow: list[ShadowVerdict] = []
        self.call: parse.ParsedCall | None = None
        self.variables: dict[str, Any] = {}
        self.started = started
        self.session = session
        self.conversation = conversation
        self.contract_only: Contract | None = None  # known before the call fully parsed
        self.plan: ToolPlanView | None = None  # the tool's, once the call is parsed
        self.decided_entries = 0  # the trace's length when steps 1–4 decided (``Router``)

    @property
    def contract(self) -> Contract | None:
        return self.call.contract if self.call else self.contract_only
