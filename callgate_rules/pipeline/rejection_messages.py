"""How a rejected call is routed and worded: where it goes and in whose words it speaks
(``Routed``), and its agent and user messages, worked out from the record of what was
decided (``messages_of``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from callgate_rules.pipeline.messages import agent_message, user_message, with_note
from callgate_rules.pipeline.outcome import Rejection, text_of
from callgate_rules.taxonomy import ErrorClass, Route

if TYPE_CHECKING:
    from callgate_rules.documents.model import Routing
    from callgate_rules.pipeline.decision import Decided, RawTraceEntry


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


def messages_of(decided: Decided) -> tuple[str | Exception, str | Exception]:
    """A rejected call's agent and user messages: from the rejection's own words, the
    routing table's and the route's advice, filled with the values the call was decided
    on. A message that cannot be rendered is its error (the other is rendered all the
    same). With several calls proposed and one taken, the agent hears the others did not
    run."""
    rejection = decided.rejection
    assert rejection is not None, "an allowed decision is given its messages"
    if rejection.prepare is not None:  # prepared with the plan: made for these values now
        rejection = rejection.prepare({
            "args": decided.arguments, "actor": decided.actor,
            "tool": decided.contract.name if decided.contract else None,
            **(decided.more or {})})
    routed = rejection.routed or Routed.of(rejection, decided.routing)
    named = {
        "tool": decided.contract.name if decided.contract else None,
        "tools": decided.tools,
        "detail": rejection.detail,
        **{k: v for k, v in rejection.extra.items() if isinstance(k, str)},
        "args": decided.arguments if decided.arguments is not None else {},
        "actor": decided.actor,
    }
    routing = decided.routing
    agent = _rendered(lambda: agent_message(
        routed.speaks_as, routed.advice_route, routing, text_of(rejection.agent_message),
        rejection.hint, named))
    user = _rendered(lambda: user_message(routed.speaks_as, routing,
                                          text_of(rejection.user_message), named))
    if isinstance(agent, str) and decided.call is not None:
        agent = with_note(agent, decided.call.note)
    return agent, user


def _rendered(render: Callable[[], str]) -> str | Exception:
    try:
        return render()
    except Exception as error:  # a host's value no template can spell out, say
        return error
