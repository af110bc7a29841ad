"""What reading numbers and tokens spelled in words costs (provenance/in_words), on texts
of 20 kB: hostile ones made of nothing but number words, and ordinary prose.

For each text: ``read_in_words`` alone; ``parts_of`` (every part of the text, as origins
reads each piece of a conversation once); and a first proposal's provenance and origins of
one argument against a conversation whose tool result is that text (the conversation read,
indexed and searched: what a gate pays for a new tool result). The last two are measured
with the reading of words and without it (``read_in_words`` replaced by one that finds
nothing, in this process), runs alternating, the fastest of each kept: a busy machine
slows runs down, never speeds them up.

Run from the repository root:  python benchmarks/in_words_benchmark.py [--size 20000]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from callgate_rules.provenance import (
    Thresholds,
    is_evidence,
    matching,
    read_conversation,
    text_values,
    trace_sources,
)
from callgate_rules.provenance.in_words import InWords, read_in_words
from callgate_rules.provenance.matching import fold
from callgate_rules.provenance.origins import trace_origins
from callgate_rules.provenance.text_values import parts_of

THRESHOLDS = Thresholds()
REPEATED = {
    "digit words": "one two three four ",
    "a token in words, over and over": "one a seven b three d ",
    "cardinals": "one thousand two hundred and five ",
    "mixed words, numerals, NATO": "twenty-five hundred nine eight 7 x-ray alpha 1.2 thousand ",
    "single letters": "a ",
}


def timed(work: Callable[[], Any], runs: int = 15) -> float:
    fastest = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        fastest = min(fastest, time.perf_counter() - start)
    return fastest


def nothing_in_words(folded: str) -> list[InWords]:
    return []


def with_and_without(work: Callable[[], Any], runs: int = 15) -> tuple[float, float]:
    """The fastest run of ``work`` with the words read, and without, runs alternating."""
    with_words = without = float("inf")
    for _ in range(runs):
        with_words = min(with_words, timed(work, 1))
        text_values.read_in_words = matching.read_in_words = nothing_in_words  # type: ignore[assignment]
        try:
            without = min(without, timed(work, 1))
        finally:
            text_values.read_in_words = matching.read_in_words = read_in_words
    return with_words, without


def first_proposal(text: str) -> None:
    """Provenance and origins of one argument, on a conversation read afresh."""
    messages = [{"role": "user", "content": "Summarise the channel"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                 "function": {"name": "read_channel", "arguments": json.dumps({"c": "x"})}}]},
                {"role": "tool", "tool_call_id": "c1", "content": text + " #" + str(time.time())}]
    arguments = {"amount": 1205, "body": "key 1a7b3d"}
    conversation = read_conversation(messages)
    trace_sources(arguments, conversation, [], THRESHOLDS)
    trace_origins(arguments, conversation, [], lambda v: is_evidence(v, THRESHOLDS))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=20_000, help="characters of each text")
    size = parser.parse_args().size
    prose = Path("docs/how-to/injection-resistance.md").read_text()
    texts = {name: (unit * (size // len(unit) + 1))[:size] for name, unit in REPEATED.items()}
    texts["ordinary prose (a docs page)"] = (prose * (size // len(prose) + 1))[:size]
    print(f"{size:,} characters per text; the fastest of 15 runs, in ms: without reading "
          "words → with")
    print(f"{'text':36} {'read_in_words':>14} {'parts_of':>16} {'1st proposal':>16}")
    for name, text in texts.items():
        folded = fold(text)
        alone = timed(lambda: read_in_words(folded)) * 1e3  # noqa: B023
        parts = with_and_without(lambda: parts_of(text))  # noqa: B023  (over 4 kB: not cached)
        proposal = with_and_without(lambda: first_proposal(text))  # noqa: B023
        print(f"{name:36} {alone:14.2f} {parts[1] * 1e3:7.2f} → {parts[0] * 1e3:6.2f} "
              f"{proposal[1] * 1e3:7.2f} → {proposal[0] * 1e3:6.2f}")


if __name__ == "__main__":
    main()
