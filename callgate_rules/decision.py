"""What the gate answers: a typed decision with its route, three messages and a trace."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ErrorClass, Route


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


@dataclass(frozen=True)
class ShadowVerdict:
    """A verdict of a rule in ``warn`` or ``audit`` mode: recorded, not enforced."""

    rule: str
    mode: str
    error_class: str
    message: str


@dataclass(frozen=True)
class Decision:
    """The gate's answer to one proposal. ``error_class`` is ``None`` when all went well."""

    route: Route
    error_class: ErrorClass | None
    tool: str | None
    contract_version: str | None
    rule: str | None  # the rule that decided, as ``document/rule`` or ``tool/rule``
    agent_message: str  # goes back into the model's context
    user_message: str  # safe to show the person in the chat
    log: Mapping[str, Any]  # for engineers: masked, structured, one JSON line
    versions: Mapping[str, str]  # every document that took part → its version
    trace: tuple[TraceEntry, ...] = ()
    arguments: Mapping[str, Any] | None = None  # the validated arguments
    call_id: str | None = None  # the model's own call ID, to answer it in its format
    candidates: tuple[Mapping[str, Any], ...] = ()  # for ``ambiguous``: permitted fields only
    warnings: tuple[ShadowVerdict, ...] = ()
    operation_id: str | None = None
    result: Any = None  # the destination's original result, apart from the model's retelling
    draft: str | None = None  # what a person confirms, for ``await_confirmation``
    confirmation_token: str | None = None
    limit_path: str | None = None  # set when a budget's limit decided the route
    retry_after: float | None = None  # seconds to wait, for ``retry``
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def allowed(self) -> bool:
        return self.error_class is None

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
