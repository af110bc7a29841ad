"""Step 5 — EXECUTE: run a write at most once under a runtime-made operation ID."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ExecutionRequest:
    """What an executor (the host's tool function) receives."""

    tool: str
    arguments: Mapping[str, Any]  # validated arguments
    operation_id: str  # made by the runtime; pass it to the destination as idempotency key
    deadline: datetime  # answer before this, or the gate treats the outcome as unknown
    actor: Mapping[str, Any]
    records: Mapping[str, Any] = field(default_factory=dict)  # looked-up records by name


Executor = Callable[[ExecutionRequest], Any]
# Ask the destination whether an operation happened: its original result, or None.
Finder = Callable[[str, str], Any]  # (tool, operation_id) → result or None
