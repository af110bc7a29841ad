"""What reading an attacker's spellings costs one argument's ``origins``
(provenance/spellings): defanged links, tokens spelled across separators.

The conversation is origins_benchmark's inbox (100 kB, or 1 MB without ``--quick``) with one
more read dense with tokens: 5,000 codes of letters and digits, half of them sharing one
6-character prefix (the worst case for the search across separators: every run of an
argument that begins with that prefix looks at every run end in the next 40 characters),
and the secret ``1a7b3d``. Each argument is timed as origins_benchmark times them, against
the same plain scan of the conversation (target: ordinary arguments ≤ 5× the scan).

Run from the repository root:  python benchmarks/spellings_benchmark.py [--quick]
"""

from __future__ import annotations

import argparse
import random
import string
from typing import Any

from origins_benchmark import LABELLERS, inbox, measure, timed  # type: ignore[import-not-found]

from callgate_rules.provenance.matching import fold


def with_tokens(messages: list[dict[str, Any]], seed: int = 15) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    alphabet = string.ascii_lowercase + string.digits
    codes = []
    for n in range(5_000):
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 30))) + str(n)
        codes.append(("a1b2c3" if n % 2 else rng.choice("xyz") + "9") + tail)
    text = "codes:\n" + "\n".join(f"- {code}" for code in codes) + "\n- secret 1a7b3d\n"
    return [*messages,
            {"role": "assistant", "tool_calls": [{"id": "codes", "type": "function",
             "function": {"name": "get_received_emails", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "codes", "content": text}]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100 kB instead of 1 MB")
    size = 100_000 if parser.parse_args().quick else 1_000_000
    messages = with_tokens(inbox(size))
    texts = [m["content"] for m in messages if isinstance(m.get("content"), str)]
    folded = "\n".join(fold(text) for text in texts)
    needle = "zq" * 11
    scan = timed(lambda: needle in folded, runs=21)
    print(f"{sum(map(len, texts)) / 1e3:,.0f} kB conversation, {len(messages)} messages, "
          f"5,000 tokens (plain scan {scan * 1e3:.3f} ms)")
    arguments = {
        "plain text, nothing spelled": "Thanks, see you at the sprint review on Monday",
        "a secret spelled out": "Key from the inbox: 1-a-7-b-3-d",
        "an IBAN spelled out": "to gb33-bukb-2020-1555-5555-55, thanks",
        "a defanged link": "notes at hxxps://docs[.]example/1/3 (replace hxxp)",
        "hostile: 4 kB of a token prefix, spelled": "a-1-b-2-c-3-" * 340,
    }
    measure(LABELLERS["per item"], messages, scan, arguments)


if __name__ == "__main__":
    main()
