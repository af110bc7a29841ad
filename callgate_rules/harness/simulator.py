"""The simulated destination the harness binds the gate to, and how it is configured.

``Simulator`` is the generic ``destination.Destination`` with a configuration chosen per
run: ``simulated_tools(config, ...)`` gives every contract of a configuration a simulated
tool (its own answer, a declared ``result``, or the generic one), so any domain's tools run
in tests and scenarios without Python. Without ``tools`` it is the support desk
(``support_desk.TOOLS``), the reference domain's configuration.

A host that wants its real systems in its own tests binds them as usual,
``Gate(executors=...)``, or passes ``executors`` to ``scenarios.run_scenario``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from callgate_rules.documents.model import GateConfig
from callgate_rules.harness import support_desk
from callgate_rules.harness.destination import (
    Call,
    Destination,
    Faults,
    Find,
    Record,
    SimulatedTool,
    Write,
    check_tool,
    faults_by_tool,
)
from callgate_rules.harness.support_desk import EMAILS, EVENTS, FOLLOW_UPS, PAYMENTS

__all__ = ["Call", "Faults", "Find", "Simulator", "SimulatedTool", "Write", "faults_by_tool",
           "simulated_tools", "DESTINATIONS", "EMAILS", "EVENTS", "FOLLOW_UPS", "PAYMENTS",
           "READ_TOOLS", "WRITE_TOOLS", "TOOLS"]

WRITE_TOOLS = frozenset(n for n, t in support_desk.TOOLS.items() if t.effect == "write")
READ_TOOLS = frozenset(n for n, t in support_desk.TOOLS.items() if t.effect == "read")
TOOLS = WRITE_TOOLS | READ_TOOLS

DestinationName = Literal["generic", "support-desk"]
# The configurations a scenario or PolicyTest can name with ``destination:``.
DESTINATIONS: Mapping[str, Mapping[str, SimulatedTool]] = {
    "generic": {}, "support-desk": support_desk.TOOLS}


class Simulator(Destination):
    """A simulated destination; by default the support desk's seven tools."""

    def __init__(
        self,
        world: Mapping[str, list[Record]],
        faults: Mapping[str, Faults] | None = None,
        tools: Mapping[str, SimulatedTool] | None = None,
    ) -> None:
        super().__init__(world, faults, support_desk.TOOLS if tools is None else tools)

    def close_ticket(self, ticket_id: str) -> None:
        """The support desk's ticket closes behind the gate's back."""
        self.update("tickets", ticket_id, status="closed")


def simulated_tools(config: GateConfig, destination: str = "generic",
                    results: Mapping[str, Any] | None = None) -> dict[str, SimulatedTool]:
    """A simulated tool for every contract of ``config``: the named configuration's own
    where it has one, else the generic answer; ``results`` (tool → declared answer) wins
    over both. An unknown destination or a result for an unknown tool is a ValueError."""
    if destination not in DESTINATIONS:
        raise ValueError(f"unknown destination {destination!r}; known: "
                         f"{', '.join(sorted(DESTINATIONS))}")
    known = DESTINATIONS[destination]
    tools: dict[str, SimulatedTool] = {}
    for name, contract in config.contracts.items():
        effect: Literal["read", "write"] = "read" if contract.effect == "read" else "write"
        tools[name] = known.get(name) or SimulatedTool(effect)
    if not isinstance(results or {}, Mapping):
        raise ValueError(f"results must map tool names to answers, not {results!r}")
    for name, result in (results or {}).items():
        check_tool(name, tools)
        tools[name] = replace(tools[name], result=result)
    return tools
