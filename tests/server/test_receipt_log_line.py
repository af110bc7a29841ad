"""A write the host executes through the decision API: its receipt names its decision's log
line, shown by ``GET /v1/operations/{id}`` and ``callgate receipts show``, and held against
the log by ``callgate log verify --store``, which catches a line edited (or dropped) and
the chain recomputed after it, what the chain alone cannot see without checkpoints."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("fastapi", reason="the server extra: pip install 'callgate-rules[server]'")

from starlette.testclient import TestClient  # noqa: E402

from callgate_rules.cli import main  # noqa: E402
from callgate_rules.decision_log import GENESIS, line_hash  # noqa: E402
from callgate_rules.server import ServiceSettings, create_app  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DANA = {"id": "U-7", "tenant": "acme", "role": "agent", "teams": ["billing"],
        "organizations": ["org-northwind"]}
ARGUMENTS = {"ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2030-12-15T09:00:00Z"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Path, str]]:
    log, store = tmp_path / "decisions.jsonl", f"sqlite:///{tmp_path / 'r.db'}"
    settings = ServiceSettings(paths=(str(REPO / "contracts"), str(REPO / "policies")),
                               store=store, world=str(REPO / "examples" / "world.yaml"),
                               decision_log=str(log))
    with TestClient(create_app(settings)) as client:
        yield client, log, store


def execute(client: TestClient, note: str) -> str:
    """A follow-up claimed, executed by the host and finished: its operation ID."""
    step = client.post("/v1/claim", json={
        "model_output": {"name": "createFollowUp", "arguments": {**ARGUMENTS, "note": note}},
        "actor": DANA, "session": {"authenticated": True},
        "request_id": f"req-{uuid.uuid4().hex[:8]}"}).json()
    assert step["action"] == "execute", step
    done = client.post("/v1/finish", json={
        "operation_id": step["operation_id"], "lease": step["lease"], "actor": DANA,
        "result": {"id": f"F-{note}", **ARGUMENTS}}).json()
    assert done["decision"]["route"] == "return_result", done
    return str(step["operation_id"])


def rechained(lines: list[str]) -> list[str]:
    """``lines`` with every chain recomputed, as someone who edits a log without the
    checkpoints' key would do."""
    out, head = [], GENESIS
    for seq, text in enumerate(lines, start=1):
        record: dict[str, Any] = json.loads(text)
        record["chain"] = {"seq": seq, "prev": head}
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        out.append(text)
        head = line_hash(text)
    return out


def verify(log: Path, store: str) -> Any:
    return CliRunner().invoke(main, ["log", "verify", str(log), "--store", store])


def test_the_receipt_names_the_line_the_api_and_the_cli_show_it(
        served: tuple[TestClient, Path, str]) -> None:
    client, log, store = served
    operation = execute(client, "one")
    finish_line = next(text for text in log.read_text().splitlines()
                       if json.loads(text).get("operation_id") == operation
                       and json.loads(text)["route"] == "return_result")
    shown = client.get(f"/v1/operations/{operation}")
    assert shown.status_code == 200
    assert shown.json()["log_line"] == line_hash(finish_line)
    assert shown.json()["state"] == "succeeded" and "arguments" not in shown.json()
    assert client.get("/v1/operations/op_nothing").status_code == 404
    printed = CliRunner().invoke(main, ["receipts", "show", operation, "--store", store])
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.output)["log_line"] == line_hash(finish_line)
    verified = verify(log, store)
    assert verified.exit_code == 0, verified.output
    assert f"1 receipt(s) name their line in {store}" in verified.output


def test_an_edited_line_with_its_chain_recomputed_is_caught_by_its_receipt(
        served: tuple[TestClient, Path, str]) -> None:
    client, log, store = served
    execute(client, "one")
    execute(client, "two")
    lines = log.read_text().splitlines()
    edited = [text.replace('"id":"F-two"', '"id":"F-three"') for text in lines]
    assert edited != lines
    log.write_text("\n".join(rechained(edited)) + "\n")
    chain_only = CliRunner().invoke(main, ["log", "verify", str(log)])
    assert chain_only.exit_code == 0  # without a key, a recomputed chain holds
    caught = verify(log, store)
    assert caught.exit_code == 1
    assert "names another line" in caught.output and f"{log}:{len(lines)}:" in caught.output


def test_a_dropped_line_with_its_chain_recomputed_breaks_the_next_receipt(
        served: tuple[TestClient, Path, str]) -> None:
    """Every line's hash covers its chain, so recomputing the chain after a dropped line
    changes the line of every later executed write: its receipt names the old one."""
    client, log, store = served
    dropped = execute(client, "one")
    execute(client, "two")
    lines = log.read_text().splitlines()
    kept = [text for text in lines if json.loads(text).get("operation_id") != dropped
            or json.loads(text)["route"] != "return_result"]
    log.write_text("\n".join(rechained(kept)) + "\n")
    caught = verify(log, store)
    assert caught.exit_code == 1
    assert f"{log}:{len(kept)}: the receipt of" in caught.output


def test_lines_cut_off_the_end_are_noted_by_their_receipts(
        served: tuple[TestClient, Path, str]) -> None:
    """Cutting lines off the end leaves the chain whole; the receipt of the write whose
    line went names a line the log no longer has."""
    client, log, store = served
    execute(client, "one")
    cut = execute(client, "two")
    lines = log.read_text().splitlines()
    last = max(number for number, text in enumerate(lines)
               if json.loads(text).get("operation_id") == cut)
    log.write_text("\n".join(lines[:last]) + "\n")
    noted = verify(log, store)
    assert noted.exit_code == 0, noted.output
    assert "1 receipt(s) name a line that is not in these files" in noted.output
    assert cut in noted.output and "1 receipt(s) name their line" in noted.output
