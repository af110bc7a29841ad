"""Worst-case timings of the gate on hostile input: regular expressions, YAML, numbers.

Each line is one hostile input, what the gate made of it and how long that took (the
median of a few runs) — with the peak memory traced for the YAML files. Nothing here is a
pass/fail test: ``tests/test_hostile_inputs.py`` holds the same inputs to their outcomes and
to limits of seconds; this prints what they cost.

- **regex**: ``^(a+)+$`` on ``"a" * 40 + "!"`` as a JSON Schema ``pattern``, as a
  ``patternProperties`` key and as a CEL ``matches()``; the same shape at growing lengths
  (linear, not exponential); and what one search of an ordinary pattern costs on each
  engine (why plain patterns still go to Python's ``re``). ``--backtracking`` also times
  Python's own ``re`` on the hostile pattern at a few lengths, to show what was avoided.
- **yaml**: an alias bomb (nine levels of ``&a [*a, ...]``), nesting 5,000 deep, a file
  past the byte bound, a flow list past the node bound, a recursive alias.
- **numbers**: ``NaN``, ``Infinity`` and ``1e400`` in an arguments text, and a repeated key.

Run from the repository root:  python benchmarks/hostile_inputs.py [--backtracking]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from callgate_rules import Gate
from callgate_rules.cel.expression import compile_expression
from callgate_rules.documents.compiler import compile_paths
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.regex import compile_pattern

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HOSTILE_PATTERN = "^(a+)+$"
HOSTILE_TEXT = "a" * 40 + "!"


def timed(action: Callable[[], Any], runs: int = 5) -> tuple[float, Any]:
    """The median seconds of ``runs`` calls, and what the last one returned."""
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def show(what: str, seconds: float, outcome: str, memory: int | None = None) -> None:
    peak = f"  peak {memory / 2**20:6.1f} MiB" if memory is not None else ""
    print(f"  {what:<58} {seconds * 1e3:9.2f} ms  {outcome}{peak}")


# Regular expressions ------------------------------------------------------------------------


def hostile_gate(directory: Path) -> Gate:
    """The reference configuration with ``^(a+)+$`` as assigneeId's pattern, and a contract
    whose patternProperties key and CEL rule use it too."""
    contracts, policies = directory / "contracts", directory / "policies"
    contracts.mkdir()
    policies.mkdir()
    for source in (REPO / "contracts").glob("*.yaml"):
        text = source.read_text("utf-8")
        if source.name == "createFollowUp.yaml":
            text = text.replace('pattern: "^U-[0-9]{1,8}$"', f'pattern: "{HOSTILE_PATTERN}"')
        (contracts / source.name).write_text(text, "utf-8")
    (contracts / "tagItem.yaml").write_text(f"""\
apiVersion: callgate/v1
kind: ToolContract
metadata: {{name: tagItem, version: "1.0.0", owner: o@example.com, description: Tag an item.}}
spec:
  effect: read
  arguments:
    type: object
    properties:
      tags:
        type: object
        patternProperties: {{"{HOSTILE_PATTERN}": {{type: string}}}}
        additionalProperties: false
      label: {{type: string}}
  rules:
    - name: label-plain
      expression: '!has(args.label) || !args.label.matches("{HOSTILE_PATTERN}")'
      error_class: invalid_argument
      message: The label is not plain.
  examples: [{{arguments: {{label: x}}}}]
""", "utf-8")
    for source in (REPO / "policies").glob("*.yaml"):
        text = source.read_text("utf-8").replace(
            "\n  rules:\n", "\n  rules:\n    - {name: tag-items, effect: allow, tools: [tagItem], "
            "when: 'true'}\n", 1)
        (policies / source.name).write_text(text, "utf-8")
    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text("utf-8"))
    return Gate.from_paths(contracts, policies, resolvers=WorldResolvers(world))


def regex_section(backtracking: bool) -> None:
    print("regex: RE2 semantics, linear time")
    actor = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text("utf-8"))
    with tempfile.TemporaryDirectory() as directory:
        gate = hostile_gate(Path(directory))

        def decide(arguments: dict[str, Any], tool: str = "createFollowUp") -> str:
            decision = gate.check({"name": tool, "arguments": arguments}, actor=actor, now=NOW)
            return f"{decision.route} ({decision.error_class or '-'})"

        follow_up = {"ticketId": "T-1001", "dueAt": "2026-12-15T09:00:00Z"}
        seconds, outcome = timed(lambda: decide({**follow_up, "assigneeId": HOSTILE_TEXT}))
        show(f"pattern {HOSTILE_PATTERN} on 'a'*40+'!' (decision)", seconds, outcome)
        seconds, outcome = timed(lambda: decide({"tags": {HOSTILE_TEXT: "x"}}, "tagItem"))
        show("patternProperties key 'a'*40+'!' (decision)", seconds, outcome)
        seconds, outcome = timed(lambda: decide({"label": HOSTILE_TEXT}, "tagItem"))
        show("CEL matches() on 'a'*40+'!' (decision)", seconds, outcome)
    search = compile_pattern(HOSTILE_PATTERN).search
    for length in (1_000, 8_000, 64_000):
        text = "a" * length + "!"
        seconds, _ = timed(lambda text=text: search(text))
        show(f"pattern {HOSTILE_PATTERN} on 'a'*{length:,}+'!' (search)", seconds, "no match")
    rule = compile_expression(f's.matches("{HOSTILE_PATTERN}")')
    seconds, value = timed(lambda: rule({"s": HOSTILE_TEXT}))
    show("CEL matches() alone, compiled rule", seconds, str(value))
    print("  one search of an ordinary pattern, per engine:")
    for pattern, text in (("^T-[0-9]{3,8}$", "T-1001"),
                          ("^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$", "DE89370400440532013000")):
        chosen = compile_pattern(pattern)
        forced_re2 = compile_pattern(f"(?:{pattern})")  # a group: outside the re subset
        fast, _ = timed(lambda chosen=chosen, text=text: [chosen.search(text)
                                                           for _ in range(10_000)])
        slow, _ = timed(lambda forced=forced_re2, text=text: [forced.search(text)
                                                               for _ in range(10_000)])
        print(f"    {pattern:<38} {chosen.engine}: {fast / 10_000 * 1e6:5.2f} µs   "
              f"{forced_re2.engine}: {slow / 10_000 * 1e6:5.2f} µs")
    if backtracking:
        print("  Python's backtracking re on the same pattern (what RE2 avoids):")
        python = re.compile(HOSTILE_PATTERN).search
        for length in (18, 20, 22, 24):
            text = "a" * length + "!"
            seconds, _ = timed(lambda text=text: python(text), runs=1)
            show(f"re.search({HOSTILE_PATTERN!r}, 'a'*{length}+'!')", seconds,
                 "doubles with each character")


# YAML -----------------------------------------------------------------------------------------


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


YAML_CASES = {
    "alias bomb, 9 levels of 9": alias_bomb(),
    "nested 5,000 deep (block)": "- " * 5_000 + "x\n",
    "nested 5,000 deep (flow)": "[" * 5_000 + "]" * 5_000 + "\n",
    "5 MiB file": "a: [" + "1," * (5 * 2**19) + "1]\n",
    "flow list of 200,000 nodes": "a: [" + "1," * 200_000 + "1]\n",
    "recursive alias": "a: &a [1, *a]\n",
}


def yaml_section() -> None:
    print("yaml: bounded bytes, depth and nodes after alias expansion")
    with tempfile.TemporaryDirectory() as directory:
        for name, text in YAML_CASES.items():
            path = Path(directory) / "contract.yaml"
            path.write_text(text, "utf-8")
            seconds, findings = timed(lambda path=path: compile_paths([path]).findings, runs=3)
            tracemalloc.start()  # apart from the timing: tracing slows allocation down
            compile_paths([path])
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            outcome = findings[0].message[:60] if findings else "read"
            show(name, seconds, outcome, peak)


# Numbers and repeated keys ----------------------------------------------------------------------


def numbers_section() -> None:
    print("numbers: non-finite values and repeated keys in the model's JSON")
    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text("utf-8"))
    actor = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text("utf-8"))
    gate = Gate.from_paths(REPO / "contracts", REPO / "policies",
                           resolvers=WorldResolvers(world))
    # sendPayment's amount: {type: number, exclusiveMinimum: 0, maximum: 10000}
    base = '{"recipientIban": "DE89370400440532013000", "currency": "EUR", "amount": '
    texts = {
        "sendPayment amount: NaN": base + "NaN}",
        "sendPayment amount: Infinity": base + "Infinity}",
        "sendPayment amount: 1e400": base + "1e400}",
        "sendPayment amount twice": base + '5, "amount": 9000}',
    }
    for name, arguments in texts.items():
        call = json.dumps({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                           "function": {"name": "sendPayment", "arguments": arguments}}]})
        seconds, decision = timed(lambda call=call: gate.check(call, actor=actor, now=NOW))
        show(name, seconds, f"{decision.route} ({decision.error_class})")
    envelope = ('{"name": "readTicket", "arguments": {"ticketId": "T-1001"}, '
                '"name": "createFollowUp"}')
    seconds, decision = timed(lambda: gate.check(envelope, actor=actor, now=NOW))
    show("name twice in the model output", seconds, f"{decision.route} ({decision.error_class})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backtracking", action="store_true",
                        help="also time Python's re on the hostile pattern (a few seconds)")
    options = parser.parse_args()
    regex_section(options.backtracking)
    yaml_section()
    numbers_section()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
