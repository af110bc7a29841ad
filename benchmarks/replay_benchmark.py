"""How fast does ``callgate replay`` decide a decision log again?

Writes the decision log of the scenario suite and the reference policy tests (every route
the reference reaches: executions, confirmations, refusals, look-ups, provenance), repeats
its lines up to N (default 20,000), and times, side by side in one run:

- ``replay`` of the whole log against the reference documents (read a line, rebuild its
  inputs, ``Gate.check`` with the recorded records and provenance, compare);
- the same calls through ``Gate.check`` directly, with the inputs already in memory: what
  deciding alone costs, so the ratio is what replaying adds (JSON, resolvers per line).

Prints lines per second (wall and CPU) and the ratio. CPU time is the steadier figure on a
busy machine; for instruction counts run it under ``valgrind --tool=callgrind`` with
``--lines 2000``.

Run from the repository root:  python benchmarks/replay_benchmark.py [--lines 20000]
                                                                     [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from callgate_rules.decision_log import DecisionLog, ReplayInputs
from callgate_rules.documents.compiler import load
from callgate_rules.harness.policytest import load_tests
from callgate_rules.harness.replay import RecordedResolvers, read_log, replay
from callgate_rules.harness.scenarios import load_scenarios, run_scenarios
from callgate_rules.pipeline.gate import Gate
from callgate_rules.provenance import RecordedConversation

REPO = Path(__file__).resolve().parents[1]


def suite_log(directory: Path, lines: int) -> Path:
    """The suite's decision log, its lines repeated up to ``lines``."""
    config = load([REPO / "contracts", REPO / "policies"])
    once = directory / "once.jsonl"
    log = DecisionLog(once)
    run_scenarios([*load_scenarios([REPO / "examples" / "scenarios"]),
                   *load_tests([REPO / "policies"])], config, decision_log=log)
    log.close()
    texts = [text for text in once.read_text(encoding="utf-8").splitlines() if text.strip()]
    path = directory / "decisions.jsonl"
    path.write_text("\n".join(texts[i % len(texts)] for i in range(lines)) + "\n",
                    encoding="utf-8")
    return path


def timed(work: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The best wall and CPU seconds of ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    config = load([REPO / "contracts", REPO / "policies"])
    with tempfile.TemporaryDirectory(prefix="callgate-replay-bench-") as directory:
        path = suite_log(Path(directory), options.lines)
        found = replay(read_log(path), config)
        print(f"{found.lines} lines: {found.unchanged} unchanged, {len(found.changes)} "
              f"changed, {len(found.not_redecided)} not re-decided")
        replay_wall, replay_cpu = timed(lambda: replay(read_log(path), config), options.repeat)
        records = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
        calls = [(record, ReplayInputs.of(record["replay"])) for record in records
                 if "replay" in record and isinstance(record.get("arguments"), dict)]
        gate = Gate(config, secret=b"bench")
        prepared = [({"name": record["tool"], "arguments": record["arguments"]}, inputs,
                     RecordedResolvers(inputs),
                     RecordedConversation((), sources=inputs.provenance)
                     if inputs.provenance is not None else None)
                    for record, inputs in calls]

        def check_only() -> None:
            for call, inputs, resolvers, conversation in prepared:
                gate.resolvers = resolvers
                gate.check(call, actor=inputs.actor, session=inputs.session or None,
                           conversation=conversation)

        check_wall, check_cpu = timed(check_only, options.repeat)
    redecided = found.lines - len(found.not_redecided)
    print(f"replay:     {found.lines / replay_wall:>9,.0f} lines/s wall, "
          f"{found.lines / replay_cpu:>9,.0f} lines/s CPU ({replay_cpu * 1e6 / found.lines:.0f} "
          "µs CPU a line)")
    print(f"check only: {len(prepared) / check_wall:>9,.0f} calls/s wall, "
          f"{len(prepared) / check_cpu:>9,.0f} calls/s CPU ({check_cpu * 1e6 / len(prepared):.0f} "
          "µs CPU a call)")
    print(f"replay costs {replay_cpu / found.lines / (check_cpu / len(prepared)):.2f}× a "
          f"check per line ({redecided} of {found.lines} lines re-decided)")


if __name__ == "__main__":
    main()
