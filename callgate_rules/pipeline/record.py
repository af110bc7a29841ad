"""What a decision leaves for engineers and for the person who confirms it: the log record
(one JSON line, the contract's sensitive fields masked) and the draft of a held write.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from callgate_rules.documents.model import Contract
from callgate_rules.integrations import provenance
from callgate_rules.pipeline import parse
from callgate_rules.pipeline.decision import ShadowVerdict
from callgate_rules.taxonomy import ErrorClass, Route


def log_record(
    decided_at: float, request_id: str | None, contract: Contract | None,
    call: parse.ParsedCall | None, versions: Mapping[str, str], route: Route,
    error_class: ErrorClass | None, rule: str | None, detail: str,
    actor: Mapping[str, Any], arguments: dict[str, Any] | None,
    shadow: tuple[ShadowVerdict, ...], elapsed: float, extra: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The decision's log record: one JSON line for engineers, with the actor summarised
    and the contract's sensitive arguments masked."""
    record = {
        "ts": datetime.fromtimestamp(decided_at, UTC).isoformat(),
        "request_id": request_id or uuid.uuid4().hex,
        "tool": contract.name if contract else (extra or {}).get("proposed_tool"),
        "contract_version": contract.version if contract else None,
        "versions": dict(versions),
        "route": str(route),
        "error_class": str(error_class) if error_class else None,
        "rule": rule,
        "detail": detail,
        "actor": _actor_summary(actor),
        "arguments": mask(arguments, contract.mask) if arguments is not None and contract
        else None,
        "shadow": [v.__dict__ for v in shadow],
        "elapsed_ms": round(elapsed * 1000, 3),
    }
    if extra and "evaluation_error" in extra:
        record["evaluation_error"] = extra["evaluation_error"]
    if call is not None and call.note:
        record["note"] = call.note
    return record


def _actor_summary(actor: Mapping[str, Any]) -> dict[str, Any]:
    """Identify the actor in logs without copying everything the host knows about them."""
    return {k: actor[k] for k in ("id", "tenant", "role", "roles") if k in actor}


MASK = "***"


def mask(arguments: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    """A copy of ``arguments`` with the contract's sensitive fields replaced by ``***``."""
    masked: dict[str, Any] = dict(arguments)
    for path in paths:
        _mask_path(masked, path)
    return masked


def _mask_path(node: dict[str, Any], path: tuple[str, ...]) -> None:
    head, rest = path[0], path[1:]
    if head not in node:
        return
    if not rest:
        node[head] = MASK
    elif isinstance(node[head], dict):
        node[head] = dict(node[head])
        _mask_path(node[head], rest)


def draft(contract: Contract, variables: Mapping[str, Any]) -> str:
    """What the person confirms: the summary, then every argument as it will be sent."""
    summary = contract.confirmation.summary.render(variables) \
        if contract.confirmation.summary else f"Run {contract.name}"
    lines = [summary + ":"]
    for key, value in variables.get("args", {}).items():
        lines.append(f"  {key}: {value if isinstance(value, str) else compact(value)}")
    # Only the values whose origin a rule of this contract cares about get a warning.
    watched = {".".join(("args", *path[1:])) for rule in contract.rules
               for path in rule.expression.references if path[0] == "provenance"}
    sources = dict(provenance.flatten(variables.get("provenance", {})))
    for path, found in sources.items():
        if path not in watched:
            continue
        if found and all(s.startswith(provenance.TOOL) for s in found):
            tools = ", ".join(s.split(":", 1)[1] for s in found if ":" in s) or "a tool"
            lines.append(f"WARNING: {path.removeprefix('args.')} was not given by the user: "
                         f"it appears only in content the assistant read ({tools}). "
                         "Check it before you confirm.")
        elif not found:
            lines.append(f"WARNING: {path.removeprefix('args.')} appears nowhere in the "
                         "conversation or the records: the assistant produced it.")
    return "\n".join(lines)




def compact(value: Any) -> str:
    """A value as short JSON for a message or a draft: at most 2,000 characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 2000 else text[:1997] + "..."
