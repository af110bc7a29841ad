"""A separate process that runs one proposal through a real gate, for race and crash tests.

The destination is its own SQLite file (``writes`` table) so that every process sees the
same one; it does not deduplicate, so a second execution would show as a second row.

    python -m tests.processes.worker STORE_URL DESTINATION REQUEST_ID [--crash-after-apply]
        [--now ISO] [--start-at EPOCH]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from callgate_rules import Gate, WorldResolvers, open_store
from callgate_rules.pipeline.execute import ExecutionRequest

REPO = Path(__file__).resolve().parents[2]
ACTOR = {"id": "U-7", "tenant": "acme", "role": "agent", "teams": ["billing"]}
CALL = {"name": "createFollowUp",
        "arguments": {"ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}}


def destination(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE IF NOT EXISTS writes (operation_id TEXT, body TEXT, "
                       "pid INTEGER)")
    return connection


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("receipts")
    parser.add_argument("destination")
    parser.add_argument("request_id")
    parser.add_argument("--crash-after-apply", action="store_true")
    parser.add_argument("--now", default="2026-11-29T12:00:00+00:00")
    parser.add_argument("--start-at", type=float, default=0.0)
    options = parser.parse_args()
    import yaml

    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
    now = datetime.fromisoformat(options.now)

    def create_follow_up(request: ExecutionRequest) -> Any:
        result = {"id": f"F-{os.getpid()}", **request.arguments,
                  "operationId": request.operation_id}
        destination(options.destination).execute(
            "INSERT INTO writes VALUES (?, ?, ?)",
            (request.operation_id, json.dumps(result), os.getpid()))
        if options.crash_after_apply:
            os._exit(17)  # dies after the destination applied, before any receipt is written
        return result

    def find(tool: str, operation_id: str) -> Any:
        row = destination(options.destination).execute(
            "SELECT body FROM writes WHERE operation_id = ?", (operation_id,)).fetchone()
        return json.loads(row[0]) if row else None

    gate = Gate.from_paths(REPO / "contracts", REPO / "policies",
                           resolvers=WorldResolvers(world),
                           executors={"createFollowUp": create_follow_up}, finder=find,
                           store=open_store(options.receipts),
                           clock=lambda: now, sleep=lambda s: time.sleep(min(s, 0.05)))
    while time.time() < options.start_at:  # line the processes up for the race
        time.sleep(0.001)
    decision = gate.handle(CALL, actor=ACTOR, request_id=options.request_id)
    print(json.dumps({"route": str(decision.route),
                      "error_class": str(decision.error_class) if decision.error_class else None,
                      "detail": decision.log.get("detail"),
                      "operation_id": decision.operation_id}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
