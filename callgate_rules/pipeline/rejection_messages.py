"""How a rejected call is routed and worded: where it goes and in whose words it speaks
(``Routed``), its agent and user messages put together when first read
(``RejectionMessages``), and the same worked out once for a rejection a tool's plan
foresaw (``Foretold``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from callgate_rules.documents.model import Contract, Routing
from callgate_rules.pipeline.decision import Deferred, PairedMessage, RawTraceEntry
from callgate_rules.pipeline.messages import agent_message, user_message
from callgate_rules.pipeline.outcome import Foreseen, Rejection, text_of
from callgate_rules.taxonomy import ErrorClass, Route


class Routed(NamedTuple):
    """Where a rejection goes, and in whose words its messages speak."""

    route: Route
    speaks_as: ErrorClass  # a denial that depends on a record speaks as "not found"
    advice_route: Route  # the route whose advice the agent message gives
    entry: RawTraceEntry

    @classmethod
    def of(cls, rejection: Rejection, routing: Routing) -> Routed:
        route = rejection.route or routing.route_for(rejection.error_class)
        speaks_as = rejection.speaks_as or rejection.error_class
        return cls(route, speaks_as,
                   routing.route_for(speaks_as) if rejection.speaks_as else route,
                   ("route", str(rejection.error_class), str(route)))


class RejectionMessages:
    """A rejected call's agent and user messages, put together when first read: from the
    rejection's own words, the routing table's and the route's advice."""

    __slots__ = ("rejection", "routed", "routing", "contract", "arguments", "actor", "tools",
                 "named")

    def __init__(self, rejection: Rejection, routed: Routed, routing: Routing,
                 contract: Contract | None, arguments: Mapping[str, Any] | None,
                 actor: Mapping[str, Any], tools: str) -> None:
        """``arguments``, ``actor``: as decided on (copies the host cannot change)."""
        self.rejection, self.routed, self.routing = rejection, routed, routing
        self.contract, self.tools = contract, tools
        self.arguments, self.actor = arguments, actor
        self.named: dict[str, Any] | None = None

    def both(self) -> tuple[PairedMessage, PairedMessage]:
        return _rendered(self.agent), _rendered(self.user)

    def agent(self) -> str:
        rejection, routed = self.rejection, self.routed
        return agent_message(routed.speaks_as, routed.advice_route, self.routing,
                             text_of(rejection.agent_message), rejection.hint,
                             self.variables())

    def user(self) -> str:
        return user_message(self.routed.speaks_as, self.routing,
                            text_of(self.rejection.user_message), self.variables())

    def variables(self) -> dict[str, Any]:
        """What the routing table's message templates may name (worked out once)."""
        if self.named is None:
            rejection = self.rejection
            self.named = {
                "tool": self.contract.name if self.contract else None,
                "tools": self.tools,
                "detail": rejection.detail,
                **{k: v for k, v in rejection.extra.items() if isinstance(k, str)},
                "args": self.arguments if self.arguments is not None else {},
                "actor": self.actor,
            }
        return self.named


class Foretold:
    """How a rejection a tool's plan foresaw is routed and worded: worked out once, with
    the plan."""

    __slots__ = ("foreseen", "routed", "routing", "contract", "tools", "decided")

    def __init__(self, foreseen: Foreseen, routing: Routing, contract: Contract,
                 tools: str) -> None:
        self.foreseen, self.routing, self.contract, self.tools = \
            foreseen, routing, contract, tools
        template, routed = foreseen.template, Routed.of(foreseen.template, routing)
        self.routed = routed
        # read once for every decision: entry, route, error class, rule, detail, candidates, extra
        self.decided = (routed.entry, routed.route, template.error_class, template.rule,
                        template.detail, template.candidates, template.extra or None)

    def messages(self, arguments: dict[str, Any], actor: dict[str, Any],
                 more: dict[str, Any] | None) -> tuple[PairedMessage, PairedMessage]:
        """The agent and user messages for the values a call was decided on (``more``:
        those of ``Foreseen.more_reads``): the rejection made (``Foreseen.make``) and
        worded as any other."""
        decided = {"args": arguments, "actor": actor, "tool": self.contract.name,
                   **(more or {})}
        return RejectionMessages(self.foreseen.make(decided), self.routed, self.routing,
                                 self.contract, arguments, actor, self.tools).both()


def _rendered(render: Callable[[], str]) -> PairedMessage:
    """The message, or, should it fail to render, what fails again on each read of it."""
    try:
        return render()
    except Exception:
        return Deferred(render)
