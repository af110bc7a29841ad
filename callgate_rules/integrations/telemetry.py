"""Decisions for operators: an OpenTelemetry span per decision and a stdlib ``logging``
record per decision — observers (``Callable[[Decision], None]``) a host passes decisions to.

    spans = DecisionSpans()              # the global tracer provider's "callgate" tracer
    decision = gate.handle(call, actor=actor, request_id=rid)
    spans(decision)                      # or HostedWrites(config, observers=[spans])

A span is named ``callgate.decision``; its attributes are the tool, route, error class,
rule, request and operation IDs (``callgate.operation_id``), and each step of the trace is
an event (``propose``, ``parse``, …, with the subject and result as attributes). It spans
the decision's own time (the log's ``elapsed_ms``), and its events lie inside it. Traces the
service exports name ``service.name`` ``callgate`` unless ``OTEL_SERVICE_NAME`` says
otherwise (``service_resource``). Nothing is exported unless the host
configured an OpenTelemetry SDK: with the API alone the tracer is a no-op. Needs
``opentelemetry-api`` (the ``otel`` extra), imported only when ``DecisionSpans`` is made.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from callgate_rules.pipeline.decision import Decision

LOGGER = logging.getLogger("callgate.decisions")
SERVICE_NAME = "callgate"


def service_resource() -> Any:
    """The OpenTelemetry resource of callgate's spans: ``service.name`` is ``callgate``
    unless ``OTEL_SERVICE_NAME`` (or ``OTEL_RESOURCE_ATTRIBUTES``) names it otherwise."""
    import os

    from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_NAME_KEY
    from opentelemetry.sdk.resources import Resource

    detected = Resource.create()  # reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
    return detected if named else detected.merge(Resource({SERVICE_NAME_KEY: SERVICE_NAME}))


class DecisionSpans:
    """An observer that records each decision as an OpenTelemetry span."""

    def __init__(self, tracer: Any = None) -> None:
        if tracer is None:
            from opentelemetry import trace

            tracer = trace.get_tracer("callgate")
        self.tracer = tracer

    def __call__(self, decision: Decision) -> None:
        log = decision.log
        end = time.time_ns()
        elapsed = log.get("elapsed_ms")
        start = end - int(float(elapsed) * 1e6) if isinstance(elapsed, int | float) else end
        attributes = {key: str(value) for key, value in (
            ("callgate.tool", decision.tool), ("callgate.route", decision.route),
            ("callgate.error_class", decision.error_class), ("callgate.rule", decision.rule),
            ("callgate.request_id", log.get("request_id")),
            ("callgate.operation_id", decision.operation_id)) if value is not None}
        span = self.tracer.start_span("callgate.decision", start_time=start,
                                      attributes=attributes)
        for entry in decision.trace:
            event = {"callgate.subject": entry.subject, "callgate.result": entry.result}
            if entry.detail:
                event["callgate.detail"] = entry.detail
            # the steps carry no clock of their own: each is stamped at the decision's end,
            # inside its span (an event after the span's end is dropped by some backends)
            span.add_event(entry.step, event, timestamp=end)
        span.end(end_time=end)


def log_decision(decision: Decision) -> None:
    """One ``callgate.decisions`` record per decision (INFO; DEBUG adds the trace)."""
    if not LOGGER.isEnabledFor(logging.INFO):
        return
    LOGGER.info("decision tool=%s route=%s error_class=%s rule=%s operation_id=%s",
                decision.tool, decision.route, decision.error_class, decision.rule,
                decision.operation_id)
    if LOGGER.isEnabledFor(logging.DEBUG):
        for entry in decision.trace:
            LOGGER.debug("  %s", entry)
