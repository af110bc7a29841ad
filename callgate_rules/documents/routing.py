"""The RoutingTable compiled: routes over the taxonomy's defaults, messages, budgets, limits.

A gate without a RoutingTable gets ``build_routing({}, None)``: every default at once. The
durations every document kind writes are read by ``durations.parse_duration``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate_rules.documents.durations import parse_duration
from callgate_rules.documents.model import (
    Budgets,
    DocumentRef,
    InputLimits,
    IntentRouting,
    LimitPath,
    MessagePair,
    Routing,
    Template,
)
from callgate_rules.provenance import Thresholds
from callgate_rules.taxonomy import DEFAULT_ROUTE, ErrorClass, Route


def build_routing(spec: Mapping[str, Any], ref: DocumentRef | None) -> Routing:
    """A RoutingTable's ``spec`` (already valid against its schema) as ``Routing``."""
    routes = dict(DEFAULT_ROUTE)
    routes.update({ErrorClass(k): Route(v) for k, v in spec.get("routes", {}).items()})
    messages = {ErrorClass(k): _message_pair(v) for k, v in spec.get("messages", {}).items()}
    on_limit = spec.get("on_limit", {"path": "hand_over"})
    receipts = spec.get("receipts", {})
    return Routing(
        routes=routes,
        messages=messages,
        budgets=_budgets(spec.get("budgets", {})),
        on_limit=LimitPath(on_limit["path"]),
        on_limit_messages=_message_pair(on_limit),
        input_limits=InputLimits(**spec.get("input", {})),
        confirmation_expires_seconds=parse_duration(
            spec.get("confirmation", {}).get("expires", "15m")),
        lease_seconds=parse_duration(receipts.get("lease", "60s")),
        retention_seconds=parse_duration(receipts.get("retention", "720h")),
        document=ref,
        provenance=_thresholds(spec.get("provenance", {})),
        intent=None if "intent" not in spec else IntentRouting(
            outside=spec["intent"].get("outside", "await_confirmation"),
            required=frozenset(spec["intent"].get("required", ()))),
    )


def _message_pair(spec: Mapping[str, Any]) -> MessagePair:
    return MessagePair(
        Template.of(spec["agent"]) if "agent" in spec else None,
        Template.of(spec["user"]) if "user" in spec else None,
    )


def _budgets(spec: Mapping[str, Any]) -> Budgets:
    backoff = spec.get("backoff", {})
    defaults = Budgets()
    return Budgets(
        regenerations_per_call=spec.get(
            "regenerations_per_call", defaults.regenerations_per_call),
        retries_per_call=spec.get("retries_per_call", defaults.retries_per_call),
        backoff_base_seconds=parse_duration(backoff.get("base", defaults.backoff_base_seconds)),
        backoff_max_seconds=parse_duration(backoff.get("max", defaults.backoff_max_seconds)),
        backoff_multiplier=float(backoff.get("multiplier", defaults.backoff_multiplier)),
        call_deadline_seconds=parse_duration(
            spec.get("call_deadline", defaults.call_deadline_seconds)),
        calls_per_tool_per_run=spec.get(
            "calls_per_tool_per_run", defaults.calls_per_tool_per_run),
        failures_per_run=spec.get("failures_per_run", defaults.failures_per_run),
        run_deadline_seconds=parse_duration(
            spec.get("run_deadline", defaults.run_deadline_seconds)),
    )


def _thresholds(spec: Mapping[str, Any]) -> Thresholds:
    defaults = Thresholds()
    common = spec.get("common_values")
    return Thresholds(
        min_string_length=spec.get("min_string_length", defaults.min_string_length),
        min_number_digits=spec.get("min_number_digits", defaults.min_number_digits),
        common_values=frozenset(v.casefold() for v in common) if common is not None
        else defaults.common_values,
    )
