"""What one CEL rule costs: compiled to Python, on cel-python's interpreter, and by hand.

Times a few createFollowUp-like rules, each three ways, interleaved in one run:

- ``compile_expression`` with the compiled backend (callgate_rules.cel.compiler);
- cel-python's interpreter as callgate's fallback calls it (converting the variables to
  cel-python's types on every evaluation, as it must);
- a hand-written Python function doing the same check.

Prints the median time per evaluation of each rule and of the whole decision (all rules),
and the ratios compiled / hand-written and cel-python / compiled.

Run from the repository root:  python benchmarks/cel_benchmark.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from callgate_rules.cel.expression import compile_expression

# cel-python with no callgate code in its path is the tests' reference evaluator; one
# definition of it, the test-only oracle in tests/cel/cel_python_oracle.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cel.cel_python_oracle import cel_python_evaluator  # noqa: E402

Evaluator = Callable[[Mapping[str, Any]], Any]

VARIABLES: dict[str, Any] = {
    "ticket": {"id": "T-1042", "tenant": "acme", "deleted": False, "status": "open"},
    "actor": {"id": "U-7", "tenant": "acme", "roles": ["agent", "viewer"]},
    "args": {
        "ticketId": "T-1042",
        "assigneeId": "U-12",
        "dueAt": "2026-12-03T17:00:00Z",
        "note": "Call the customer back about the refund.",
        "priority": "high",
    },
    "team": {"members": ["U-3", "U-7", "U-12", "U-19"]},
    "now": datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
}


def follow_up_by_hand(v: Mapping[str, Any]) -> bool:
    ticket, args = v["ticket"], v["args"]
    return (
        ticket["tenant"] == v["actor"]["tenant"]
        and not ticket["deleted"]
        and args["assigneeId"] in v["team"]["members"]
        and datetime.fromisoformat(args["dueAt"]) > v["now"]
    )


def priority_by_hand(v: Mapping[str, Any]) -> bool:
    return v["args"]["priority"] in ("low", "normal", "high")


def note_by_hand(v: Mapping[str, Any]) -> bool:
    args = v["args"]
    return len(args["note"]) <= 500 if "note" in args else True


def role_by_hand(v: Mapping[str, Any]) -> bool:
    return any(role in ("agent", "admin") for role in v["actor"]["roles"])


RULES: list[tuple[str, str, Evaluator]] = [
    (
        "createFollowUp",
        "ticket.tenant == actor.tenant && !ticket.deleted && "
        "args.assigneeId in team.members && timestamp(args.dueAt) > now",
        follow_up_by_hand,
    ),
    ("priority", "args.priority in ['low', 'normal', 'high']", priority_by_hand),
    ("note", "has(args.note) ? size(args.note) <= 500 : true", note_by_hand),
    ("role", "actor.roles.exists(r, r == 'agent' || r == 'admin')", role_by_hand),
]


def per_call(evaluate: Evaluator, seconds: float) -> float:
    """Median seconds per call over batches filling ``seconds``."""
    batch = 1
    while True:  # size a batch to about a millisecond
        start = time.perf_counter()
        for _ in range(batch):
            evaluate(VARIABLES)
        if time.perf_counter() - start > 1e-3:
            break
        batch *= 2
    samples = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(batch):
            evaluate(VARIABLES)
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def decision(evaluators: list[Evaluator]) -> Evaluator:
    """Every rule must hold: how a gate runs the rules of one call."""

    def decide(variables: Mapping[str, Any]) -> bool:
        for evaluate in evaluators:
            if evaluate(variables) is not True:
                return False
        return True

    return decide


def decision_by_hand(v: Mapping[str, Any]) -> bool:
    """All four checks written as one function, as a developer would."""
    ticket, args, actor = v["ticket"], v["args"], v["actor"]
    return (
        ticket["tenant"] == actor["tenant"]
        and not ticket["deleted"]
        and args["assigneeId"] in v["team"]["members"]
        and datetime.fromisoformat(args["dueAt"]) > v["now"]
        and args["priority"] in ("low", "normal", "high")
        and (len(args["note"]) <= 500 if "note" in args else True)
        and any(role in ("agent", "admin") for role in actor["roles"])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    seconds = parser.parse_args().seconds

    rows: list[tuple[str, Evaluator, Evaluator, Evaluator]] = []
    for name, source, by_hand in RULES:
        compiled = compile_expression(source)
        assert compiled.backend == "compiled", name
        interpreted = cel_python_evaluator(source)
        assert compiled(VARIABLES) is True and by_hand(VARIABLES) is True
        assert interpreted(VARIABLES) is True
        rows.append((name, compiled.evaluate, interpreted, by_hand))
    rows.append((
        "decision (all rules)",
        decision([row[1] for row in rows]),
        decision([row[2] for row in rows]),
        decision_by_hand,
    ))

    gc.disable()  # keep collector pauses out of the medians
    print(f"{'rule':22} {'by hand':>10} {'compiled':>10} {'cel-python':>11}"
          f" {'compiled/hand':>14} {'cel-python/compiled':>20}")
    for name, compiled_rule, interpreted_rule, hand_rule in rows:
        hand = per_call(hand_rule, seconds)
        compiled_time = per_call(compiled_rule, seconds)
        interpreted_time = per_call(interpreted_rule, seconds)
        print(
            f"{name:22} {hand * 1e6:8.2f}µs {compiled_time * 1e6:8.2f}µs"
            f" {interpreted_time * 1e6:9.1f}µs {compiled_time / hand:13.1f}x"
            f" {interpreted_time / compiled_time:19.0f}x"
        )
    gc.enable()


if __name__ == "__main__":
    main()
