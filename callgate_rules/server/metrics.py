"""``/metrics``: the service in Prometheus' text format, from its own registry.

- ``callgate_decisions_total{tool,route,error_class}`` — every decision recorded;
- ``callgate_outcomes_total{tool,error_class,counter}`` — the counters of SPEC §10
  (argument_errors, denials, unknown_outcomes, reconciliations, suppressed_duplicates,
  regenerations, retries, hand_overs, budget_exhausted, shadow verdicts);
- ``callgate_request_seconds{endpoint}`` — the latency of each API call, a histogram;
- ``callgate_store_seconds{operation}`` — each receipt-store call, a histogram;
- ``callgate_login_failures_total{reason}`` — failed sign-ins to the review page
  (``bad_credentials``, ``bad_token``, ``rate_limited``, ``busy``);
- ``callgate_review_queue_depth{status}`` and ``callgate_pending_confirmations`` — read
  from the store at each scrape (so every instance over one store reports the same).

Tool labels are the configuration's tool names only (anything else is ``unknown``), so a
model inventing tool names cannot grow the label set.
"""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.context_managers import Timer
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from callgate_rules.decision_log import count
from callgate_rules.errors import StoreError
from callgate_rules.pipeline.decision import Decision
from callgate_rules.store.base import ReceiptState, ReceiptStore, ReviewStatus

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0)


class Metrics:
    """The service's metrics; ``observe`` is an observer of ``HostedWrites``."""

    def __init__(self, tools: Collection[str]) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created: unread noise
        self.tools = frozenset(tools)
        self.registry = CollectorRegistry()
        self.decisions = Decisions()  # callgate_decisions_total, callgate_outcomes_total
        self.registry.register(self.decisions)
        self.requests = Histogram("callgate_request_seconds", "Latency of each API call",
                                  ["endpoint"], buckets=LATENCY_BUCKETS,
                                  registry=self.registry)
        self.login_failures = Counter("callgate_login_failures", "Failed sign-ins to the "
                                      "review page, by reason (bad_credentials, bad_token, "
                                      "rate_limited, busy)", ["reason"],
                                      registry=self.registry)
        self.store = Histogram("callgate_store_seconds", "Latency of each receipt-store "
                               "call", ["operation"], buckets=LATENCY_BUCKETS,
                               registry=self.registry)
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def labelled(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once: every request touches the same few
        label sets, and ``labels`` checks its arguments and takes a lock on each call. (Two
        threads may both look one up at first; ``labels`` gives both the same child.)"""
        child = self._children.get((metric, labels))
        if child is None:
            child = self._children[(metric, labels)] = metric.labels(*labels)
        return child

    def timed(self, endpoint: str) -> Timer:
        """A ``with`` block's seconds, observed as a call of ``endpoint``."""
        calls: Histogram = self.labelled(self.requests, endpoint)
        return calls.time()

    def tool_label(self, tool: str | None) -> str:
        if tool is None:
            return "none"
        return tool if tool in self.tools else "unknown"

    def observe(self, decision: Decision) -> None:
        error_class = str(decision.error_class) if decision.error_class else "none"
        self.decisions.count((self.tool_label(decision.tool), str(decision.route),
                              error_class), decision.counted())

    def watch(self, store: ReceiptStore) -> None:
        """Report the store's queue and pending confirmations at each scrape."""
        self.registry.register(QueueCollector(store))


class Decisions(Collector):
    """``callgate_decisions_total{tool,route,error_class}`` and
    ``callgate_outcomes_total{tool,error_class,counter}``, read at each scrape from one
    tally per tool, route and error class of the counters ``decision_log.count`` counts
    (each decision counts one in ``decisions``).

    Why not two prometheus counters: a tally made for each decision, then a labelled
    child incremented for it and for each of its counters, cost as much as the rest of
    observing the decision; here it is counted once, into its label set's own tally."""

    def __init__(self) -> None:
        self.tallies: dict[tuple[str, str, str], Tally[str]] = {}
        self.lock = threading.Lock()  # decisions are observed in worker threads too

    def count(self, labels: tuple[str, str, str], counted: Mapping[str, Any]) -> None:
        """One more decision of ``labels`` (tool, route, error class), ``counted`` being
        what ``decision_log.count`` reads of it (``Decision.counted``)."""
        with self.lock:
            tally = self.tallies.get(labels)
            if tally is None:
                tally = self.tallies[labels] = Tally()
            count(tally, counted)

    def collect(self) -> Iterator[Metric]:
        decisions = CounterMetricFamily("callgate_decisions", "Decisions recorded, by tool, "
                                        "route and error class",
                                        labels=["tool", "route", "error_class"])
        outcomes = CounterMetricFamily("callgate_outcomes", "The counters of SPEC section "
                                       "10, by tool and error class",
                                       labels=["tool", "error_class", "counter"])
        with self.lock:
            tallies = [(labels, dict(tally)) for labels, tally in self.tallies.items()]
        by_class: Tally[tuple[str, str, str]] = Tally()
        for (tool, route, error_class), tally in tallies:
            decisions.add_metric([tool, route, error_class], tally["decisions"])
            for counter, amount in tally.items():
                if counter != "decisions" and amount:
                    by_class[(tool, error_class, counter)] += amount
        for labels, amount in by_class.items():
            outcomes.add_metric(list(labels), amount)
        yield decisions
        yield outcomes


class QueueCollector(Collector):
    def __init__(self, store: ReceiptStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("callgate_review_queue_depth",
                                  "Review items by status (resolved ones excluded)",
                                  labels=["status"])
        pending = GaugeMetricFamily("callgate_pending_confirmations",
                                    "Writes waiting for a person's confirmation")
        try:
            items = self.store.list_reviews()
            waiting = self.store.list_receipts(state=ReceiptState.AWAITING_CONFIRMATION,
                                               limit=100_000)
        except StoreError:
            return  # readiness reports the store; a scrape still answers
        statuses = Tally(str(item.status) for item in items)
        for status in (ReviewStatus.OPEN, ReviewStatus.TAKEN):
            depth.add_metric([str(status)], statuses.get(str(status), 0))
        pending.add_metric([], len(waiting))
        yield depth
        yield pending


class TimedStore:
    """A receipt store whose every call is timed into ``callgate_store_seconds``."""

    def __init__(self, store: ReceiptStore, histogram: Histogram) -> None:
        self._store = store
        self._histogram = histogram
        self.url = store.url

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        if not callable(method) or name.startswith("_"):
            return method
        observed = self._histogram.labels(name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                observed.observe(time.perf_counter() - started)

        setattr(self, name, timed)  # made once per method
        return timed
