"""A write finished over ``/v1/finish`` names the rule that allowed it — in the answer and
in the decision log — even when the host does not send the session again (a real
``callgate serve`` process, SQLite)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from .conftest import DANA, ON_FILE, SESSION, payment, start_server

pytestmark = pytest.mark.integration
ALLOWING_RULE = "support-desk-access/payments-by-authenticated-agents"


def test_a_finished_write_names_the_rule_that_allowed_it(documents: Path,
                                                        tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    server = start_server(documents, f"sqlite:///{tmp_path / 'r.db'}", "--decision-log",
                          str(log))
    try:
        with server.client() as client:
            step = client.post("/v1/claim", json={
                "model_output": payment(), "actor": DANA, "session": SESSION,
                "request_id": f"req-{uuid.uuid4().hex[:8]}"}).json()
            assert step["action"] == "execute", step
            done = client.post("/v1/finish", json={  # no session: the lease names the rule
                "operation_id": step["operation_id"], "lease": step["lease"], "actor": DANA,
                "result": {"iban": ON_FILE, "id": "pay-1"}}).json()
    finally:
        server.stop()
    assert done["decision"]["route"] == "return_result"
    assert done["decision"]["rule"] == ALLOWING_RULE
    finished = [json.loads(line) for line in log.read_text().splitlines()
                if '"return_result"' in line]
    assert finished and all(record.get("rule") == ALLOWING_RULE for record in finished), \
        finished
