"""callgate next to the floor and the alternatives: one process, one run, the same decisions.

Three decisions about the reference createFollowUp call — allowed, denied because the ticket
belongs to another tenant, rejected because the due date is in the past — each made by:

- callgate: ``Gate.check`` on the compiled contracts and policies of this repository;
- callgate, all read: the same, then the agent and user messages and the log record read,
  as a host and the decision log writer do (a decision builds them when first read);
- hand-written: one plain Python function doing the same checks (the floor), reading JSON
  with the standard library;
- hand-written, msgspec: the same function reading JSON with msgspec, as callgate does;
- cel-python, interpreted / CompiledRunner: the same CEL rules, taken from the compiled
  contract and policy, evaluated by cel-python (what a naive CEL gate costs);
- cedarpy: the same authorization as a Cedar policy (what a user might pick instead), with
  the whole world loaded once as an entity store; and, as an application would mostly call
  it, with the call's three records handed over with each request;
- regopy: the same authorization as a Rego policy (likewise).

Every contender reads the same OpenAI message. The alternatives parse it (with msgspec, as
callgate does, so that they are timed on their own work) and check the arguments' types and
patterns in Python as the floor does, then look the records up (the naive CEL gate, from
the floor's dicts) or hand them to the engine, which gets the whole world once, before
timing (Cedar as one entity store, Rego as base data): the most favourable set-up for the
engines. Verdicts are compared before anything is timed.

What each engine covers of callgate's checks (suspended actors denied; role; ticket and
assignee of the actor's tenant; ticket not deleted and not closed; assignee in the ticket's
team; due date in the future):

- cel-python: all of them; they are callgate's own CEL rules (for the CompiledRunner with
  ``has(a.b)`` spelled ``("b" in a)``: cel-python 0.5's transpiler gets has() wrong).
- Cedar (cedarpy 4.x): all of them; the due date with the ``datetime`` extension.
- Rego (regopy / rego-cpp): all of them; rego-cpp's ``time.parse_rfc3339_ns`` refuses a
  ``Z`` offset, so the policy spells it ``+00:00`` first.
- Argument types and patterns are checked in Python before the engine for Cedar and Rego
  (neither validates a JSON document against a schema); Cedar and Rego answer allow/deny,
  not callgate's error classes, so for them only allow/deny is compared.

The contenders run interleaved (a different one first in each round) so that drift and
noise hit all alike. Then two scaling tables: decision cost with 1, 10 and 100 business rules
per tool, and load-and-compile time and peak traced memory (tracemalloc) for 10, 100 and
1,000 generated contracts.

Run from the repository root:  python benchmarks/compare_benchmark.py [--quick]
Cedar and Rego come with the bench extra:  pip install -e '.[bench]'
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import celpy
import msgspec
import yaml
from celpy import celtypes

from callgate_rules.documents.compiler import load
from callgate_rules.pipeline.gate import Gate

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the floor lives beside this file
from decision_benchmark import (  # noqa: E402
    DECLARED,
    NOW,
    REPO,
    TICKET_ID,
    USER_ID,
    HandWritten,
    follow_up,
    index_resolvers,
)

TOOL = "createFollowUp"
DECISIONS = {
    "allowed": follow_up(),
    "denied: other tenant": follow_up(ticketId="T-2001"),
    "rejected: past date": follow_up(dueAt="2026-01-01T00:00:00Z"),
}
EXPECTED = {"allowed": "execute", "denied: other tenant": "forbidden",
            "rejected: past date": "invalid_argument"}
Verdict = str  # "execute" or an error class; "deny" where an engine cannot say which


@dataclass
class Contender:
    name: str
    decide: Callable[[str], Verdict]
    classes: bool = True  # gives callgate's error classes, not only allow/deny


# The alternatives' first half: the floor's parsing and argument checks ---------------------


FAST_LOADS = msgspec.json.Decoder().decode  # the JSON reader callgate uses


def read_arguments(text: str) -> Verdict | tuple[dict[str, Any], datetime]:
    """The arguments of the one createFollowUp call in ``text``, checked as the floor checks
    them, with the due date parsed; or the verdict when they fail. JSON is read with
    msgspec, as callgate reads it, so that the engines are timed on their own work.

    The floor's first half, written again rather than shared: a function call more would
    cost the floor about 9%, and the floor must stay as lean as a hand-written check.
    ``check_agreement`` holds the two to the same verdicts."""
    try:
        (call,) = FAST_LOADS(text)["tool_calls"]
        name, args = call["function"]["name"], FAST_LOADS(call["function"]["arguments"])
    except (ValueError, KeyError, TypeError):  # msgspec's DecodeError is a ValueError
        return "malformed"
    if name != TOOL:
        return "unknown_tool"
    if not isinstance(args, dict):
        return "malformed"
    if not args.keys() <= DECLARED:
        return "unexpected_argument"
    ticket_id, assignee_id = args.get("ticketId"), args.get("assigneeId")
    due_at, note = args.get("dueAt"), args.get("note", "")
    if not (isinstance(ticket_id, str) and TICKET_ID.match(ticket_id)
            and isinstance(assignee_id, str) and USER_ID.match(assignee_id)
            and isinstance(due_at, str) and isinstance(note, str) and len(note) <= 500):
        return "invalid_argument"
    try:
        return args, datetime.fromisoformat(due_at)
    except ValueError:
        return "invalid_argument"


# cel-python: callgate's own CEL rules, on cel-python's runners ------------------------------


class NaiveCelGate:
    """The floor's parsing and look-ups, then the tool's access rules (denies first, default
    deny) and its business rules, in callgate's order, on cel-python."""

    def __init__(self, gate: Gate, world: Mapping[str, list[dict[str, Any]]],
                 runner: type[celpy.Runner]) -> None:
        if runner is celpy.CompiledRunner:
            # cel-python 0.5 builds one Lark parser per process, with the tree class of the
            # first Environment made (callgate's, interpreted); CompiledRunner needs its own
            # tree class, which the interpreter accepts too.
            from celpy.celparser import CELParser

            CELParser.CEL_PARSER = None

        def program(source: str) -> celpy.Runner:
            if runner is celpy.CompiledRunner:
                # Its transpiler mishandles has() (an error instead of a bool); on maps,
                # ``"field" in map`` means the same.
                source = HAS_FIELD.sub(r'("\2" in \1)', source)
            environment = celpy.Environment(runner_class=runner)
            return environment.program(environment.compile(source))

        contract = gate.config.contracts[TOOL]
        access = gate.config.policies.rules_for(TOOL)
        self.denies = [program(r.when.source) for r in access if r.effect == "deny"]
        self.allows = [program(r.when.source) for r in access if r.effect == "allow"]
        self.rules = [(program(r.expression.source), str(r.error_class)) for r in contract.rules]
        self.tickets = {t["id"]: t for t in world["tickets"]}
        self.users = {u["id"]: u for u in world["users"]}

    def __call__(self, text: str, actor: Mapping[str, Any], now: datetime) -> Verdict:
        read = read_arguments(text)
        if isinstance(read, str):
            return read
        args, _ = read
        ticket, assignee = self.tickets.get(args["ticketId"]), self.users.get(args["assigneeId"])
        if ticket is None or assignee is None:
            return "not_found"
        activation = {
            "args": celpy.json_to_cel(args), "actor": celpy.json_to_cel(dict(actor)),
            "ticket": celpy.json_to_cel(ticket), "assignee": celpy.json_to_cel(assignee),
            "now": celtypes.TimestampType(now), "tool": celtypes.StringType(TOOL),
        }
        if any(_holds(deny, activation) for deny in self.denies):
            return "forbidden"
        if not any(_holds(allow, activation) for allow in self.allows):
            return "forbidden"
        for rule, error_class in self.rules:
            if not _holds(rule, activation):
                return error_class
        return "execute"


HAS_FIELD = re.compile(r"has\((\w+)\.(\w+)\)")


def _holds(program: celpy.Runner, activation: dict[str, Any]) -> bool:
    """True only for a true result: an evaluation error fails closed, as in callgate."""
    try:
        result = program.evaluate(activation)
    except celpy.CELEvalError:
        return False
    return isinstance(result, celtypes.BoolType) and bool(result)


# Cedar -------------------------------------------------------------------------------------

CEDAR_POLICY = """
forbid (principal, action, resource)
when { principal has suspended && principal.suspended };

permit (principal, action == Action::"createFollowUp", resource is Ticket)
when {
  ["agent", "supervisor"].contains(principal.role) &&
  resource.tenant == principal.tenant &&
  context.assignee.tenant == principal.tenant &&
  !(resource has deleted_at) &&
  resource.status != "closed" &&
  context.assignee.teams.contains(resource.team) &&
  context.dueAt > context.now
};
"""


def cedar_contenders(world: Mapping[str, list[dict[str, Any]]], actor: Mapping[str, Any],
                     now: datetime) -> list[Contender] | str:
    """Cedar with the whole world loaded once as an entity store (the most favourable
    set-up, and the one the targets count), and as an application would mostly use it:
    the records of the call looked up and handed over with each request."""
    try:
        import cedarpy
    except ImportError:
        return "cedarpy is not installed (pip install -e '.[bench]')"
    entities: list[dict[str, Any]] = [
        {"uid": {"type": "Agent", "id": actor["id"]}, "parents": [],
         "attrs": {k: v for k, v in actor.items() if k != "id"}},
        *({"uid": {"type": "Ticket", "id": t["id"]}, "parents": [],
           "attrs": {k: v for k, v in t.items() if k != "id"}} for t in world["tickets"]),
        *({"uid": {"type": "User", "id": u["id"]}, "parents": [],
           "attrs": {k: v for k, v in u.items() if k != "id"}} for u in world["users"]),
    ]
    policies = cedarpy.PolicySet.from_str(CEDAR_POLICY)
    store = cedarpy.Entities.from_json_str(json.dumps(entities))
    principal = {"type": "Agent", "id": actor["id"]}
    action = {"type": "Action", "id": TOOL}
    now_value = {"__extn": {"fn": "datetime", "arg": now.strftime("%Y-%m-%dT%H:%M:%SZ")}}

    def request_for(args: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "principal": principal, "action": action,
            "resource": {"type": "Ticket", "id": args["ticketId"]},
            "context": {"assignee": {"__entity": {"type": "User", "id": args["assigneeId"]}},
                        "dueAt": {"__extn": {"fn": "datetime", "arg": args["dueAt"]}},
                        "now": now_value},
        }

    def decide(text: str) -> Verdict:
        read = read_arguments(text)
        if isinstance(read, str):
            return read
        args, _ = read
        allowed = cedarpy.is_authorized(request_for(args), policies, store).allowed
        return "execute" if allowed else "deny"

    by_uid = {(entity["uid"]["type"], entity["uid"]["id"]): entity for entity in entities}
    agent = by_uid["Agent", actor["id"]]

    def decide_with_records(text: str) -> Verdict:
        read = read_arguments(text)
        if isinstance(read, str):
            return read
        args, _ = read
        ticket = by_uid.get(("Ticket", args["ticketId"]))
        assignee = by_uid.get(("User", args["assigneeId"]))
        if ticket is None or assignee is None:
            return "deny"
        allowed = cedarpy.is_authorized(request_for(args), policies,
                                        [agent, ticket, assignee]).allowed
        return "execute" if allowed else "deny"

    name = f"cedarpy {cedarpy_version()}"
    return [Contender(name, decide, classes=False),
            Contender(f"{name}, records per call", decide_with_records, classes=False)]


def cedarpy_version() -> str:
    from importlib.metadata import version

    return version("cedarpy")


# Rego --------------------------------------------------------------------------------------

REGO_POLICY = """
package callgate

import rego.v1

default allow := false

allow if {
	not deny
	input.actor.role in {"agent", "supervisor"}
	ticket := data.tickets[input.args.ticketId]
	assignee := data.users[input.args.assigneeId]
	ticket.tenant == input.actor.tenant
	assignee.tenant == input.actor.tenant
	not ticket.deleted_at
	ticket.status != "closed"
	ticket.team in assignee.teams
	rfc3339_ns(input.args.dueAt) > rfc3339_ns(input.now)
}

deny if input.actor.suspended == true

# rego-cpp's time.parse_rfc3339_ns refuses a "Z" offset; spell it +00:00.
rfc3339_ns(text) := time.parse_rfc3339_ns(concat("", [trim_suffix(text, "Z"), "+00:00"])) if {
	endswith(text, "Z")
}

rfc3339_ns(text) := time.parse_rfc3339_ns(text) if not endswith(text, "Z")
"""


def rego_contender(world: Mapping[str, list[dict[str, Any]]], actor: Mapping[str, Any],
                   now: datetime) -> Contender | str:
    try:
        import regopy  # type: ignore[import-untyped]
    except ImportError:
        return "regopy is not installed (pip install -e '.[bench]')"
    builder = regopy.Interpreter()
    builder.add_data({"tickets": {t["id"]: t for t in world["tickets"]},
                      "users": {u["id"]: u for u in world["users"]}})
    builder.add_module("callgate.rego", REGO_POLICY)
    bundle = builder.build("allow = data.callgate.allow", ["callgate/allow"])
    interpreter = regopy.Interpreter()
    now_text = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    actor_input = dict(actor)

    def decide(text: str) -> Verdict:
        read = read_arguments(text)
        if isinstance(read, str):
            return read
        args, _ = read
        interpreter.set_input(regopy.Input({"actor": actor_input, "args": args, "now": now_text}))
        output = interpreter.query_bundle_entrypoint(bundle, "callgate/allow")
        allowed = bool(output.results) and output.results[0].expressions == [True]
        return "execute" if allowed else "deny"

    from importlib.metadata import version

    return Contender(f"regopy {version('regopy')}", decide, classes=False)


# Measuring -------------------------------------------------------------------------------------


BLOCK_SECONDS = 0.005  # each block of one contender's calls lasts about this long


def block_sizes(contenders: list[Contender]) -> dict[str, int]:
    """Calls per block: enough to fill ``BLOCK_SECONDS``, at least 3, at most 100."""
    sizes = {}
    for contender in contenders:
        begin = time.perf_counter()
        for text in DECISIONS.values():
            contender.decide(text)
        each = (time.perf_counter() - begin) / len(DECISIONS)
        sizes[contender.name] = max(3, min(100, int(BLOCK_SECONDS / each)))
    return sizes


def measure(contenders: list[Contender], seconds: float,
            max_rounds: int) -> tuple[dict[tuple[str, str], list[int]], int]:
    """Nanoseconds per decision for every (contender, decision).

    Every round runs one block per (contender, decision), the blocks in a new random order;
    a block is a few consecutive calls, each timed, the first not counted. So the samples are
    steady-state costs (caches warm, as in a gate deciding call after call), and drift and
    noise over the run hit every contender alike."""
    sizes = block_sizes(contenders)
    blocks = [(c, d, text) for c in contenders for d, text in DECISIONS.items()]
    samples: dict[tuple[str, str], list[int]] = {(c.name, d): [] for c, d, _ in blocks}
    clock = time.perf_counter_ns
    shuffle = random.Random(7).shuffle
    gc.collect()
    deadline = time.perf_counter() + seconds
    rounds = 0
    while rounds < max_rounds and time.perf_counter() < deadline:
        shuffle(blocks)
        for contender, decision, text in blocks:
            decide, kept = contender.decide, samples[contender.name, decision]
            decide(text)
            for _ in range(sizes[contender.name]):
                begin = clock()
                decide(text)
                kept.append(clock() - begin)
        rounds += 1
    return samples, rounds


def percentile(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1000.0  # ns → µs


def ratio(value: float) -> str:
    return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"


def check_agreement(contenders: list[Contender]) -> bool:
    """Every contender must reach callgate's verdict (allow/deny for the engines)."""
    agree = True
    print("verdicts (checked before timing):")
    print(f"  {'':<36}" + "".join(f"{d:>24}" for d in DECISIONS))
    for contender in contenders:
        row = []
        for decision, text in DECISIONS.items():
            verdict, expected = contender.decide(text), EXPECTED[decision]
            if not contender.classes:
                expected = "execute" if expected == "execute" else "deny"
            if verdict != expected:
                agree = False
                verdict += " (DISAGREES)"
            row.append(verdict)
        print(f"  {contender.name:<36}" + "".join(f"{v:>24}" for v in row))
    return agree


def report(contenders: list[Contender], samples: dict[tuple[str, str], list[int]]) -> None:
    for decision in DECISIONS:
        print(f"\n{decision} (verdict {EXPECTED[decision]})")
        print(f"  {'contender':<36}{'p50 µs':>10}{'p99 µs':>10}{'p50 / callgate':>17}"
              f"{'p99 / callgate':>17}")
        base50 = percentile(samples["callgate", decision], 0.50)
        base99 = percentile(samples["callgate", decision], 0.99)
        for contender in contenders:
            values = samples[contender.name, decision]
            p50, p99 = percentile(values, 0.50), percentile(values, 0.99)
            print(f"  {contender.name:<36}{p50:>10.1f}{p99:>10.1f}{ratio(p50 / base50):>17}"
                  f"{ratio(p99 / base99):>17}")


def targets(contenders: list[Contender], samples: dict[tuple[str, str], list[int]]) -> None:
    def p50(name: str, decision: str) -> float:
        return percentile(samples[name, decision], 0.50)

    names = {c.name for c in contenders}
    engines = [c.name for c in contenders if c.name.startswith(("cedarpy", "regopy"))
               and not c.name.endswith("records per call")]
    print("\ntargets (p50 ratios for the three decisions, in the order above)")

    def line(text: str, values: list[float], met: list[bool]) -> None:
        shown = ", ".join(ratio(v) for v in values)
        verdict = "met" if all(met) else "NOT MET" if not any(met) else \
            f"met for {sum(met)} of {len(met)}"
        print(f"  {text:<52}{shown:<24}{verdict}")

    floor = [p50("callgate", d) / p50("hand-written", d) for d in DECISIONS]
    line("callgate at most 8x the hand-written floor", floor, [r <= 8 for r in floor])
    if "hand-written, msgspec" in names:
        fast = [p50("callgate", d) / p50("hand-written, msgspec", d) for d in DECISIONS]
        line("  the same, the floor reading JSON with msgspec", fast, [r <= 8 for r in fast])
    if engines:
        fastest = [min(p50(e, d) for e in engines) / p50("callgate", d) for d in DECISIONS]
        line("at least 5x faster than the fastest of Cedar/Rego", fastest,
             [r >= 5 for r in fastest])
    else:
        print("  Cedar/Rego: neither installed, target not measured")
    if "cel-python, interpreted" in names:
        cel = [p50("cel-python, interpreted", d) / p50("callgate", d) for d in DECISIONS]
        line("at least 20x faster than cel-python's interpreter", cel, [r >= 20 for r in cel])


# Scaling: rules per tool --------------------------------------------------------------------

RULE_SHAPES = (  # every one holds for the reference call, so every rule is evaluated
    'ticket.status != "archived-{i}"',
    "!has(ticket.locked_{i})",
    "size(args.ticketId) < {length}",
    "ticket.team in assignee.teams || args.assigneeId == \"U-{i}\"",
)


def scaled_contract(rules: int) -> str:
    listed = "".join(
        f"""    - name: rule-{i}
      expression: '{RULE_SHAPES[i % len(RULE_SHAPES)].format(i=i, length=100 + i)}'
      error_class: conflict
      message: Rule {i} does not hold for {{args.ticketId}}.
""" for i in range(rules))
    contract = (REPO / "contracts" / "createFollowUp.yaml").read_text("utf-8")
    head = contract.split("  rules:\n", 1)[0].replace(
        "name: createFollowUp", f"name: followUp{rules}")
    tail = "  verify:\n" + contract.split("  verify:\n", 1)[1]  # the rest, as it is
    return f"{head}  rules:\n{listed}{tail}"


def scaled_policy(tools: list[str]) -> str:
    policy = yaml.safe_load((REPO / "policies" / "access.yaml").read_text("utf-8"))
    for rule in policy["spec"]["rules"]:
        if TOOL in rule["tools"]:
            rule["tools"] = [*rule["tools"], *tools]
    return yaml.safe_dump(policy, sort_keys=False)


def rules_scaling(world: Mapping[str, list[dict[str, Any]]], actor: Mapping[str, Any],
                  seconds: float, directory: Path) -> None:
    counts = (1, 10, 100)
    (directory / "contracts").mkdir(parents=True)
    (directory / "policies").mkdir()
    for count in counts:
        (directory / "contracts" / f"followUp{count}.yaml").write_text(scaled_contract(count))
    (directory / "policies" / "access.yaml").write_text(
        scaled_policy([f"followUp{count}" for count in counts]))
    shutil.copy(REPO / "policies" / "routing.yaml", directory / "policies" / "routing.yaml")
    gate = Gate.from_paths(directory / "contracts", directory / "policies",
                           resolvers=index_resolvers(world))
    calls = {count: DECISIONS["allowed"].replace(TOOL, f"followUp{count}") for count in counts}
    for count, call in calls.items():
        decision = gate.check(call, actor=actor, now=NOW)
        assert decision.error_class is None, (count, decision.agent_message)
        assert sum(1 for e in decision.trace if e.subject.startswith("rule ")) == count
    samples: dict[int, list[int]] = {count: [] for count in counts}
    clock = time.perf_counter_ns
    for _ in range(200):
        for call in calls.values():
            gate.check(call, actor=actor, now=NOW)
    gc.collect()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for count, call in calls.items():
            begin = clock()
            gate.check(call, actor=actor, now=NOW)
            samples[count].append(clock() - begin)
    p50 = {count: percentile(values, 0.50) for count, values in samples.items()}
    print("\ndecision cost by business rules per tool (allowed call: every rule evaluated)")
    print(f"  {'rules':>6}{'p50 µs':>10}{'p99 µs':>10}{'µs per added rule':>20}")
    previous: int | None = None
    for count in counts:
        added = "" if previous is None else \
            f"{(p50[count] - p50[previous]) / (count - previous):>20.2f}"
        print(f"  {count:>6}{p50[count]:>10.1f}{percentile(samples[count], 0.99):>10.1f}{added}")
        previous = count


# Scaling: contracts loaded ------------------------------------------------------------------

GENERATED_CONTRACT = """apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: followUp{i}
  version: "1.0.{i}"
  owner: team{i}@example.com
  description: Create follow-up task {i} on a support ticket.
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [ticketId, assigneeId, dueAt]
    properties:
      ticketId: {{type: string, pattern: "^T-[0-9]{{3,8}}$"}}
      assigneeId: {{type: string, pattern: "^U-[0-9]{{1,8}}$"}}
      dueAt: {{type: string, format: date-time}}
      note: {{type: string, maxLength: {length}}}
  lookups:
    - {{name: ticket, collection: tickets, key: args.ticketId}}
    - {{name: assignee, collection: users, key: args.assigneeId}}
  rules:
    - name: ticket-not-deleted
      expression: "!has(ticket.deleted_at)"
      error_class: not_found
      message: No ticket {{args.ticketId}} is available to you.
    - name: ticket-not-archived
      expression: ticket.status != "archived-{i}"
      error_class: conflict
      message: Ticket {{args.ticketId}} is archived.
    - name: assignee-in-team
      expression: ticket.team in assignee.teams
      error_class: invalid_argument
      message: "{{args.assigneeId}} is not in the ticket's team."
    - name: due-within-limit
      expression: timestamp(args.dueAt) < now + duration("{hours}h")
      error_class: invalid_argument
      message: dueAt {{args.dueAt}} is too far away.
  examples:
    - arguments: {{ticketId: T-1001, assigneeId: U-7, dueAt: "2026-12-15T09:00:00Z"}}
"""

GENERATED_POLICY_HEAD = """apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: generated-access, version: "1.0.0", owner: security@example.com,
           description: One allow rule per generated tool.}
spec:
  rules:
    - name: suspended-actors
      effect: deny
      tools: ["*"]
      when: has(actor.suspended) && actor.suspended
"""

GENERATED_POLICY_RULE = """    - name: follow-up-{i}
      effect: allow
      tools: [followUp{i}]
      when: >-
        actor.role in ["agent", "supervisor"] && ticket.tenant == actor.tenant
        && assignee.tenant == actor.tenant && args.ticketId != "T-{i:06d}"
"""


def write_contracts(count: int, directory: Path) -> None:
    """``count`` distinct contracts (two rules of each are shared text, as in real sets, two
    are the contract's own) and an access policy with an allow rule for each."""
    directory.mkdir(parents=True)
    for i in range(count):
        (directory / f"followUp{i}.yaml").write_text(
            GENERATED_CONTRACT.format(i=i, length=500 + i, hours=24 * 30 + i))
    (directory / "access.yaml").write_text(
        GENERATED_POLICY_HEAD + "".join(GENERATED_POLICY_RULE.format(i=i)
                                        for i in range(count)))


def load_scaling(counts: tuple[int, ...], directory: Path) -> None:
    print("\nload and compile (YAML to a GateConfig), generated contracts")
    print(f"  {'contracts':>10}{'seconds':>10}{'ms per contract':>17}{'peak MiB':>10}")
    for count in counts:
        where = directory / f"contracts-{count}"
        write_contracts(count, where)
        gc.collect()
        begin = time.perf_counter()
        config = load([where])
        elapsed = time.perf_counter() - begin
        assert len(config.contracts) == count
        del config
        gc.collect()
        tracemalloc.start()  # a second load, traced: tracing slows it down, so not timed
        load([where])
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"  {count:>10,}{elapsed:>10.2f}{elapsed / count * 1000:>17.1f}"
              f"{peak / 2**20:>10.1f}")


# Main ------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="about 20 s: shorter timing, contracts up to 100 only")
    parser.add_argument("--seconds", type=float, default=None,
                        help="time budget of the interleaved decisions (default 35, quick 7)")
    parser.add_argument("--max-rounds", type=int, default=1_000_000)
    options = parser.parse_args()
    seconds = options.seconds or (7.0 if options.quick else 35.0)

    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text("utf-8"))
    actor = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text("utf-8"))
    gate = Gate.from_paths(REPO / "contracts", REPO / "policies",
                           resolvers=index_resolvers(world))
    floor = HandWritten(world)
    fast_floor = HandWritten(world, loads=FAST_LOADS)
    interpreted = NaiveCelGate(gate, world, celpy.InterpretedRunner)
    compiled = NaiveCelGate(gate, world, celpy.CompiledRunner)

    def by_callgate(text: str) -> Verdict:
        decision = gate.check(text, actor=actor, now=NOW)
        return str(decision.error_class or "execute")

    def by_callgate_read(text: str) -> Verdict:
        decision = gate.check(text, actor=actor, now=NOW)
        # reading them is what is measured: messages, trace and log are built when read
        _ = decision.agent_message, decision.user_message, decision.log
        return str(decision.error_class or "execute")

    contenders = [
        Contender("callgate", by_callgate),
        Contender("callgate, all read", by_callgate_read),
        Contender("hand-written", lambda text: floor(text, actor, NOW)),
        Contender("hand-written, msgspec", lambda text: fast_floor(text, actor, NOW)),
        Contender("cel-python, interpreted", lambda text: interpreted(text, actor, NOW)),
        Contender("cel-python, CompiledRunner", lambda text: compiled(text, actor, NOW)),
    ]
    for make in (cedar_contenders, rego_contender):
        made = make(world, actor, NOW)
        if isinstance(made, str):
            print(f"skipped: {made}")
        else:
            contenders.extend(made if isinstance(made, list) else [made])

    print(f"Python {sys.version.split()[0]}; decisions about {TOOL} as of {NOW.isoformat()}")
    if not check_agreement(contenders):
        print("the contenders disagree: nothing timed", file=sys.stderr)
        return 1
    for _ in range(30 if options.quick else 100):  # warm-up
        for contender in contenders:
            for text in DECISIONS.values():
                contender.decide(text)
    samples, rounds = measure(contenders, seconds, options.max_rounds)
    print(f"\n{rounds} rounds in {seconds:g} s: every round, {len(contenders)} contenders x "
          f"{len(DECISIONS)} decisions in a random order, each a block of consecutive calls")
    report(contenders, samples)
    targets(contenders, samples)

    with tempfile.TemporaryDirectory(prefix="callgate-bench-") as scratch:
        rules_scaling(world, actor, 3.0 if options.quick else 8.0, Path(scratch) / "rules")
        load_scaling((10, 100) if options.quick else (10, 100, 1000), Path(scratch))
    if options.quick:
        print("  (--quick: 1,000 contracts not loaded)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
