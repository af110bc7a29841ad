"""A run's budgets and the limit path: calls per tool, failures, corrected calls in a row
and the run deadline (``Run``), and the real path a run's or a call's limit leads to (a
partial result, a hand-over or a refusal) with its own messages."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from callgate_rules.documents.model import Budgets, LimitPath, Routing
from callgate_rules.pipeline.messages import user_message
from callgate_rules.taxonomy import FAILURES, ErrorClass, Route

if TYPE_CHECKING:
    from callgate_rules.pipeline.decision import Decision


@cache
def seconds(amount: float) -> timedelta:
    """``timedelta(seconds=amount)`` for the few durations a configuration names (a lease, a
    call deadline, a run's deadline, a contract's timeout), each made once: a ``timedelta``
    made from keywords costs about 4,000 instructions, and a write needs four."""
    return timedelta(seconds=amount)


@dataclass
class Run:
    """One agent run's budgets: calls per tool, failures, regenerations, the deadline.

    The host keeps one per conversation turn (or task) and passes it to every ``handle``.
    """

    started_at: datetime
    # 128 random bits as 32 hex digits, as a uuid4's hex would look (which costs four times
    # as much to make, and a run is made per proposal when the host keeps none)
    run_id: str = field(default_factory=lambda: secrets.token_hex(16))
    calls: Counter[str] = field(default_factory=Counter)
    failures: int = 0
    regenerations_in_a_row: int = 0

    def limit_reached(self, budgets: Budgets, tool: str | None, now: datetime) -> str | None:
        """Which run limit a new proposal would pass, in words, or ``None``."""
        if now - self.started_at > seconds(budgets.run_deadline_seconds):
            return f"the run deadline of {budgets.run_deadline_seconds:g}s has passed"
        if self.failures >= budgets.failures_per_run:
            return f"{self.failures} failed calls in this run (limit {budgets.failures_per_run})"
        if tool is not None and self.calls[tool] >= budgets.calls_per_tool_per_run:
            return (f"{self.calls[tool]} calls of {tool} in this run "
                    f"(limit {budgets.calls_per_tool_per_run})")
        return None

    def admit(self, decision: Decision, budgets: Budgets, now: datetime) -> str | None:
        """Count a decided proposal against the run; which limit it passes, or ``None``.
        A regeneration spends the run's budget of corrected calls; a call that may go on
        resets it and counts against its tool."""
        limit = self.limit_reached(budgets, decision.tool, now)
        if limit is not None:
            return limit
        if decision.route == Route.REGENERATE:
            if self.regenerations_in_a_row >= budgets.regenerations_per_call:
                return (f"{self.regenerations_in_a_row} corrected call(s) already asked for "
                        f"(limit {budgets.regenerations_per_call})")
            self.regenerations_in_a_row += 1
        elif goes_on(decision):
            self.regenerations_in_a_row = 0
            assert decision.tool is not None
            self.calls[decision.tool] += 1
        return None

    def ended(self, decision: Decision) -> None:
        if decision.error_class in FAILURES:
            self.failures += 1


def goes_on(decision: Decision) -> bool:
    """Does the decision of steps 1–4 go on to execution (or to a person's confirmation)?"""
    return (decision.route in (Route.EXECUTE, Route.AWAIT_CONFIRMATION) and
        decision.error_class in (None, ErrorClass.CONFIRMATION_REQUIRED))


def limit_route(path: LimitPath) -> Route:
    return {LimitPath.HAND_OVER: Route.REVIEW, LimitPath.REFUSE: Route.REFUSE,
            LimitPath.PARTIAL_RESULT: Route.REFUSE}[path]


def limit_messages(routing: Routing, variables: Mapping[str, Any]) -> tuple[str, str]:
    """The limit path's messages; ``variables`` are what their templates may name."""
    written = routing.on_limit_messages
    agent = (written.agent.render(variables) if written.agent else
        _LIMIT_AGENT_MESSAGES[routing.on_limit].format(detail=variables["detail"]))
    user = (written.user.render(variables) if written.user else
        user_message(ErrorClass.BUDGET_EXHAUSTED, routing, None, variables))
    return agent, user


_LIMIT_AGENT_MESSAGES = {
    LimitPath.PARTIAL_RESULT: "The tool-call limit is reached ({detail}). Stop calling tools "
                              "and give the user the partial result you have, saying what is "
                              "missing.",
    LimitPath.HAND_OVER: "The tool-call limit is reached ({detail}). Stop calling tools; a "
                         "person takes over. Tell the user so.",
    LimitPath.REFUSE: "The tool-call limit is reached ({detail}). Stop calling tools and tell "
                      "the user this cannot be done now.",
}
