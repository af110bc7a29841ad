"""What provenance costs: per argument on long conversations, and in the worst case.

Each line is one measurement: the median of a few runs, and its ratio to a *plain substring
scan* — ``needle in text`` over the whole normalised (folded) conversation with a needle that
is not in it, the least any search can cost. Nothing here is a pass/fail test;
``tests/provenance/test_provenance_hardening.py`` holds the same shapes to their answers and
to limits of seconds.

- **per argument**: conversations of about 100 kB and 1 MB (user turns, tool results with
  prose, IBANs, invoice numbers and amounts); the cost of reading and indexing one once,
  of reading it again one message longer (a later proposal: the normalised pieces are
  cached), and of each argument after that — a string that is absent, one found late in a
  tool result, a number found and one absent. Target (issue 20): ≤ 5× the plain scan.
- **worst case**: 1 MB conversations built against the matcher — the issue's 20,000-character
  argument of near misses where every word starts one (97 s before), one 1 MB word, runs
  with spaces, a periodic value, a value inside 140,000 longer words, a value with a
  border, a text of numbers. Linear: compare the ratios at ``--quick`` (100 kB) and 1 MB.
- **hostile conversations**: the malformed ones of issue 13 and a million messages, to their
  classified outcome.

``--before`` also times the regular expression the matcher replaced on the near-miss shape
at 40, 80 and 120 kB (quadratic in the value: seconds per 40 kB block of near
misses, so the megabyte takes minutes).

Run from the repository root:  python benchmarks/provenance_benchmark.py [--quick] [--before]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import string
import time
from collections.abc import Callable
from typing import Any

from callgate_rules.provenance import (
    Thresholds,
    read_conversation,
    sources_of,
    trace_sources,
)
from callgate_rules.provenance.matching import fold, index_of, squash

T = Thresholds()


def timed(action: Callable[[], Any], runs: int = 5) -> tuple[float, Any]:
    """The median seconds of ``runs`` calls, and what the last one returned."""
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def plain_scan(texts: list[str]) -> float:
    """One ``in`` over the folded conversation with a needle that is not in it."""
    folded = "\n".join(fold(text) for text in texts)
    needle = "zq" * 11  # 22 characters, like an IBAN, in no generated text
    assert needle not in folded
    seconds, _ = timed(lambda: needle in folded, runs=21)
    return seconds


def show(what: str, seconds: float, scan: float, outcome: Any = "") -> None:
    print(f"  {what:<56} {seconds * 1e3:10.3f} ms {seconds / scan:9.1f}× scan  {outcome}")


# Per argument on a realistic conversation ------------------------------------------------------


def realistic(size: int, seed: int = 20) -> list[dict[str, Any]]:
    """About ``size`` characters of a support conversation: user turns, tool calls, tool
    results with prose, identifiers and amounts."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
             for _ in range(3000)]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a support agent."}]
    total, turn = 0, 0
    while total < size:
        turn += 1
        prose = " ".join(rng.choice(words) for _ in range(rng.randint(40, 160)))
        iban = "DE" + "".join(rng.choice(string.digits) for _ in range(20))
        amount = f"{rng.randint(1, 99)},{rng.randint(100, 999)}.{rng.randint(10, 99)}"
        if turn % 3 == 0:
            text = f"Please look at invoice INV-2026-{turn:05d} for {amount} EUR. {prose}"
            messages.append({"role": "user", "content": text})
        else:
            call = f"call_{turn}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call, "type": "function",
                 "function": {"name": rng.choice(["readEmail", "searchDocs"]),
                              "arguments": "{}"}}]})
            text = f"{prose}. Pay {amount} EUR to {iban[:4]} {iban[4:8]} {iban[8:]}. {prose}"
            messages.append({"role": "tool", "tool_call_id": call, "content": text})
        total += len(text)
    messages.append({"role": "tool", "tool_call_id": f"call_{turn}",
                     "content": "late result: pay 7,654.32 EUR to GB33BUKB20201555555555"})
    return messages


def per_argument(size: int) -> None:
    messages = realistic(size)
    texts = [m["content"] for m in messages if isinstance(m.get("content"), str)]
    scan = plain_scan(texts)
    characters = sum(map(len, texts))
    print(f"\nper argument, {characters / 1e3:,.0f} kB conversation, {len(messages)} messages "
          f"(plain scan {scan * 1e3:.3f} ms)")
    fresh, _ = timed(lambda: index_of(read_conversation(_fresh_texts(messages))), runs=3)
    folding, _ = timed(lambda: [fold(text) for text in texts], runs=3)
    show("read + index, first time (no cached pieces)", fresh, scan,
         f"(folding alone: {folding * 1e3:.1f} ms)")
    conversation = read_conversation(messages)
    index_of(conversation)
    longer = [*messages, {"role": "user", "content": "and the one after that, please"}]
    again, _ = timed(lambda: index_of(read_conversation(longer)), runs=5)
    show("read + index, one message longer (a later proposal)", again, scan)
    arguments = {
        "string, absent": "DE00999999999999999999",
        "string, found late in a tool result": "GB33 BUKB 2020 1555 5555 55",
        "number, found (7654.32)": 7654.32,
        "number, absent (123456.78)": 123456.78,
    }
    trace_sources({"warm": 1234.5}, conversation, [], T)  # the numbers are indexed once
    for name, value in arguments.items():
        seconds, found = timed(lambda v=value: trace_sources({"v": v}, conversation, [], T),
                               runs=21)
        show(f"argument: {name}", seconds, scan, found["v"])


def _fresh_texts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    salt = f" {time.perf_counter_ns()}"  # new texts each run: nothing comes from the cache
    return [{**m, "content": m["content"] + salt} if isinstance(m.get("content"), str)
            else m for m in messages]


# The worst case -----------------------------------------------------------------------------------


def hostile_shapes(size: int) -> dict[str, tuple[Any, str]]:
    def fill(unit: str) -> str:
        return unit * (size // len(unit))

    return {
        "near misses where every word starts one (issue 13)": (
            "a" * 20_000, fill("a " * 19_999 + "b ")),
        "one word of the value's character": ("a" * 20_000, "a" * size),
        "runs with a space every 4th character": ("aaaa", fill("aaa ")),
        "a periodic value, spaces in its runs": ("ab" * 10_000, fill("ab" * 3 + " ")),
        "inside longer words, everywhere": ("abcd", fill("xabcdx ")),
        "a value with a border, overlapping": ("abca", fill("xabcax abcabca ")),
        "a near miss of a long random value": (_random_value(20_000),
                                              fill(_random_value(19_999) + "! ")),
        "numbers: grouped, comma runs, one long number": (
            1000, fill("1 000 ")[: size // 3] + fill("1,1,")[: size // 3] + "9" * (size // 3)),
    }


def _random_value(length: int) -> str:
    rng = random.Random(13)
    return "".join(rng.choice("abcdefgh0123") for _ in range(length))


def worst_case(size: int) -> None:
    print(f"\nworst case, {size / 1e6:g} MB conversations built against the matcher "
          "(each argument on a newly read conversation: nothing of an earlier search reused "
          "but the normalised text)")
    for name, (value, text) in hostile_shapes(size).items():
        scan = plain_scan(["hello", text])
        messages = [{"role": "user", "content": "hello"},
                    {"role": "tool", "tool_call_id": "c", "content": text}]
        cold, _ = timed(lambda m=messages: index_of(read_conversation(_fresh(m))), runs=1)
        seconds, found = timed(
            lambda m=messages, v=value: sources_of(v, read_conversation(m), [], T), runs=3)
        show(name, seconds, scan, f"{found} (first read {cold * 1e3:.0f} ms)")


def _fresh(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    salt = f" {time.perf_counter_ns()}"  # a text never seen: nothing comes from the cache
    return [{**m, "content": m["content"] + salt} for m in messages]


def before(size_steps: tuple[int, ...] = (40_000, 80_000, 120_000)) -> None:
    """The pattern the matcher replaced, on the near-miss shape: quadratic."""
    print("\nbefore: the old pattern on the near-miss shape")
    value = squash("a" * 20_000)
    pattern = re.compile(r"(?<![^\W_])" + r"\s*".join(re.escape(c) for c in value)
                         + r"(?![^\W_])")
    for size in size_steps:
        text = fold((("a " * 19_999 + "b ") * (size // 40_000 + 1))[:size])
        seconds, _ = timed(lambda t=text: pattern.search(t), runs=1)
        scan = plain_scan([text])
        show(f"old pattern, {size / 1e3:.0f} kB", seconds, scan)


# Hostile conversations ---------------------------------------------------------------------------


def hostile_conversations() -> None:
    print("\nhostile conversations, to their outcome")

    def nested(depth: int) -> Any:
        content: Any = "deep"
        for _ in range(depth):
            content = [content]
        return content

    cases: dict[str, Any] = {
        '{"role": "assistant", "tool_calls": 5}': [{"role": "assistant", "tool_calls": 5}],
        "content: 10**5000": [{"role": "user", "content": 10**5000}],
        "content nested 50,000 deep": [{"role": "user", "content": nested(50_000)}],
        "a million messages": [{"role": "user", "content": "hi"}] * 1_000_000,
        "a bare string": "hello",
    }
    for name, value in cases.items():
        seconds, outcome = timed(lambda v=value: _outcome(v), runs=3)
        print(f"  {name:<56} {seconds * 1e3:10.3f} ms  {outcome}")


def _outcome(value: Any) -> str:
    try:
        conversation = read_conversation(value)
    except ValueError as error:
        return f"{type(error).__name__}: {error}"
    return f"unreadable: {conversation.unreadable}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 kB instead of 1 MB")
    parser.add_argument("--before", action="store_true",
                        help="also time the old pattern on the near-miss shape (slow)")
    options = parser.parse_args()
    size = 100_000 if options.quick else 1_000_000
    per_argument(100_000)
    if not options.quick:
        per_argument(1_000_000)
    worst_case(size)
    hostile_conversations()
    if options.before:
        before()


if __name__ == "__main__":
    main()
