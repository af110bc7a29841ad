"""What a decision leaves for engineers and for the person who confirms it: the log record
(one JSON line, the contract's sensitive fields masked) and the draft of a held write.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from callgate_rules.documents.model import Contract
from callgate_rules.integrations import provenance
from callgate_rules.integrations.decision_log import replay_record
from callgate_rules.integrations.provenance.drafts import origin_warnings
from callgate_rules.pipeline.decision import Decision, Deferred, ShadowVerdict
from callgate_rules.taxonomy import ErrorClass, Route

if TYPE_CHECKING:  # a type only: parse reads validate, which reads MASK from here
    from callgate_rules.pipeline import parse


def log_record(
    decided_at: float, request_id: str | None, contract: Contract | None,
    call: parse.ParsedCall | None, versions: Mapping[str, str], route: Route,
    error_class: ErrorClass | None, rule: str | None, detail: str,
    actor: Mapping[str, Any], arguments: dict[str, Any] | None,
    shadow: tuple[ShadowVerdict, ...], elapsed: float, extra: Mapping[str, Any] | None,
    session: Mapping[str, Any] | None = None, variables: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The decision's log record: one JSON line for engineers, with the actor summarised
    and the contract's sensitive arguments masked, wherever they appear in it; for a call
    that parsed, the inputs ``callgate replay`` decides it again with (``replay``)."""
    record: dict[str, Any] = {
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
        "arguments": arguments,
        "shadow": [v.__dict__ for v in shadow],
        "elapsed_ms": round(elapsed * 1000, 3),
    }
    if extra and "evaluation_error" in extra:
        record["evaluation_error"] = extra["evaluation_error"]
    if call is not None and call.note:
        record["note"] = call.note
    masking = None
    if contract is not None and contract.mask and arguments is not None:
        masking = Masking(contract, arguments)
        record.update({key: masking(record[key]) for key in _MAY_ECHO if key in record})
        record["arguments"] = masking.arguments
    if contract is not None and arguments is not None and variables is not None:
        record["replay"] = _replay_inputs(contract, arguments, masking, actor, session,
                                          variables, route, error_class, rule)
    return record


def executed_log(counted: Mapping[str, Any],
                 checked: Mapping[str, Any] | Deferred[Mapping[str, Any]],
                 arguments: Mapping[str, Any] | None, contract: Contract,
                 operation: str | None, detail: str, receipt_state: str | None, result: Any,
                 review_id: str | None, elapsed_ms: float) -> dict[str, Any]:
    """The log record of an executed call: the check's (``checked``, read here and not
    through the decision's field, whose first read holds the lock this runs under), with
    what execution did (``counted``: what the counters read, worked out when it ended),
    masked like the arguments it may echo."""
    masking = Masking(contract, arguments or {})
    return {
        **(checked() if isinstance(checked, Deferred) else checked),
        "route": counted["route"],
        "error_class": counted["error_class"],
        "detail": masking(detail),
        "operation_id": operation,
        "receipt_state": receipt_state,
        # the destination's own answer, never the model's retelling; masked like the
        # arguments it may echo
        "result": masking(result),
        "retries": counted["retries"],
        "reconciled": counted["reconciled"],
        "unknown_outcome": counted["unknown_outcome"],
        "review_id": review_id,
        "elapsed_ms": elapsed_ms,
    }


def counted(decision: Decision) -> Mapping[str, Any]:
    """What ``decision_log.count`` reads of a decision's log: for an executed call whose
    log nobody has read yet, the few fields worked out when it ended, so that counting does
    not build the whole record; else the log itself."""
    log = decision.__dict__.get("log")
    if type(log) is Deferred and log.func is executed_log:
        facts: Mapping[str, Any] = log.args[0]
        return facts
    return decision.log


def _replay_inputs(contract: Contract, arguments: Mapping[str, Any], masking: Masking | None,
                   actor: Mapping[str, Any], session: Mapping[str, Any] | None,
                   variables: Mapping[str, Any], route: Route, error_class: ErrorClass | None,
                   rule: str | None) -> dict[str, Any]:
    """What the decision read (``decision_log.ReplayInputs``), masked as the arguments
    are: the records looked up may echo a sensitive argument, so they are masked like any
    other text of the record."""
    now = variables.get("now")
    looked_up = {lookup.name: (lookup.collection, variables[lookup.name])
                 for lookup in contract.lookups if lookup.name in variables}
    if error_class == ErrorClass.NOT_FOUND and rule is not None:
        for lookup in contract.lookups:  # the look-up that found nothing: asked, none found
            if rule == f"{contract.name}/lookup.{lookup.name}":
                looked_up[lookup.name] = (lookup.collection, [])
    if masking is not None and masking.may_be_in([found for _, found in looked_up.values()]):
        looked_up = {name: (collection, masking(found))
                     for name, (collection, found) in looked_up.items()}
    origins = variables.get("origins")  # its parts quote the arguments' texts
    if origins is not None and masking is not None and masking.may_be_in(origins):
        origins = masking(origins)
    return replay_record(
        now=now.isoformat() if isinstance(now, datetime) else None, actor=actor,
        session=session or {}, records=looked_up, provenance=variables.get("provenance"),
        masked=tuple(".".join(path) for path in contract.mask if _at(arguments, path))
        if contract.mask else (),
        decided=(str(route), str(error_class) if error_class else None, rule),
        origins=origins, reads=variables.get("reads"))


# What in a log record may repeat an argument's value: a check's detail quotes it, a rule's
# verdict renders it, a destination's answer echoes it.
_MAY_ECHO = ("detail", "shadow", "evaluation_error", "result", "note")


class Masking:
    """The contract's sensitive arguments hidden: at their paths (``arguments``), and as
    values inside anything else a log or a review item may carry (``masking(value)``)."""

    def __init__(self, contract: Contract, arguments: Mapping[str, Any]) -> None:
        self.arguments = mask(arguments, contract.mask)
        secrets: set[str] = set()
        for path in contract.mask:
            for value in _at(arguments, path):
                secrets.update(_texts_of(value))
        # Longest first, so that a secret inside another is not left half shown.
        self.secrets = sorted((s for s in secrets if len(s) >= MIN_MASKED), key=len,
                              reverse=True)

    def may_be_in(self, value: Any) -> bool:
        """Could ``value`` hold a masked text? One search of its JSON text, much cheaper
        than masking it; True whenever a secret is written otherwise in JSON."""
        if not self.secrets:
            return False
        text = _COMPACT.encode(value)
        return any(secret in text or not _written_as_is(secret) for secret in self.secrets)

    def __call__(self, value: Any) -> Any:
        if not self.secrets:
            return value
        if isinstance(value, str):
            for secret in self.secrets:
                value = value.replace(secret, MASK)
            return value
        if isinstance(value, Mapping):
            return {key: self(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self(item) for item in value]
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and str(value) in self.secrets:
            return MASK
        return value


def _written_as_is(text: str) -> bool:
    """Does JSON (``ensure_ascii=False``) write ``text`` unchanged inside its quotes?"""
    return '"' not in text and "\\" not in text and text.isprintable()


# A masked value shorter than this is not looked for inside other text ("a", "1" would
# blank out half a log line and hide nothing).
MIN_MASKED = 4


def _at(node: Any, path: tuple[str, ...]) -> list[Any]:
    """The values at ``path`` (a dotted field path; a list on the way means each item)."""
    if isinstance(node, list):
        return [value for item in node for value in _at(item, path)]
    if not path:
        return [node]
    if isinstance(node, Mapping) and path[0] in node:
        return _at(node[path[0]], path[1:])
    return []


def _texts_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _texts_of(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _texts_of(item)]
    return []


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
    elif isinstance(node[head], list):  # a list on the way: each of its items
        node[head] = [_masked_item(item, rest) for item in node[head]]


def _masked_item(item: Any, path: tuple[str, ...]) -> Any:
    if isinstance(item, dict):
        copied = dict(item)
        _mask_path(copied, path)
        return copied
    return item


def draft(contract: Contract, variables: Mapping[str, Any]) -> str:
    """What the person confirms: the summary, then every argument as it will be sent."""
    summary = contract.confirmation.summary.render(variables) \
        if contract.confirmation.summary else f"Run {contract.name}"
    lines = [summary + ":"]
    for key, value in variables.get("args", {}).items():
        lines.append(f"  {key}: {value if isinstance(value, str) else compact(value)}")
    # Only the values whose origin a rule of this contract cares about get a warning: what
    # ``origins`` knows where a rule reads it, else what ``provenance`` does.
    references = [path for rule in contract.rules for path in rule.expression.references]
    warned = origin_warnings(references, variables.get("origins"))
    lines.extend(line for found in warned.values() for line in found)
    watched = {".".join(("args", *path[1:])) for path in references
               if path[0] == "provenance"}
    sources = dict(provenance.flatten(variables.get("provenance", {})))
    for path, found in sources.items():
        if path not in watched or path in warned:
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
    text = _COMPACT.encode(value)
    return text if len(text) <= 2000 else text[:1997] + "..."


# ``json.dumps`` with options makes an encoder per call; one made once encodes the same
# (``compact``, ``Masking.may_be_in``).
_COMPACT = json.JSONEncoder(ensure_ascii=False, default=str)
