"""A separate process that proposes or confirms one payment of a named run through a real
gate on a shared store, for ``test_approval_processes.py``. Prints one JSON line.

    python -m tests.processes.approval_worker STORE_URL RUN_ID propose RECIPIENT MEMO
    python -m tests.processes.approval_worker STORE_URL RUN_ID confirm TOKEN PERSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from callgate_rules import Gate, open_store
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.execute import ExecutionRequest
from callgate_rules.pipeline.gate import utc_now

DOCUMENTS = Path(__file__).resolve().parents[1] / "data" / "approval_covers"
HOLDER = {"id": "U-1", "role": "holder"}


def main() -> int:
    store_url, run_id, action, first, second = sys.argv[1:6]

    def pay(request: ExecutionRequest) -> Any:
        return {"id": f"tx-{request.operation_id[:8]}"}

    store = open_store(store_url)
    gate = Gate.from_paths(DOCUMENTS, executors={"pay": pay}, store=store,
                           secret=b"approval-processes-secret")
    try:
        if action == "propose":
            decision = gate.handle(
                {"name": "pay", "arguments": {"recipient": first, "amount": 50,
                                              "memo": second}},
                actor=HOLDER, request_id=f"{run_id}-{second}",
                run=Run(started_at=utc_now(), run_id=run_id))
        else:
            decision = gate.confirm(first, actor=HOLDER, confirmed_by=second)
        print(json.dumps({
            "route": str(decision.route), "rule": decision.rule,
            "operation_id": decision.operation_id, "token": decision.confirmation_token,
            "covered": [entry.detail for entry in decision.trace
                        if entry.result == "covered"],
            "covered_by": decision.log.get("covered_by")}))
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
