"""How long does ``callgate lint`` take on a large configuration?

Generates N ToolContracts (default 1,000) into a temporary directory — reads and writes,
none, one or two look-ups with record schemas, five business rules each, an example — plus
an AccessPolicy and a RoutingTable, then times ``compile_paths`` alone and the whole
``lint`` on them. Two of the five rules are unique to each contract; the others, and the
look-up keys, recur with a few variants, as shared patterns do in real configurations.
Prints wall-clock and CPU seconds (CPU time is the steadier figure on a busy machine), the
number of expressions, and the findings: the configuration is generated clean.

The load cache (``documents/cache.py``, ``documents/snapshot.py``) lives in a fresh
temporary directory for the run: the first compile is cold (nothing cached), the second
reads every piece from the cache and keeps the whole configuration as one entry, the best
of ``--repeat`` after it is warm (every file unchanged: that one entry). The
first lint finds the compilation cached but computes its findings; the best of the lints
after it is warm (the findings' entry). Then one contract's description is changed and the
configuration compiled and linted again: no whole entry fits, the other files' pieces do.
Targets (issue 20): a warm compile ≤ 10% of the cold one, a warm lint of 1,000 files ≤ 1.5 s
of CPU.

``--cold-instructions`` counts instead what a first load costs a contract, in instructions
(callgrind, so that the machine's load cannot move it): one process with an empty cache
compiles 100 generated contracts to warm up (imports, and the rules and look-up keys that
recur), then two windows of 100 contracts of its own each, counted between marks
(``callgrind_counting.py``: the two must agree within 2%), less a compile of the policies
alone. It takes a few minutes.

Run from the repository root:  python benchmarks/lint_benchmark.py [--contracts 1000]
                                        [--repeat 3] [--profile] [--cold-instructions]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from callgrind_counting import count, count_windows, valgrind_missing

from callgate_rules.authoring.lint import lint
from callgate_rules.documents.compiler import compile_paths

ROUTES = """\
    malformed: regenerate
    unknown_tool: refuse
    unexpected_argument: refuse
    invalid_argument: regenerate
    not_found: replan
    ambiguous: clarify
    forbidden: refuse
    conflict: refuse
    confirmation_required: await_confirmation
    transient: retry
    unknown_outcome: reconcile
    duplicate: return_receipt
    permanent: refuse
    answer_too_large: replan
    reconcile_failed: review
    budget_exhausted: review
"""

RECORD_SCHEMA = """\
      schema:
        type: object
        required: [id, tenant, status, ownerId]
        properties:
          id: {type: string}
          tenant: {type: string}
          status: {type: string, enum: [open, closed]}
          ownerId: {type: string}
          closed_at: {type: string}
"""

OWNER_SCHEMA = """\
      schema:
        type: object
        required: [id, tenant, active]
        properties:
          id: {type: string}
          tenant: {type: string}
          active: {type: boolean}
"""


def contract(index: int) -> str:
    """One contract; ``index`` varies its effect, look-ups, bounds and constants."""
    write = index % 2 == 0
    lookups = index % 3  # 0, 1 or 2 look-ups
    limit = 1000 + index
    text = f"""\
apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: tool{index:04d}
  version: "1.{index % 7}.0"
  owner: team{index % 13}@example.com
  description: Benchmark tool number {index}, which acts on one record.
spec:
  effect: {"write" if write else "read"}
{"  idempotency: key" if write else ""}
  arguments:
    type: object
    required: [recordId, title, amount]
    properties:
      recordId: {{type: string, pattern: "^R-[0-9]{{1,8}}$"}}
      title: {{type: string, minLength: 1, maxLength: {100 + index % 50}}}
      amount: {{type: integer, minimum: 0, maximum: {limit}}}
      dueAt: {{type: string, format: date-time}}
      note: {{type: string, maxLength: 500}}
"""
    if lookups:
        text += f"""\
  lookups:
    - name: record
      collection: records{index % 5}
      key: args.recordId
      message: No record {{args.recordId}} is available to you.
{RECORD_SCHEMA}"""
    if lookups == 2:
        text += f"""\
    - name: owner
      collection: users
      key: record.ownerId
{OWNER_SCHEMA}"""
    record_rule = {
        0: f'args.recordId.startsWith("R-") && size(args.recordId) < {12 + index % 5}',
        1: f'record.status != "closed" && !has(record.closed_at) && args.amount != {index}',
        2: f'owner.active && owner.tenant == record.tenant && args.amount != {index}',
    }[lookups]
    text += f"""\
  rules:
    - name: amount-below-limit
      expression: args.amount < {limit - 100}
      error_class: invalid_argument
      message: "amount {{args.amount}} is above {limit - 100}; ask for a smaller amount."
    - name: title-not-blank
      expression: args.title != "" && size(args.title) <= {90 + index % 50}
      error_class: invalid_argument
      message: The title must not be blank or longer than {90 + index % 50} characters.
    - name: due-in-future
      expression: "!has(args.dueAt) || timestamp(args.dueAt) > now"
      error_class: invalid_argument
      message: "dueAt {{args.dueAt}} is in the past; use a future time."
    - name: note-short-{index}
      expression: "!has(args.note) || size(args.note) <= {400 + index % 100}"
      error_class: invalid_argument
      message: The note is too long; keep it under {400 + index % 100} characters.
    - name: record-usable
      expression: '{record_rule}'
      error_class: conflict
      message: Record {{args.recordId}} cannot be changed in its current state.
  timeout: {1 + index % 9}s
  examples:
    - arguments: {{recordId: R-{index}, title: Example {index}, amount: {index % 900}}}
"""
    return text


def policy(count: int, first: int = 0) -> str:
    groups: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for index in range(first, first + count):
        groups[index % 3].append(f"tool{index:04d}")
    conditions = {
        0: 'actor.role in ["agent", "supervisor"]',
        1: "record.tenant == actor.tenant",
        2: "record.tenant == actor.tenant && owner.tenant == actor.tenant",
    }
    rules = "".join(
        f"""\
    - name: allow-group-{group}
      effect: allow
      tools: [{", ".join(tools)}]
      when: {conditions[group]}
"""
        for group, tools in groups.items() if tools
    )
    return f"""\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {{name: benchmark-access, version: "1", owner: sec@example.com, description: bench}}
spec:
  actor:
    type: object
    required: [id, tenant, role]
    properties:
      id: {{type: string}}
      tenant: {{type: string}}
      role: {{type: string, enum: [agent, supervisor, viewer]}}
      suspended: {{type: boolean}}
  rules:
    - name: suspended-actors
      effect: deny
      tools: ["*"]
      when: has(actor.suspended) && actor.suspended
{rules}"""


ROUTING = f"""\
apiVersion: callgate/v1
kind: RoutingTable
metadata: {{name: benchmark-routing, version: "1", owner: ops@example.com, description: bench}}
spec:
  routes:
{ROUTES}"""


def generate(root: Path, count: int, first: int = 0) -> list[Path]:
    """``count`` contracts numbered from ``first``, and the policies that name them."""
    contracts, policies = root / "contracts", root / "policies"
    contracts.mkdir(parents=True)
    policies.mkdir()
    for index in range(first, first + count):
        (contracts / f"tool{index:04d}.yaml").write_text(contract(index), encoding="utf-8")
    (policies / "access.yaml").write_text(policy(count, first), encoding="utf-8")
    (policies / "routing.yaml").write_text(ROUTING, encoding="utf-8")
    return [contracts, policies]


def best_of(repeat: int, run: Callable[[], Any]) -> tuple[float, float, Any]:
    """(best wall-clock seconds, best CPU seconds, the result) over ``repeat`` runs."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = run()
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - started_cpu)
    return wall, cpu, result


COLD_CONTRACTS = 100  # in the warm-up and in each counted window


def cold_instructions() -> None:
    """Instructions a contract of a first load (see the module's docstring)."""
    missing = valgrind_missing()
    if missing:
        raise SystemExit(missing)
    with tempfile.TemporaryDirectory(prefix="callgate-cold-") as directory:
        per_contract = count(
            [sys.executable, __file__, "--cold-inner", directory], COLD_CONTRACTS,
            what="a first load", env={**os.environ, "CALLGATE_CACHE_DIR": ""})
    print(f"first load: {per_contract / 1e6:.2f} million instructions a contract "
          f"(callgrind, two windows of {COLD_CONTRACTS} contracts in one process)")


def cold_inner(directory: Path) -> None:
    """What runs under valgrind: the warm-up, then the counted windows, each compiling
    contracts of its own (numbered apart, so no window finds another's in a cache) with
    an empty load cache, the last window the policies alone."""
    os.environ["CALLGATE_CACHE_DIR"] = str(directory / "cache")
    sets = [generate(directory / "warm-up", COLD_CONTRACTS)]
    sets += [generate(directory / f"window{number}", COLD_CONTRACTS, first=1000 * number)
             for number in (1, 2)]
    sets.append(generate(directory / "policies-alone", 0))
    compile_paths(sets.pop(0))
    remaining = iter(sets)

    def run(contracts: int) -> None:
        paths = next(remaining)
        assert len(list(paths[0].iterdir())) == contracts, paths
        compile_paths(paths)

    count_windows(run, COLD_CONTRACTS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contracts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--profile", action="store_true",
                        help="print the 25 most expensive functions of one lint run")
    parser.add_argument("--cold-instructions", action="store_true",
                        help="a first load's instructions a contract, counted by callgrind")
    parser.add_argument("--cold-inner", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.cold_inner:
        cold_inner(options.cold_inner)
        return
    if options.cold_instructions:
        cold_instructions()
        return
    with tempfile.TemporaryDirectory(prefix="callgate-lint-bench-") as directory:
        os.environ["CALLGATE_CACHE_DIR"] = str(Path(directory) / "cache")
        paths = generate(Path(directory), options.contracts)
        cold_wall, cold_cpu, _ = best_of(1, lambda: compile_paths(paths))
        second_wall, second_cpu, _ = best_of(1, lambda: compile_paths(paths))
        compile_wall, compile_cpu, compilation = best_of(
            options.repeat, lambda: compile_paths(paths))
        first_lint_wall, first_lint_cpu, _ = best_of(1, lambda: lint(paths))
        lint_wall, lint_cpu, findings = best_of(options.repeat, lambda: lint(paths))
        changed = paths[0] / "tool0000.yaml"
        changed.write_text(changed.read_text(encoding="utf-8").replace(
            "Benchmark tool number", "Changed benchmark tool number"), encoding="utf-8")
        changed_wall, changed_cpu, _ = best_of(1, lambda: compile_paths(paths))
        changed_lint_wall, changed_lint_cpu, _ = best_of(1, lambda: lint(paths))
        expressions = [r.expression for c in compilation.contracts.values() for r in c.rules]
        expressions += [lk.key for c in compilation.contracts.values() for lk in c.lookups]
        expressions += [r.when for r in compilation.access_rules]
        distinct = len({e.source for e in expressions})
        print(f"{options.contracts} contracts, {len(compilation.sources)} documents, "
              f"{len(expressions)} CEL expressions ({distinct} distinct); "
              f"best of {options.repeat}")
        for label, wall, cpu in (
                ("compile, cold", cold_wall, cold_cpu),
                ("compile, second (from the pieces)", second_wall, second_cpu),
                ("compile, warm", compile_wall, compile_cpu),
                ("lint, first (compilation cached)", first_lint_wall, first_lint_cpu),
                ("lint, warm", lint_wall, lint_cpu),
                ("compile, one file changed", changed_wall, changed_cpu),
                ("lint, one file changed", changed_lint_wall, changed_lint_cpu)):
            print(f"{label + ':':<34}{wall:7.2f} s wall, {cpu:7.2f} s CPU "
                  f"({cpu / options.contracts * 1000:.1f} ms CPU per contract)")
        ratio = compile_cpu / cold_cpu
        print(f"warm / cold compile: {ratio:.0%} (≤ 10% {'met' if ratio <= 0.1 else 'MISSED'}); "
              f"warm lint {lint_cpu:.2f} s CPU for {options.contracts} contracts (≤ 1.5 s for "
              f"1,000 {'met' if lint_cpu * 1000 / options.contracts <= 1.5 else 'MISSED'})")
        print(f"findings:      {len(findings)}")
        for finding in findings[:5]:
            print(f"  {finding}")
        if options.profile:
            profiler = cProfile.Profile()
            profiler.runcall(lint, paths)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
