"""What finding how a number is computed (``origins.X.derived``, provenance/derived) costs
one number argument's ``origins``.

The conversation holds N distinct numbers of three to six significant digits (a statement
of transactions read by a tool, and five in the user's request): 200 and 2,000 by default,
the second to show that past ``MAX_OPERANDS`` (256) the cost stops growing. Each argument's origins
are timed with the conversation's index kept (as within one decision, and for each later
proposal of the run), and again with the search switched off, side by side:

- a number written in the conversation (an exact match: no search);
- a number computed from two of them (the search, and the operands' own origins);
- a number written nowhere and not computable (the whole search, nothing found);

and the search alone (``Operands.derivations``) for the last one.

Run from the repository root:  python benchmarks/derived_origins_benchmark.py [--numbers N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from callgate_rules.provenance import Thresholds, is_evidence, read_conversation
from callgate_rules.provenance.derived import MAX_OPERANDS, Operands
from callgate_rules.provenance.origins import reads_index, trace_origins
from callgate_rules.provenance.results import no_labels


def conversation(count: int, seed: int = 34) -> tuple[list[dict[str, Any]], list[int]]:
    """``count`` distinct numbers: five in the user's request, the rest in a statement."""
    rng = random.Random(seed)
    numbers = rng.sample(range(100, 1_000_000), count)
    # written plainly: "123,456" would be two numbers (123456 and 123.456, both readings)
    lines = [f"- {n} to account {rng.randint(1, 99)}" for n in numbers[5:]]
    return ([{"role": "user", "content": "Pay the rent, " + "; ".join(map(str, numbers[:5]))},
             {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "get_transactions", "arguments": json.dumps({"n": 500})}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "\n".join(lines)}],
            numbers)


def timed(action: Callable[[], Any], runs: int = 201) -> float:
    """The median of ``runs`` timings, in seconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def evidence(value: Any) -> bool:
    return is_evidence(value, THRESHOLDS)


THRESHOLDS = Thresholds()


def measure(count: int) -> None:
    messages, numbers = conversation(count)
    held = read_conversation(messages)
    started = time.perf_counter()
    index = reads_index(held, no_labels, evidence)
    built = time.perf_counter() - started
    operands = index.operands()
    table = timed(lambda: Operands(index.parts), runs=21)
    written = set(numbers)
    nowhere = next(v for v in range(10_000_000, 20_000_000) if not any(
        v - a in written or a - v in written or (v % a == 0 and v // a in written)
        for a in numbers))
    arguments = {"written": numbers[-1], "computed": numbers[1] + numbers[2],
                 "nowhere, not computable": nowhere}
    print(f"{count} distinct numbers ({len(operands.numbers)} searched, bound "
          f"{MAX_OPERANDS}); the conversation's index built once in {built * 1e3:.2f} ms, "
          f"its table of operands in {table * 1e3:.3f} ms")

    def origins_of(value: Any) -> Any:
        return trace_origins({"amount": value}, held, [], evidence)[0]["amount"]

    for name, value in arguments.items():
        with_search = timed(lambda: origins_of(value))  # noqa: B023 (timed at once)
        original = Operands.derivations
        Operands.derivations = lambda self, value: []  # type: ignore[method-assign]
        try:
            without = timed(lambda: origins_of(value))  # noqa: B023 (timed at once)
        finally:
            Operands.derivations = original  # type: ignore[method-assign]
        print(f"  {name:<24} {with_search * 1e3:7.3f} ms  (search off {without * 1e3:.3f} "
              f"ms)  derived: {len(origins_of(value)['derived'])}")
    search = timed(lambda: operands.derivations(Decimal(nowhere)))
    print(f"  the search alone, nothing found: {search * 1e3:.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--numbers", type=int, nargs="*", default=[200, 2_000])
    for count in parser.parse_args().numbers:
        measure(count)


if __name__ == "__main__":
    main()
