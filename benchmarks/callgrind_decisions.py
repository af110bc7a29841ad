"""Instructions per reference decision, counted by ``valgrind --tool=callgrind``.

Wall time on a shared machine wobbles by ±10% over a day; instruction counts do not. For
each of the three reference decisions of ``compare_benchmark.py`` (the createFollowUp call
allowed, denied for another tenant's ticket, rejected for a past due date) this runs the
decision N = 200 and N = 2,200 times under callgrind and prints
(instructions(2,200) − instructions(200)) / 2,000: the cost of one decision in steady
state, without start-up, compilation and warm-up.

Run from the repository root:  python benchmarks/callgrind_decisions.py
(``--inner allowed 200`` is what runs under valgrind; it needs no valgrind itself.)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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


def instructions(decision: str, count: int) -> int:
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               sys.executable, __file__, "--inner", decision, str(count)],
                              capture_output=True, text=True, cwd=REPO)
        if done.returncode != 0:
            raise SystemExit(f"the {decision} decision failed under valgrind:\n{done.stderr}")
        summary = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        assert summary, "callgrind wrote no summary"
        return int(summary.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inner", nargs=2, metavar=("DECISION", "COUNT"))
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    options = parser.parse_args()
    if options.inner:
        inner(options.inner[0], int(options.inner[1]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    counts = {}
    for decision in DECISIONS:
        small, large = instructions(decision, SMALL), instructions(decision, LARGE)
        counts[decision] = round((large - small) / (LARGE - SMALL))
        if not options.json:
            print(f"{decision:<10}{counts[decision]:>10,} instructions per decision")
    if options.json:
        print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
