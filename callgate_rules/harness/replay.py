"""``callgate replay``: every logged decision decided again against another configuration.

A process owner changes a policy and wants to know what the change would have done to last
week's traffic before shipping it. Each decision log line of a call that parsed carries the
inputs the decision read (``decision_log.ReplayInputs``): the actor and session,
the decision time, the records each look-up found, the arguments' provenance (and, for a
tool whose rules read them, their origins and the run's reads), and what steps 1–4
decided. Replay hands the same call to a gate compiled from the new documents, with
resolvers that answer from the recorded records and a conversation that answers with the
recorded provenance and origins, and compares steps 1–4's outcome (route, error class,
deciding rule).
Nothing is executed.

What replay cannot decide again, it says, per line, instead of guessing:

- a masked argument (``mask:``) is ``***`` in the log: when a rule or a look-up of the new
  configuration reads it, or the new decision rejects the arguments' schema, the line is
  *not re-decided* (the real value might decide otherwise);
- a look-up of a collection nothing was recorded for (a look-up the configuration at the
  time did not have, skipped, or never reached) cannot be answered;
- lines without recorded inputs (a confirmation's own answer, a call refused before its
  arguments were read, a log written before callgate recorded them).

Replayed against a bundle (``bundle``: its digest), every line that records another bundle
(or none: its decision was made from documents in folders) is named as such, line by line
(``OtherBundle``), and decided again all the same: what the given bundle would have decided
is the question replay answers; the note says the line's own decision came from elsewhere.

The output is deterministic: lines are read in order, groups and totals sorted, so the same
log and configuration give byte-identical output.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from callgate_rules.decision_log import ReplayInputs
from callgate_rules.documents.model import GateConfig
from callgate_rules.errors import InputError
from callgate_rules.harness.world import CollectionResolver
from callgate_rules.pipeline.authorize import ToolRules
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.validate import Record, Resolver
from callgate_rules.provenance import RecordedConversation
from callgate_rules.taxonomy import ErrorClass


@dataclass(frozen=True, order=True)
class Outcome:
    """Steps 1–4's outcome of one call: where it goes, why, and the rule that decided."""

    route: str
    error_class: str | None
    rule: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"route": self.route, "error_class": self.error_class, "rule": self.rule}


@dataclass(frozen=True)
class Change:
    """A logged decision that the new configuration decides otherwise."""

    line: int
    request_id: str
    tool: str
    ts: str
    before: Outcome
    after: Outcome

    def as_dict(self) -> dict[str, Any]:
        return {"status": "changed", "line": self.line, "request_id": self.request_id,
                "tool": self.tool, "ts": self.ts, "before": self.before.as_dict(),
                "after": self.after.as_dict()}


@dataclass(frozen=True)
class NotRedecided:
    """A logged line replay cannot decide again, and why."""

    line: int
    request_id: str | None
    tool: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"status": "not_re_decided", "line": self.line, "request_id": self.request_id,
                "tool": self.tool, "reason": self.reason}


@dataclass(frozen=True)
class OtherBundle:
    """A logged line whose decision was made by another bundle than the one replayed
    against (``bundle``: the digest it records; None: documents from folders)."""

    line: int
    request_id: str | None
    tool: str | None
    bundle: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"status": "other_bundle", "line": self.line, "request_id": self.request_id,
                "tool": self.tool, "bundle": self.bundle}


@dataclass(frozen=True)
class Replay:
    """What replaying a decision log found: every change and every line left undecided;
    against a bundle (``bundle``), every line another bundle made."""

    lines: int
    unchanged: int
    changes: tuple[Change, ...] = ()
    not_redecided: tuple[NotRedecided, ...] = ()
    other_bundles: tuple[OtherBundle, ...] = ()
    bundle: str | None = None

    def groups(self) -> list[tuple[tuple[str, str], list[Change]]]:
        """The changes by (route before, route after), in sorted order."""
        grouped: dict[tuple[str, str], list[Change]] = {}
        for change in self.changes:
            grouped.setdefault((change.before.route, change.after.route), []).append(change)
        return sorted(grouped.items())

    def as_list(self) -> list[dict[str, Any]]:
        """``--format json``: every change, then every line not re-decided, then every line
        another bundle made, each in line order."""
        return [*(c.as_dict() for c in self.changes),
                *(n.as_dict() for n in self.not_redecided),
                *(o.as_dict() for o in self.other_bundles)]

    def lines_of_text(self) -> list[str]:
        """The text report: the changes grouped by route before → after, with the rule
        responsible, then what could not be re-decided, then the totals."""
        out: list[str] = []
        for (before, after), changes in self.groups():
            out.append(f"{before} → {after}: {len(changes)} decision(s)")
            for change in changes:
                out.append(f"  line {change.line}  {change.tool}  {change.request_id}  "
                           f"{change.ts}")
                out.append(f"    {_described(change.before)} → {_described(change.after)}")
        if self.not_redecided:
            out.append(f"not re-decided: {len(self.not_redecided)} line(s)")
            reasons = Counter(n.reason for n in self.not_redecided)
            for reason, count in sorted(reasons.items()):
                lines = [str(n.line) for n in self.not_redecided if n.reason == reason]
                shown = ", ".join(lines[:10]) + (", ..." if len(lines) > 10 else "")
                out.append(f"  {count} × {reason} (line {shown})")
        out.extend(self._other_bundles_text())
        out.append(f"totals: {self.lines} line(s), {self.unchanged} unchanged, "
                   f"{len(self.changes)} changed, {len(self.not_redecided)} not re-decided"
                   + (f", {len(self.other_bundles)} made by another bundle"
                      if self.other_bundles else ""))
        return out

    def _other_bundles_text(self) -> list[str]:
        if not self.other_bundles:
            return []
        out = [f"made by another bundle than {self.bundle}: {len(self.other_bundles)} "
               "line(s), decided again by this one"]
        made_by = Counter(o.bundle or "" for o in self.other_bundles)
        for bundle, count in sorted(made_by.items()):
            lines = [str(o.line) for o in self.other_bundles if (o.bundle or "") == bundle]
            shown = ", ".join(lines[:10]) + (", ..." if len(lines) > 10 else "")
            source = bundle or "no bundle (documents from folders)"
            out.append(f"  {count} × {source} (line {shown})")
        return out


def _described(outcome: Outcome) -> str:
    why = outcome.error_class or "allowed"
    return f"{why} by {outcome.rule}" if outcome.rule else why


def read_log(path: str | Path) -> Iterator[tuple[int, Mapping[str, Any] | None]]:
    """(line number, record) for every non-blank line; None for a line that is not a JSON
    object (a crash cut it short)."""
    try:
        stream = Path(path).open(encoding="utf-8")
    except OSError as error:
        raise InputError(f"{path}: cannot read the decision log: {error.strerror}") from None
    with stream:
        for number, text in enumerate(stream, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
                record = None
            if isinstance(record, dict) and "checkpoint" in record:
                continue  # a signed checkpoint of the log's chain, no decision
            yield number, record if isinstance(record, dict) else None


def replay(records: Iterator[tuple[int, Mapping[str, Any] | None]], config: GateConfig,
           *, advanced: Callable[[int], None] | None = None,
           bundle: str | None = None) -> Replay:
    """Decide every logged line again against ``config``; ``advanced(1)`` after each line
    (a progress bar's ``update``). ``bundle``: the digest of the bundle ``config`` was
    compiled from; each line that records another is named (``OtherBundle``)."""
    gate = Gate(config, secret=b"callgate-replay")
    lines = unchanged = 0
    changes: list[Change] = []
    left: list[NotRedecided] = []
    other: list[OtherBundle] = []
    for number, record in records:
        lines += 1
        if bundle is not None and record is not None and record.get("bundle") != bundle:
            made_by = record.get("bundle")
            other.append(OtherBundle(number, record.get("request_id"), record.get("tool"),
                                     made_by if isinstance(made_by, str) else None))
        outcome = redecide(gate, number, record)
        if isinstance(outcome, NotRedecided):
            left.append(outcome)
        elif outcome is None:
            unchanged += 1
        else:
            changes.append(outcome)
        if advanced is not None:
            advanced(1)
    return Replay(lines, unchanged, tuple(changes), tuple(left), tuple(other), bundle)


def redecide(gate: Gate, line: int,
             record: Mapping[str, Any] | None) -> Change | NotRedecided | None:
    """One line decided again: its change, why it cannot be, or None when unchanged."""
    if record is None:
        return NotRedecided(line, None, None, "not a JSON object (a line cut short?)")
    request_id, tool = record.get("request_id"), record.get("tool")
    if "replay" not in record:
        return NotRedecided(line, request_id, tool, _without_inputs(record))
    try:
        inputs = ReplayInputs.of(record["replay"])
        arguments = record["arguments"]
        if not isinstance(arguments, dict) or not isinstance(tool, str):
            raise ValueError("the line has no call (tool and arguments)")
    except (ValueError, KeyError) as error:
        return NotRedecided(line, request_id, tool, f"its replay inputs are unreadable: {error}")
    masked = _masked_reads(gate.config, tool, inputs.masked)
    if masked:
        return NotRedecided(line, request_id, tool, masked)
    resolvers = RecordedResolvers(inputs)
    gate.resolvers = resolvers
    conversation = (RecordedConversation(
        (), sources=inputs.provenance, origins=inputs.origins, reads=inputs.reads)
        if inputs.provenance is not None or inputs.origins is not None else None)
    try:
        decision = gate.check({"name": tool, "arguments": arguments}, actor=inputs.actor,
                              now=_decision_time(inputs, record), request_id=request_id,
                              session=inputs.session or None, conversation=conversation)
    except Exception as error:  # a line edited by hand (or by an attacker) is one line's problem
        return NotRedecided(line, request_id, tool, "its recorded inputs cannot be decided "
                            f"on ({type(error).__name__}: {str(error)[:200]})")
    if resolvers.unrecorded:
        return NotRedecided(line, request_id, tool, "it looks up "
                            f"{', '.join(sorted(resolvers.unrecorded))}, which no record was "
                            "kept for at the time (a look-up skipped, never reached, or "
                            "matching several records)")
    before = Outcome(inputs.decided.route, inputs.decided.error_class, inputs.decided.rule)
    after = Outcome(str(decision.route),
                    str(decision.error_class) if decision.error_class else None, decision.rule)
    if after == before:
        return None
    if inputs.masked and after.error_class == ErrorClass.INVALID_ARGUMENT:
        return NotRedecided(line, request_id, tool, f"{_paths(inputs.masked)} masked in the "
                            "log, and the new decision rejects the arguments' schema")
    return Change(line, str(request_id), tool, str(record.get("ts", "")), before, after)


def _without_inputs(record: Mapping[str, Any]) -> str:
    if record.get("rule") == "confirmation-token":
        return "a confirmation's own answer (the call it confirmed is its own line)"
    if record.get("arguments") is None:
        return ("the call was refused before its arguments were read (malformed, an "
                "unknown tool or an unexpected field), so no call was recorded")
    return "no replay inputs recorded (a log from before callgate recorded them)"


def _decision_time(inputs: ReplayInputs, record: Mapping[str, Any]) -> datetime | None:
    for text in (inputs.now, record.get("ts")):
        if isinstance(text, str):
            try:
                return datetime.fromisoformat(text)
            except ValueError:
                continue
    return None


def _paths(masked: Sequence[str]) -> str:
    return ", ".join(f"args.{path}" for path in masked) + (" is" if len(masked) == 1
                                                          else " are")


def _masked_reads(config: GateConfig, tool: str, masked: Sequence[str]) -> str | None:
    """Why a masked argument may decide the call under ``config``: the expressions about
    ``tool`` that read it, or None."""
    contract = config.contracts.get(tool)
    if not masked or contract is None:
        return None
    rules = ToolRules.of(config.policies, tool)
    expressions: list[tuple[str, Any]] = [
        *((rule.qualified_name, rule.when) for rule in rules.rules),
        *((f"{tool}/{rule.name}", rule.expression) for rule in contract.rules),
        *((f"look-up {lookup.name}", expression) for lookup in contract.lookups
          for expression in (lookup.key, lookup.when, lookup.visible) if expression)]
    paths = {tuple(("args", *path.split("."))) for path in masked}
    readers = sorted({name for name, expression in expressions
                      if any(reference[:len(path)] == path or path[:len(reference)] == reference
                             for reference in expression.references for path in paths)})
    if not readers:
        return None
    return f"{_paths(masked)} masked in the log, and {', '.join(readers)} read(s) it"


@dataclass
class RecordedResolvers(Mapping[str, Resolver]):
    """The gate's resolvers during replay: each collection answers from the records its
    look-ups found at the time; a collection nothing was recorded for is noted as asked
    for (``unrecorded``) and answers with no record."""

    inputs: ReplayInputs
    unrecorded: set[str] = field(default_factory=set)
    _collections: dict[str, CollectionResolver] = field(default_factory=dict)

    def __post_init__(self) -> None:
        found: dict[str, list[Record]] = {}
        for lookup in self.inputs.records.values():
            if lookup.found is None:
                continue  # skipped by its ``when``: nothing was asked
            # a list (``many: list``, or none found), or the one record found
            records = lookup.found if isinstance(lookup.found, list) else [lookup.found]
            found.setdefault(lookup.collection, []).extend(
                r for r in records if isinstance(r, dict))
        self._collections = {name: CollectionResolver(records) for name, records in found.items()}

    def __getitem__(self, name: str) -> Resolver:
        resolver = self._collections.get(name)
        if resolver is None:
            self.unrecorded.add(name)
            return CollectionResolver([])
        return resolver

    def get(self, name: str, default: Any = None) -> Resolver:
        return self[name]

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._collections)

    def __len__(self) -> int:
        return len(self._collections)
