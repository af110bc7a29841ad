"""Instructions per reference decision, counted by ``valgrind --tool=callgrind``.

Wall time on a shared machine wobbles by ±10% over a day; instruction counts do not. For
each of the three reference decisions of ``compare_benchmark.py`` (the createFollowUp call
allowed, denied for another tenant's ticket, rejected for a past due date) one process
under callgrind warms up and then counts two windows of 1,000 decisions between marks
(``callgrind_counting.py``: start-up, compilation and warm-up are never counted, and the two
windows must agree within 1% or nothing is printed). Every process starts alike: no load
cache (``CALLGATE_CACHE_DIR`` empty) and one hash seed.

Each count is printed against its budget (``BUDGET``, issue 31): the count main had when
the decision path was rewritten for its readers, plus 5%. With cedarpy installed (the
bench extra) the same three decisions are counted for Cedar as ``compare_benchmark.py``
calls it (the whole world loaded once as an entity store, the arguments checked in Python
first), and the ratio Cedar / callgate is printed as information. ``--no-cedar`` counts
callgate only (about half the time); ``--quick`` counts callgate only, two windows of 100
decisions (a smoke test of the counting).

Run from the repository root:  python benchmarks/callgrind_decisions.py [--no-cedar] [--quick]
(``--inner allowed 1000`` or ``--inner cedar:allowed 1000`` is what runs under valgrind; it
needs no valgrind itself.)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from callgrind_counting import count, count_windows, valgrind_missing

REPO = Path(__file__).resolve().parents[1]
DECISIONS = ("allowed", "denied", "rejected")
DECISIONS_COUNTED = 1_000  # in each of the two windows
QUICK = 100
WARM_UP = 200  # decisions before the first mark: plans compiled, caches filled


def inner(decision: str, per_window: int) -> None:
    import yaml

    sys.path.insert(0, str(REPO / "benchmarks"))
    from decision_benchmark import NOW, follow_up, index_resolvers

    from callgate_rules import Gate

    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text(encoding="utf-8"))
    actor = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text("utf-8"))
    if decision.startswith("cedar:"):
        cedar(decision.removeprefix("cedar:"), per_window, world, actor)
        return
    gate = Gate.from_paths(REPO / "contracts", REPO / "policies",
                           resolvers=index_resolvers(world))
    call = {"allowed": follow_up(), "denied": follow_up(ticketId="T-2001"),
            "rejected": follow_up(dueAt="2026-01-01T00:00:00Z")}[decision]
    expected = {"allowed": None, "denied": "forbidden", "rejected": "invalid_argument"}
    for _ in range(WARM_UP):
        verdict = gate.check(call, actor=actor, now=NOW)
    assert (verdict.error_class and str(verdict.error_class)) == expected[decision], verdict

    def run(decisions: int) -> None:
        for _ in range(decisions):
            gate.check(call, actor=actor, now=NOW)

    count_windows(run, per_window)


def cedar(decision: str, per_window: int, world: Any, actor: Any) -> None:
    """The same decision by Cedar, set up as ``compare_benchmark.py`` times it."""
    from compare_benchmark import cedar_contenders
    from decision_benchmark import NOW, follow_up

    made = cedar_contenders(world, actor, NOW)
    if isinstance(made, str):
        raise SystemExit(made)
    decide = made[0].decide  # the whole world as one entity store: the target's set-up
    call = {"allowed": follow_up(), "denied": follow_up(ticketId="T-2001"),
            "rejected": follow_up(dueAt="2026-01-01T00:00:00Z")}[decision]
    for _ in range(WARM_UP):
        verdict = decide(call)
    assert (verdict == "execute") == (decision == "allowed"), verdict  # Cedar says allow/deny

    def run(decisions: int) -> None:
        for _ in range(decisions):
            decide(call)

    count_windows(run, per_window)


# Main's counts when issue 31 began (2026-12-04: 114,043, 103,543 and 116,090), plus 5%.
BUDGET = {"allowed": 119_745, "denied": 108_720, "rejected": 121_895}


def instructions(decision: str, decisions: int) -> int:
    """Instructions per decision, counted in one process under callgrind."""
    return round(count([sys.executable, __file__, "--inner", decision, str(decisions)],
                       decisions, what=f"the {decision} decision", cwd=REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inner", nargs=2, metavar=("DECISION", "COUNT"))
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument("--no-cedar", action="store_true", help="count callgate only")
    parser.add_argument("--quick", action="store_true",
                        help=f"callgate only, {QUICK} decisions a window: a smoke test")
    options = parser.parse_args()
    if options.inner:
        inner(options.inner[0], int(options.inner[1]))
        return 0
    missing = valgrind_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    quick = options.quick
    engines = [""] if options.no_cedar or quick or not _has_cedar() else ["", "cedar:"]
    decisions = QUICK if quick else DECISIONS_COUNTED
    counts = {}
    for decision in DECISIONS:
        for engine in engines:
            name = engine + decision
            counts[name] = instructions(name, decisions)
        if options.json:
            continue
        budget = BUDGET[decision]
        line = (f"{decision:<10}{counts[decision]:>10,} instructions per decision "
                f"(budget {budget:,}: {'within' if counts[decision] <= budget else 'OVER'})")
        if "cedar:" in engines:
            ratio = counts[f"cedar:{decision}"] / counts[decision]
            line += f"; Cedar {counts[f'cedar:{decision}']:,}: {ratio:.2f}×"
        print(line)
    if options.json:
        print(json.dumps(counts))
    return 0


def _has_cedar() -> bool:
    try:
        import cedarpy  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
