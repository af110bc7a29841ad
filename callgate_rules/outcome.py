"""How a pipeline step ends a call early: it raises ``Rejection`` with a classified outcome.

Each step is a plain function that either returns what the next step needs or raises a
``Rejection``; the gate turns a rejection into a routed ``Decision`` in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .decision import Deferred
from .errors import ErrorClass, Route


@dataclass
class Rejection(Exception):
    error_class: ErrorClass
    detail: str  # for the log record: what exactly went wrong, technically
    rule: str | None = None  # the deciding rule, when a rule decided
    # Rendered, or rendered when first read; None → the routing table's default.
    agent_message: str | Deferred[str] | None = None
    user_message: str | Deferred[str | None] | None = None
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


def text_of(message: str | Deferred[str] | Deferred[str | None] | None) -> str | None:
    """A message of a rejection, rendered now if it was left for later."""
    return message.compute() if isinstance(message, Deferred) else message
