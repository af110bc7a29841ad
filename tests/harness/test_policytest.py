"""`callgate test`: PolicyTest files, expected against actual, coverage, shadow modes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from callgate_rules.cli import main

REPO = Path(__file__).resolve().parents[2]


def invoke(*args: str) -> Any:
    """``callgate test`` with the reference contracts and ``args`` (more PATHS, options)."""
    return CliRunner().invoke(main, ["test", str(REPO / "contracts"), *args])


def setup(tmp_path: Path, cases: str, access_extra: str = "") -> Path:
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(REPO / "policies" / "routing.yaml", policies / "routing.yaml")
    access = (REPO / "policies" / "access.yaml").read_text()
    (policies / "access.yaml").write_text(access + access_extra)
    (policies / "cases_test.yaml").write_text(f"""\
apiVersion: callgate/v1
kind: PolicyTest
metadata: {{name: t, description: t}}
spec:
  actor: {REPO / 'examples' / 'actors' / 'dana.yaml'}
  world: {REPO / 'examples' / 'world.yaml'}
  now: "2026-11-29T12:00:00Z"
  cases:
{cases}""")
    return policies


def test_the_reference_tests_pass_with_full_coverage() -> None:
    result = CliRunner().invoke(main, ["test", str(REPO / "contracts"), str(REPO / "policies"),
                                       "--coverage", "--fail-under", "100"])
    assert result.exit_code == 0, result.output
    assert "total: 100.0%" in result.output
    assert result.output.rstrip().endswith("0 failed")


def test_a_failing_case_shows_expected_against_actual(tmp_path: Path) -> None:
    policies = setup(tmp_path, """\
    - name: wrong expectations
      propose: {name: createFollowUp, arguments: {ticketId: T-2001, assigneeId: U-7, dueAt: "2026-12-15T09:00:00Z"}}
      expect: {route: replan, error_class: not_found, rule: x, writes: 1, agent_message_contains: globex}
""")
    result = invoke(str(policies))
    assert result.exit_code == 1
    file = policies / "cases_test.yaml"
    assert f"FAIL {file}:9:7: wrong expectations" in result.output
    assert "route: expected 'replan', got 'refuse'" in result.output
    assert "error_class: expected 'not_found', got 'forbidden'" in result.output
    assert "rule: expected 'x', got 'default-deny'" in result.output
    assert "writes: expected 1, got 0" in result.output
    assert "agent_message: expected to contain 'globex'" in result.output
    assert result.output.rstrip().endswith("0 passed, 1 failed")


def test_coverage_names_what_no_case_exercised(tmp_path: Path) -> None:
    policies = setup(tmp_path, """\
    - name: only the happy path
      propose: {name: getTicketStatus, arguments: {ticketId: T-1001}}
      expect: {route: return_result}
""")
    result = invoke(str(policies), "--coverage",
                    "--fail-under", "90")
    assert result.exit_code == 1  # all cases pass, but coverage is below 90%
    assert "1 passed, 0 failed" in result.output
    assert "ToolContract/createFollowUp: 0/4 rules fired; never fired: assignee-in-team, " \
           "due-in-future, ticket-not-deleted, ticket-open" in result.output
    assert "AccessPolicy/support-desk-access: 1/8 rules fired" in result.output
    data = json.loads(invoke(str(policies), "--coverage",
                             "--format", "json").output)
    documents = data["coverage"]["documents"]
    assert "ticket-open" in documents["ToolContract/createFollowUp"]["rules_not_exercised"]
    assert "review" in documents["RoutingTable/support-desk-routing"]["routes_not_produced"]


def test_a_rule_in_audit_mode_is_shown_but_changes_nothing(tmp_path: Path) -> None:
    policies = setup(tmp_path, """\
    - name: a new deny rule in shadow
      propose: {name: getTicketStatus, arguments: {ticketId: T-1001}}
      expect: {route: return_result, error_class: null}
""", access_extra="""\
    - name: no-reads-on-weekends
      effect: deny
      tools: [getTicketStatus]
      when: "true"
      mode: audit
""")
    result = invoke(str(policies))
    assert result.exit_code == 0, result.output
    assert "audit: support-desk-access/no-reads-on-weekends would give forbidden" \
        in result.output


def test_bad_test_files_are_one_line(tmp_path: Path) -> None:
    policies = setup(tmp_path, """\
    - name: neither propose nor steps
      expect: {route: refuse}
""")
    result = invoke(str(policies))
    assert result.exit_code == 2
    assert f"{policies / 'cases_test.yaml'}:9:7: a test case needs either propose" \
        in result.output
    assert "Traceback" not in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke(str(empty)).exit_code == 2


def test_only_test_files_named_run_against_contracts_and_policies_here(
        tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, ["test", "policies/tests/routing_test.yaml"])
    assert result.exit_code == 0, result.output
    assert "support_desk_test" not in result.output
    every = CliRunner().invoke(main, ["test"])
    assert int(every.stdout.split()[-4]) > int(result.stdout.split()[-4])


def test_a_missing_actor_file_is_named_with_its_place(tmp_path: Path) -> None:
    policies = setup(tmp_path, """\
    - name: a case
      actor: ../examples/actors/dan.yaml
      propose: {name: getTicketStatus, arguments: {ticketId: T-1001}}
      expect: {route: return_result}
""")
    file = policies / "cases_test.yaml"
    result = invoke(str(policies))
    assert result.exit_code == 2
    assert result.stderr == (
        f"callgate: {file}:10:14: the actor file ../examples/actors/dan.yaml is not there "
        f"(looked for {tmp_path / 'examples' / 'actors' / 'dan.yaml'}; a path is relative "
        f"to the folder of {file})\n")
    assert "Errno" not in result.output and "Traceback" not in result.output
    # lint finds it first, at the same place, without running anything
    linted = CliRunner().invoke(main, ["lint", str(REPO / "contracts"), str(policies)])
    assert linted.exit_code == 1
    assert (f"{file}:10:14: error missing-test-file PolicyTest actor: the file "
            "../examples/actors/dan.yaml is not there") in linted.stdout
