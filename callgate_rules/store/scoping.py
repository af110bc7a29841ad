"""Who may see which receipts and review items: a caller's ``Scope``, and its SQL.

A scope restricts by the write's ``actor`` (for each named actor field, the text values it
may have) and by tool. The service builds one per caller from verified identity only: a
host token's pinned claims, a reviewer's declared scope in the users file
(``server.users``). The stores filter with it in their queries (``list_receipts``,
``list_reviews``, ``take_review``), so a caller never loads what it may not see.

A review item's actor is its receipt's; an item without a receipt (a read handed over at its
limit) has the actor its payload recorded, if any. A value that is not text (a number, a
list) matches nothing: scopes compare text, never a guess at a conversion.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# actor field names in a scope: used as JSON keys in SQL (always as parameters), and
# checked here so that a name is never more than a name
FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Scope:
    """What one caller may see: receipts and review items whose actor has, for every field
    in ``actor``, one of its listed text values, and whose tool is in ``tools`` (``None``:
    any tool). ``Scope()`` admits everything; ``NOTHING`` admits nothing."""

    actor: Mapping[str, frozenset[str]] = field(default_factory=dict)
    tools: frozenset[str] | None = None

    def __post_init__(self) -> None:
        for name in self.actor:
            if not FIELD_NAME.match(name):
                raise ValueError(f"a scope's actor field must be a plain name, not {name!r}")

    def admits(self, tool: str, actor: Mapping[str, Any] | None) -> bool:
        if self.tools is not None and tool not in self.tools:
            return False
        given = actor or {}
        return all(isinstance(given.get(name), str) and given[name] in values
                   for name, values in self.actor.items())

    @property
    def is_everything(self) -> bool:
        return not self.actor and self.tools is None

    def describe(self) -> str:
        """In words, for a log line or a page."""
        if self.tools is not None and not self.tools:
            return "nothing"
        parts = [f"{name} in {sorted(values)}" for name, values in sorted(self.actor.items())]
        if self.tools is not None:
            parts.append(f"tool in {sorted(self.tools)}")
        return " and ".join(parts) or "everything"


NOTHING = Scope(tools=frozenset())


def pinned_scope(pins: Mapping[str, Any]) -> Scope:
    """The scope of a caller whose verified token pins these actor fields: exactly the
    writes of actors with those values (a pin that is not text admits nothing)."""
    return Scope({name: frozenset([value]) if isinstance(value, str) else frozenset()
                  for name, value in pins.items()})


# The SQL predicate ---------------------------------------------------------------------------

# The text of one field of a JSON column, or NULL when it is not text: (column, parameter
# holding the field's name) -> SQL with ``{parameter}`` templates (``statements.render``).
FieldText = Callable[[str, str], str]


def scope_predicate(scope: Scope | None, *, actor_column: str, tool_column: str,
                    field_text: FieldText) -> tuple[str, dict[str, Any]]:
    """``scope`` as a SQL condition (a ``statements.render`` template) over the row's actor
    JSON expression and tool column, and its named parameters. Field names and values are
    always parameters, never spliced into the text."""
    if scope is None or scope.is_everything:
        return "1 = 1", {}
    conditions: list[str] = []
    parameters: dict[str, Any] = {}
    if scope.tools is not None:
        names = []
        for index, tool in enumerate(sorted(scope.tools)):
            parameters[f"scope_tool_{index}"] = tool
            names.append(f"{{scope_tool_{index}}}")
        conditions.append(f"{tool_column} IN ({', '.join(names)})" if names else "1 = 0")
    for number, (name, values) in enumerate(sorted(scope.actor.items())):
        parameters[f"scope_field_{number}"] = name
        placeholders = []
        for index, value in enumerate(sorted(values)):
            parameters[f"scope_value_{number}_{index}"] = value
            placeholders.append(f"{{scope_value_{number}_{index}:text}}")
        if not placeholders:
            conditions.append("1 = 0")
            continue
        text = field_text(actor_column, f"scope_field_{number}")
        conditions.append(f"{text} IN ({', '.join(placeholders)})")
    return " AND ".join(f"({condition})" for condition in conditions), parameters
