"""The execution-side commands: simulate, review, receipts — and the host example."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from callgate_rules.cli import main
from callgate_rules.store import NewOperation, NewReviewItem, ReceiptState, SqliteStore

REPO = Path(__file__).resolve().parents[2]


def test_simulate_runs_the_shipped_suite() -> None:
    # the documents' folders and the scenarios' folder, told apart by what the files hold
    result = CliRunner().invoke(main, ["simulate", str(REPO / "contracts"),
                                       str(REPO / "policies"),
                                       str(REPO / "examples" / "scenarios")])
    assert result.exit_code == 0, result.output
    assert "SCENARIO" in result.output and "ROUTE" in result.output
    assert "a timeout after sending" in result.output
    assert result.output.rstrip().endswith("0 failed")
    assert result.stderr == ""


def test_simulate_and_test_find_an_examples_documents_tests_and_scenarios() -> None:
    banking = REPO / "examples" / "banking"
    simulated = CliRunner().invoke(main, ["simulate", str(banking)])
    assert simulated.exit_code == 0, simulated.output
    assert "three instalments of 600 under a 1,000 limit per payment" in simulated.stdout
    assert simulated.stdout.rstrip().endswith("6 passed, 0 failed")
    tested = CliRunner().invoke(main, ["test", str(banking)])
    assert tested.exit_code == 0, tested.output
    assert tested.stdout.rstrip().endswith("4 passed, 0 failed")


def test_simulate_keeps_the_old_options_for_a_release() -> None:
    banking = REPO / "examples" / "banking"
    old = ["simulate", str(banking / "scenarios"), "--contracts", str(banking / "contracts"),
           "--policies", str(banking / "policies")]
    result = CliRunner().invoke(main, old)
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("6 passed, 0 failed")
    assert result.stderr == (
        f"callgate: --contracts {banking / 'contracts'} --policies {banking / 'policies'} is "
        "deprecated and goes in the next release; name the documents as PATHS: callgate "
        f"simulate {banking / 'contracts'} {banking / 'policies'}\n")


def test_simulate_json_and_a_failing_expectation(tmp_path: Path) -> None:
    scenario = tmp_path / "wrong.yaml"
    scenario.write_text(f"""\
name: expects too much
actor: {REPO / 'examples' / 'actors' / 'dana.yaml'}
world: {REPO / 'examples' / 'world.yaml'}
steps:
  - propose: {{name: createFollowUp, arguments: {{ticketId: T-1001, assigneeId: U-7, dueAt: "2026-12-15T09:00:00Z"}}}}
    expect: {{route: refuse, writes: 2}}
""")
    runner = CliRunner()
    documents = [str(REPO / "contracts"), str(REPO / "policies")]
    result = runner.invoke(main, ["simulate", *documents, "--scenarios", str(scenario),
                                  "--format", "json"])
    assert result.exit_code == 1
    [record] = json.loads(result.output)
    assert record["name"] == "expects too much" and record["passed"] is False
    assert record["route"] == "return_result" and record["writes"] == 1
    assert any("route: expected 'refuse', got 'return_result'" in f
               for f in record["failures"])
    text = runner.invoke(main, ["simulate", *documents, str(scenario)])
    assert f"{scenario}:1:1: expects too much" in text.output
    assert "writes: expected 2, got 1" in text.output
    assert "0 passed, 1 failed" in text.output


def test_simulate_bad_scenario_is_one_line(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: x\nsteps:\n  - propose: {}\n    expect: {rout: refuse}\n")
    result = CliRunner().invoke(main, ["simulate", str(REPO / "contracts"),
                                       str(REPO / "policies"), str(scenario)])
    assert result.exit_code == 2
    assert f"{scenario}:4:14: unknown expectation 'rout'" in result.output
    assert "Traceback" not in result.output


def seed_store(path: Path) -> str:
    store = SqliteStore(path)
    now = datetime.now(UTC)
    op = NewOperation("op_1", "r1", "createFollowUp", "1.0.0", "h", {"ticketId": "T-1"},
                      {"id": "U-7"})
    store.claim(op, worker="w", lease=timedelta(seconds=60), now=now)
    store.finish("op_1", worker="w", state=ReceiptState.OUTCOME_UNKNOWN, now=now,
                 error_class="unknown_outcome")
    item = store.open_review(NewReviewItem("createFollowUp", "reconcile_failed",
                                           "createFollowUp op_1: not found", "op_1"), now=now)
    store.close()
    return item.review_id


def test_review_list_and_resolve(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'receipts.sqlite3'}"
    review_id = seed_store(tmp_path / "receipts.sqlite3")
    runner = CliRunner()
    listed = runner.invoke(main, ["review", "list", "--store", url])
    assert listed.exit_code == 0 and review_id in listed.output
    assert "reconcile_failed" in listed.output
    taken = runner.invoke(main, ["review", "take", "--by", "lee", "--store", url])
    assert taken.exit_code == 0 and f"{review_id} taken by lee" in taken.output
    assert "no open review item" in runner.invoke(
        main, ["review", "take", "--by", "kim", "--store", url]).output
    resolved = runner.invoke(main, ["review", "resolve", review_id, "--as", "succeeded",
                                    "--note", "found it in the CRM", "--by", "lee",
                                    "--store", url])
    assert resolved.exit_code == 0, resolved.output
    assert "resolved as succeeded by lee" in resolved.output
    store = SqliteStore(tmp_path / "receipts.sqlite3")
    assert store.get("op_1").state == ReceiptState.SUCCEEDED
    store.close()
    assert "empty" in runner.invoke(main, ["review", "list", "--store", url]).output
    again = runner.invoke(main, ["review", "resolve", review_id, "--as", "failed", "--note",
                                 "x", "--store", url])
    assert again.exit_code == 2 and "already resolved" in again.output


def test_receipts_purge_and_migrate(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'receipts.sqlite3'}"
    runner = CliRunner()
    migrated = runner.invoke(main, ["receipts", "migrate", "--store", url])
    assert migrated.exit_code == 0 and "up to date" in migrated.output
    store = SqliteStore(tmp_path / "receipts.sqlite3")
    old = datetime.now(UTC) - timedelta(days=60)
    op = NewOperation("op_old", "r", "createFollowUp", "1.0.0", "h", {}, {})
    store.claim(op, worker="w", lease=timedelta(seconds=60), now=old)
    store.finish("op_old", worker="w", state=ReceiptState.SUCCEEDED, now=old, result={})
    store.close()
    kept = runner.invoke(main, ["receipts", "purge", "--store", url, "--older-than", "90d"])
    assert "purged 0 record(s)" in kept.output
    purged = runner.invoke(main, ["receipts", "purge", "--store", url, "--older-than", "30d"])
    assert purged.exit_code == 0 and "purged 1 record(s)" in purged.output
    bad = runner.invoke(main, ["receipts", "purge", "--store", "mysql://x"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_receipts_purge_takes_the_retention_from_the_documents(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'receipts.sqlite3'}"
    routing = tmp_path / "policies" / "routing.yaml"
    routing.parent.mkdir()
    routing.write_text((REPO / "policies" / "routing.yaml").read_text().replace(
        "retention: 720h", "retention: 48h"))
    runner = CliRunner()
    done = runner.invoke(main, ["receipts", "purge", str(REPO / "contracts"),
                                str(tmp_path / "policies"), "--store", url])
    assert done.exit_code == 0, done.output
    assert "older than 48h" in done.stdout
    # documents with errors stop the purge: the wrong retention would delete too much
    routing.write_text(routing.read_text().replace("retention: 48h", "retention: soon"))
    broken = runner.invoke(main, ["receipts", "purge", str(REPO / "contracts"),
                                  str(tmp_path / "policies"), "--store", url])
    assert broken.exit_code == 2 and "purged" not in broken.output
    assert f"{routing}:" in broken.stderr


def test_host_example_runs_the_full_loop() -> None:
    result = subprocess.run([sys.executable, "examples/support_desk/app.py"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "gate: regenerate invalid_argument" in result.stdout
    assert "gate: await_confirmation" in result.stdout
    assert "confirmed by U-7: return_result" in result.stdout
    assert "writes at the destination: 2" in result.stdout
