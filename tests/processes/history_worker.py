"""A separate process that pays instalments in one named run through a real gate, for the
run-lease race and crash tests (``test_history_processes.py``).

The banking example's ``sendMoney`` (at most 1,500 a day per recipient in a run, over
``history``); the bank is its own SQLite file (``writes`` table, shared by every process,
never deduplicating), and each payment takes ``--pay-seconds`` there, so that a decision
racing it would read a history without it. Prints one JSON line per proposal.

    python -m tests.processes.history_worker STORE_URL BANK RUN_ID [--instalments N]
        [--amount A] [--start-at EPOCH] [--lease SECONDS] [--hang-in-lookup MARKER]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from callgate_rules import Gate, open_store
from callgate_rules.documents.compiler import load
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.execute import ExecutionRequest
from callgate_rules.pipeline.gate import utc_now
from tests.processes.worker import destination

REPO = Path(__file__).resolve().parents[2]
BANKING = REPO / "examples" / "banking"
HOLDER = {"id": "U-1", "role": "holder"}
PAYEE = "DE89370400440532013000"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("receipts")
    parser.add_argument("bank")
    parser.add_argument("run_id")
    parser.add_argument("--instalments", type=int, default=1)
    parser.add_argument("--amount", type=float, default=250.0)
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--lease", type=float, default=60.0)
    parser.add_argument("--pay-seconds", type=float, default=0.02)
    parser.add_argument("--hang-in-lookup", default=None,
                        help="write this file from the look-up (the run's lease is held "
                             "then) and hang there, to be killed")
    options = parser.parse_args()

    def pay(request: ExecutionRequest) -> Any:
        time.sleep(options.pay_seconds)
        destination(options.bank).execute(
            "INSERT INTO writes VALUES (?, ?, ?)",
            (request.operation_id, json.dumps(dict(request.arguments)), os.getpid()))
        return {"id": f"tx-{request.operation_id[:8]}"}

    def payees(field: str, value: Any) -> list[dict[str, Any]]:
        if options.hang_in_lookup:
            Path(options.hang_in_lookup).write_text(str(os.getpid()))
            time.sleep(3600)  # killed here, holding the run's lease
        return [{"id": "PY-1", "owner": "U-1", "iban": PAYEE}] if value == PAYEE else []

    config = load([BANKING / "contracts", BANKING / "policies"])
    config = replace(config, routing=replace(config.routing, lease_seconds=options.lease))
    gate = Gate(config, executors={"sendMoney": pay}, resolvers={"payees": payees},
                store=open_store(options.receipts), secret=b"history-process-secret")
    while time.time() < options.start_at:  # line the processes up for the race
        time.sleep(0.001)
    for number in range(options.instalments):
        started = time.time()
        decision = gate.handle(
            {"name": "sendMoney", "arguments": {"recipient": PAYEE, "amount": options.amount,
                                                "subject": f"{os.getpid()} #{number}"}},
            actor=HOLDER, request_id=f"{os.getpid()}-{number}",
            run=Run(started_at=utc_now(), run_id=options.run_id))
        print(json.dumps({"route": str(decision.route), "started": started,
                          "ended": time.time(), "rule": decision.rule,
                          "error_class": str(decision.error_class or "")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
