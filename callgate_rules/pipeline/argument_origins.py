"""Step 3's reading of where each argument value came from (``provenance``, and
``origins`` with the run's ``reads`` and their labels), for the plans of tools whose rules
read them: each with a trace entry, from the conversation and the records looked up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate_rules import provenance
from callgate_rules.documents.model import Contract
from callgate_rules.pipeline.decision import RawTraceEntry
from callgate_rules.provenance.labels import record_labels
from callgate_rules.provenance.origins import Labeller, trace_origins


def traced_sources(arguments: Any, conversation: provenance.Conversation, contract: Contract,
                   variables: Mapping[str, Any], thresholds: provenance.Thresholds,
                   trace: list[RawTraceEntry]) -> Any:
    """Where each argument value came from, with a trace entry per value (and why a
    conversation could not be read, or what of it was skipped)."""
    if conversation.unreadable:
        trace.append(("validate", "conversation", "unreadable", conversation.unreadable))
    for note in conversation.notes:
        trace.append(("validate", "conversation", "note", note))
    sources = provenance.trace_sources(arguments, conversation,
                                       looked_up(contract, variables), thresholds)
    for path, found in provenance.flatten(sources):
        trace.append(("validate", f"provenance {path}", ", ".join(found) or "nowhere"))
    return sources


def traced_origins(arguments: Any, conversation: provenance.Conversation | None,
                   contract: Contract, variables: dict[str, Any],
                   thresholds: provenance.Thresholds, labeller: Labeller) -> None:
    """The ``origins`` of each argument value and the run's ``reads``, with their labels
    (without a conversation: unknown, but for the labels of the records looked up)."""
    variables["origins"], variables["reads"] = trace_origins(
        arguments, conversation, looked_up(contract, variables),
        lambda value: provenance.is_evidence(value, thresholds), labeller,
        record_labels(contract.lookups, variables))


def looked_up(contract: Contract, variables: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The records looked up for this call, flattened: evidence of where a value came from."""
    records: list[Mapping[str, Any]] = []
    for lookup in contract.lookups:
        value = variables.get(lookup.name)
        if isinstance(value, Mapping):
            records.append(value)
        elif isinstance(value, list):
            records.extend(v for v in value if isinstance(v, Mapping))
    return records
