"""``/metrics`` counts decisions into one tally per tool, route and error class
(``metrics.Decisions``); a scrape reads the same families, samples and values as two
prometheus counters incremented for each decision (``callgate_decisions_total`` by tool,
route and error class; ``callgate_outcomes_total`` by tool, error class and counter, for
each counter of ``decision_log.count`` above zero), whatever the decisions."""

from __future__ import annotations

from collections import Counter as Tally
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import (
    CollectorRegistry,
    Counter,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.parser import text_string_to_metric_families

from callgate_rules.decision_log import count
from callgate_rules.server.metrics import Decisions
from callgate_rules.taxonomy import ErrorClass, Route

COUNTED = st.fixed_dictionaries({
    "route": st.sampled_from([str(route) for route in Route]),
    "error_class": st.none() | st.sampled_from([str(each) for each in ErrorClass]),
}, optional={
    "unknown_outcome": st.booleans(), "reconciled": st.booleans(),
    "retries": st.integers(0, 3),
    "shadow": st.lists(st.fixed_dictionaries({"mode": st.sampled_from(["warn", "audit"])}),
                       max_size=2),
})
DECISIONS = st.lists(st.tuples(st.sampled_from(["sendPayment", "unknown", "none"]), COUNTED),
                     max_size=12)


def incremented(decisions: list[tuple[str, dict[str, Any]]]) -> str:
    """The exposition of two prometheus counters, incremented for each decision."""
    disable_created_metrics()  # type: ignore[no-untyped-call]  # as metrics.Metrics does
    registry = CollectorRegistry()
    decided = Counter("callgate_decisions", "Decisions recorded, by tool, route and error "
                      "class", ["tool", "route", "error_class"], registry=registry)
    outcomes = Counter("callgate_outcomes", "The counters of SPEC section 10, by tool and "
                       "error class", ["tool", "error_class", "counter"], registry=registry)
    for tool, counted in decisions:
        error_class = counted["error_class"] or "none"
        decided.labels(tool, counted["route"], error_class).inc()
        tally: Tally[str] = Tally()
        count(tally, counted)
        for counter, amount in tally.items():
            if counter != "decisions" and amount:
                outcomes.labels(tool, error_class, counter).inc(amount)
    return generate_latest(registry).decode()


def tallied(decisions: list[tuple[str, dict[str, Any]]]) -> str:
    registry = CollectorRegistry()
    counts = Decisions()
    registry.register(counts)
    for tool, counted in decisions:
        counts.count((tool, counted["route"], counted["error_class"] or "none"), counted)
    return generate_latest(registry).decode()


def read(text: str) -> dict[str, tuple[str, str, set[tuple[Any, ...]]]]:
    return {family.name: (family.type, family.documentation,
                          {(sample.name, tuple(sorted(sample.labels.items())), sample.value)
                           for sample in family.samples})
            for family in text_string_to_metric_families(text)}


@settings(max_examples=200, deadline=None)
@given(DECISIONS)
def test_a_scrape_reads_what_counters_incremented_per_decision_read(
        decisions: list[tuple[str, dict[str, Any]]]) -> None:
    assert read(tallied(decisions)) == read(incremented(decisions))
