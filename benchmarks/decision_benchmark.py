"""How much does a declarative decision cost next to the same checks written by hand?

Times ``Gate.check`` (steps 1–4, compiled once, in-process) on the reference createFollowUp
call, interleaved in one run with a hand-written Python function doing the same checks the
way a careful engineer would: read the OpenAI message, types and patterns of the arguments,
the ticket and the assignee exist, the ticket is not deleted, tenant and role, the ticket is
open, the assignee is in the ticket's team, the due date (``datetime.fromisoformat``) is in
the future. Both read the records from the same in-memory dicts (examples/world.yaml), so
the comparison is of the checks, not of the data access. Prints p50/p99 per decision and
the ratio callgate / hand-written.

The hand-written function is the floor: it does less than callgate (no size or nesting
bounds, no strict RFC 3339, no messages, no trace, no log record).

Run from the repository root:  python benchmarks/decision_benchmark.py [--seconds 7]
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from callgate_rules.pipeline.gate import Gate

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

# The hand-written gate ------------------------------------------------------------------------

DECLARED = frozenset({"ticketId", "assigneeId", "dueAt", "note"})
TICKET_ID = re.compile(r"^T-[0-9]{3,8}$")
USER_ID = re.compile(r"^U-[0-9]{1,8}$")


class HandWritten:
    """createFollowUp's contract and access rules as one plain function, indexes built once;
    JSON read with ``loads`` (the standard library's, unless told otherwise)."""

    def __init__(self, world: Mapping[str, list[dict[str, Any]]],
                 loads: Callable[[str], Any] = json.loads) -> None:
        self.tickets = {t["id"]: t for t in world.get("tickets", [])}
        self.users = {u["id"]: u for u in world.get("users", [])}
        self.loads = loads

    def __call__(self, text: str, actor: Mapping[str, Any], now: datetime) -> str:
        try:
            loads = self.loads
            (call,) = loads(text)["tool_calls"]
            name, raw = call["function"]["name"], call["function"]["arguments"]
            args = loads(raw)
        except (ValueError, KeyError, TypeError):  # msgspec's DecodeError is a ValueError
            return "malformed"
        if name != "createFollowUp":
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
            due = datetime.fromisoformat(due_at)
        except ValueError:
            return "invalid_argument"
        if actor.get("suspended") is True:
            return "forbidden"
        ticket, assignee = self.tickets.get(ticket_id), self.users.get(assignee_id)
        if ticket is None or assignee is None:
            return "not_found"
        tenant = actor["tenant"]
        if (actor["role"] not in ("agent", "supervisor") or ticket["tenant"] != tenant
                or assignee["tenant"] != tenant):
            return "forbidden"
        if "deleted_at" in ticket:
            return "not_found"
        if ticket["status"] == "closed":
            return "conflict"
        if ticket["team"] not in assignee["teams"]:
            return "invalid_argument"
        if due <= now:
            return "invalid_argument"
        return "execute"


class IndexResolver:
    """The gate's look-up of a record by ID from the same dict the hand-written function
    reads, so both sides pay the same for data access."""

    # in memory, it answers at once: called in the gate's thread (pipeline.lookups)
    callgate_keeps_deadline = True

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.by_id = {record["id"]: record for record in records}

    def __call__(self, field: str, value: Any) -> Sequence[Mapping[str, Any]]:
        if field != "id":
            raise LookupError(f"only look-ups by id are indexed, not by {field}")
        record = self.by_id.get(value) if isinstance(value, str) else None
        return (record,) if record is not None else ()


def index_resolvers(world: Mapping[str, list[dict[str, Any]]]) -> dict[str, IndexResolver]:
    return {name: IndexResolver(records) for name, records in world.items()}


# Running ----------------------------------------------------------------------------------------


def follow_up(**changes: Any) -> str:
    arguments = {"ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}
    arguments.update(changes)
    return json.dumps({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "createFollowUp", "arguments": json.dumps(arguments)}}]})


AGREEMENT_CASES = {
    "ordinary": follow_up(),
    "another tenant": follow_up(ticketId="T-2001"),
    "deleted": follow_up(ticketId="T-1003"),
    "missing": follow_up(ticketId="T-9999"),
    "closed": follow_up(ticketId="T-1002"),
    "past date": follow_up(dueAt="2026-01-01T00:00:00Z"),
    "not in team": follow_up(assigneeId="U-8"),
    "extra field": follow_up(priority="high"),
    "bad pattern": follow_up(ticketId="1001"),
}


def percentile(samples: list[int], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1000.0  # ns → µs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=7.0,
                        help="time budget of the measured loop (default 7)")
    parser.add_argument("--max-iterations", type=int, default=200_000)
    options = parser.parse_args()

    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text(encoding="utf-8"))
    actor = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text("utf-8"))
    started = time.perf_counter()
    gate = Gate.from_paths(REPO / "contracts", REPO / "policies",
                           resolvers=index_resolvers(world))
    compile_ms = (time.perf_counter() - started) * 1000
    hand = HandWritten(world)
    call = (REPO / "examples" / "calls" / "create_follow_up.json").read_text(encoding="utf-8")

    def by_gate() -> str:
        return str(gate.check(call, actor=actor, now=NOW).error_class or "execute")

    def by_hand() -> str:
        return hand(call, actor, NOW)

    # Same verdicts first: the comparison is only fair if both do the same job.
    for name, text in AGREEMENT_CASES.items():
        verdict = str(gate.check(text, actor=actor, now=NOW).error_class or "execute")
        expected = hand(text, actor, NOW)
        if verdict != expected:
            print(f"disagreement on {name}: callgate {verdict}, hand-written {expected}",
                  file=sys.stderr)
            return 1
    assert by_gate() == by_hand() == "execute"

    for _ in range(300):  # warm-up: caches, indexes, branch predictors
        by_gate()
        by_hand()

    samples: dict[str, list[int]] = {"callgate": [], "hand-written": []}
    runners: list[tuple[str, Callable[[], str]]] = [("callgate", by_gate),
                                                    ("hand-written", by_hand)]
    clock = time.perf_counter_ns
    gc.collect()
    deadline = time.perf_counter() + options.seconds
    iteration = 0
    while iteration < options.max_iterations and time.perf_counter() < deadline:
        # Interleaved, alternating which goes first, so drift and noise hit both alike.
        order = runners if iteration % 2 == 0 else runners[::-1]
        for name, run in order:
            begin = clock()
            run()
            samples[name].append(clock() - begin)
        iteration += 1

    print(f"reference createFollowUp call, {iteration} interleaved iterations "
          f"(compile once: {compile_ms:.0f} ms; {len(AGREEMENT_CASES)} verdicts agree)")
    print(f"{'':<14}{'p50 µs':>10}{'p99 µs':>10}{'mean µs':>10}")
    stats: dict[str, tuple[float, float]] = {}
    for name, values in samples.items():
        p50, p99 = percentile(values, 0.50), percentile(values, 0.99)
        mean = statistics.fmean(values) / 1000.0
        stats[name] = (p50, p99)
        print(f"{name:<14}{p50:>10.1f}{p99:>10.1f}{mean:>10.1f}")
    ours, theirs = stats["callgate"], stats["hand-written"]
    print(f"{'ratio':<14}{ours[0] / theirs[0]:>9.1f}x{ours[1] / theirs[1]:>9.1f}x"
          "   (callgate / hand-written)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
