"""Instructions per reference decision, counted by ``valgrind --tool=callgrind``.

Wall time on a shared machine wobbles by ±10% over a day; instruction counts do not. For
each of the three reference decisions of ``compare_benchmark.py`` (the createFollowUp call
allowed, denied for another tenant's ticket, rejected for a past due date) this runs the
decision N = 200 and N = 2,200 times under callgrind and prints
(instructions(2,200) − instructions(200)) / 2,000: the cost of one decision in steady
state, without start-up, compilation and warm-up. Both runs start alike: no load cache
(``CALLGATE_CACHE_DIR`` empty) and one hash seed.

Each count is printed against its budget (``BUDGET``, issue 31): the count main had when
the decision path was rewritten for its readers, plus 5%. With cedarpy installed (the
bench extra) the same three decisions are counted for Cedar as ``compare_benchmark.py``
calls it (the whole world loaded once as an entity store, the arguments checked in Python
first), and the ratio Cedar / callgate is printed as information. ``--no-cedar`` counts
callgate only (about half the time).

Run from the repository root:  python benchmarks/callgrind_decisions.py [--no-cedar]
(``--inner allowed 200`` or ``--inner cedar:allowed 200`` is what runs under valgrind; it
needs no valgrind itself.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DECISIONS = ("allowed", "denied", "rejected")
SMALL, LARGE = 200, 2_200


def inner(decision: str, count: int) -> None:
    import yaml

    sys.path.insert(0, str(REPO / "benchmarks"))
    from decision_benchmark import NOW, follow_up, index_resolvers

    from callgate_rules import Gate

    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text(encoding="utf-8"))
    actor = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text("utf-8"))
    if decision.startswith("cedar:"):
        cedar(decision.removeprefix("cedar:"), count, world, actor)
        return
    gate = Gate.from_paths(REPO / "contracts", REPO / "policies",
                           resolvers=index_resolvers(world))
    call = {"allowed": follow_up(), "denied": follow_up(ticketId="T-2001"),
            "rejected": follow_up(dueAt="2026-01-01T00:00:00Z")}[decision]
    expected = {"allowed": None, "denied": "forbidden", "rejected": "invalid_argument"}
    for _ in range(50):  # warm-up, the same for both counts
        verdict = gate.check(call, actor=actor, now=NOW)
    assert (verdict.error_class and str(verdict.error_class)) == expected[decision], verdict
    for _ in range(count):
        gate.check(call, actor=actor, now=NOW)


def cedar(decision: str, count: int, world: Any, actor: Any) -> None:
    """The same decision by Cedar, set up as ``compare_benchmark.py`` times it."""
    from compare_benchmark import cedar_contenders
    from decision_benchmark import NOW, follow_up

    made = cedar_contenders(world, actor, NOW)
    if isinstance(made, str):
        raise SystemExit(made)
    decide = made[0].decide  # the whole world as one entity store: the target's set-up
    call = {"allowed": follow_up(), "denied": follow_up(ticketId="T-2001"),
            "rejected": follow_up(dueAt="2026-01-01T00:00:00Z")}[decision]
    for _ in range(50):  # warm-up, the same for both counts
        verdict = decide(call)
    assert (verdict == "execute") == (decision == "allowed"), verdict  # Cedar says allow/deny
    for _ in range(count):
        decide(call)


# The two runs of a decision must differ by the decisions alone: with the load cache on, the
# first run after a change of callgate's code compiles everything and writes the cache while
# the second reads it (hundreds of millions of instructions: one count of 2026-12-01 came out
# at -12,080 a decision); and the hash seed moves dictionaries' layouts a little.
_SAME_START = {"CALLGATE_CACHE_DIR": "", "PYTHONHASHSEED": "0"}


# Main's counts when issue 31 began (2026-12-04: 114,043, 103,543 and 116,090), plus 5%.
BUDGET = {"allowed": 119_745, "denied": 108_720, "rejected": 121_895}


def instructions(decision: str, count: int) -> int:
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               sys.executable, __file__, "--inner", decision, str(count)],
                              capture_output=True, text=True, cwd=REPO,
                              env={**os.environ, **_SAME_START})
        if done.returncode != 0:
            raise SystemExit(f"the {decision} decision failed under valgrind:\n{done.stderr}")
        summary = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        assert summary, "callgrind wrote no summary"
        return int(summary.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inner", nargs=2, metavar=("DECISION", "COUNT"))
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument("--no-cedar", action="store_true", help="count callgate only")
    options = parser.parse_args()
    if options.inner:
        inner(options.inner[0], int(options.inner[1]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    engines = [""] if options.no_cedar or not _has_cedar() else ["", "cedar:"]
    counts = {}
    for decision in DECISIONS:
        for engine in engines:
            name = engine + decision
            small, large = instructions(name, SMALL), instructions(name, LARGE)
            counts[name] = round((large - small) / (LARGE - SMALL))
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
