"""How a pipeline step ends a call early: it raises ``Rejection`` with a classified outcome.

Each step is a plain function that either returns what the next step needs or raises a
``Rejection``; the gate turns a rejection into a routed ``Decision`` in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ErrorClass, Route


@dataclass
class Rejection(Exception):
    error_class: ErrorClass
    detail: str  # for the log record: what exactly went wrong, technically
    rule: str | None = None  # the deciding rule, when a rule decided
    agent_message: str | None = None  # already rendered; None → the routing table's default
    user_message: str | None = None
    hint: str | None = None  # what a valid call looks like
    route: Route | None = None  # a rule may override the routing table
    candidates: tuple[Mapping[str, Any], ...] = ()
    retry_after: float | None = None
    contract: Any = None  # the Contract, when the call got far enough to have one
    # A denial that depends on a record speaks exactly like "not found" for that record.
    speaks_as: ErrorClass | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.error_class}: {self.detail}"
