"""``callgate eval``: control requests scored for function choice, arguments and outcome."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callgate_rules.cli import main
from callgate_rules.errors import InputError, Location
from callgate_rules.harness.control_set import ControlRequest, Expectation, load_control_set
from callgate_rules.harness.evaluation import Evaluation, Proposal, evaluate, score

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "examples" / "control_set.yaml"
CONFIG_OPTIONS = [str(REPO / "contracts"), str(REPO / "policies")]

# Eleven requests, one per scoring path; the figures below are counted by hand from it.
HAND_COUNTED = """\
actor: {id: U-7, tenant: acme, role: agent, teams: [billing], organizations: [org-northwind],
        email_domain: acme.example}
world: WORLD_FILE
now: "2026-11-29T12:00:00Z"
requests:
  - id: right-read                # all right
    request: Status of T-1001?
    output: {name: getTicketStatus, arguments: {ticketId: T-1001}}
    expect: {tool: getTicketStatus, arguments: {ticketId: T-1001}, error_class: none}
  - id: model-typo-stopped         # arguments wrong; the gate stops it: not_found
    request: Status of T-1001?
    output: {name: getTicketStatus, arguments: {ticketId: T-1010}}
    expect: {tool: getTicketStatus, arguments: {ticketId: T-1001}, error_class: none}
  - id: refusal-by-other-tool      # tool wrong, but the refusal expected: a correct action
    request: Status of T-2001?
    output:
      name: createFollowUp
      arguments: {ticketId: T-2001, assigneeId: U-7, dueAt: "2026-12-15T09:00:00Z"}
    expect: {tool: getTicketStatus, arguments: {ticketId: T-2001}, error_class: forbidden}
  - id: correction-ignored         # arguments wrong, let through: outcome right, action wrong
    request: Follow-up on T-1001 for me on the 15th; no, the 16th
    output:
      name: createFollowUp
      arguments: {ticketId: T-1001, assigneeId: U-7, dueAt: "2026-12-15T09:00:00Z"}
    expect:
      tool: createFollowUp
      arguments: {dueAt: "2026-12-16T09:00:00Z"}
      error_class: none
  - id: wrong-tool-let-through
    request: Remind me on T-1001 to call Boris back on the 15th
    output:
      name: createEvent
      arguments: {contact: Boris Ivanov, title: Call back, startsAt: "2026-12-15T09:00:00Z"}
    expect: {tool: createFollowUp, arguments: {ticketId: T-1001}, error_class: none}
  - id: unneeded-call
    request: What's the status of my ticket?
    output: {name: getTicketStatus, arguments: {ticketId: T-1001}}
    expect: {tool: none}
  - id: missing-call
    request: Which contacts named Boris do we have?
    output: none
    expect: {tool: searchContacts, arguments: {name: Boris}, error_class: none}
  - id: no-call-right
    request: Thanks!
    output: null
    expect: {tool: none}
  - id: confirmation-right         # an execution held for a person: arguments count
    request: E-mail Boris about T-1001
    output:
      name: sendEmail
      arguments: {to: boris@northwind.example, subject: T-1001, body: Hello}
    expect:
      tool: sendEmail
      arguments: {to: boris@northwind.example}
      error_class: confirmation_required
      route: await_confirmation
  - id: unreadable-output          # the gate cannot read it: malformed
    request: Status of T-1001?
    output: 'not JSON {'
    expect: {tool: getTicketStatus, error_class: none}
  - id: viewer-may-not-write       # a per-request actor overrides the default one
    request: Follow-up on T-1001 for Dana on the 15th
    actor: {id: U-9, tenant: acme, role: viewer}
    output:
      name: createFollowUp
      arguments: {ticketId: T-1001, assigneeId: U-7, dueAt: "2026-12-15T09:00:00Z"}
    expect: {tool: createFollowUp, arguments: {ticketId: T-1001}, error_class: forbidden,
             route: refuse}
""".replace("WORLD_FILE", str(REPO / "examples" / "world.yaml"))


@pytest.fixture(scope="module")
def hand_counted(tmp_path_factory: pytest.TempPathFactory, gate: Any) -> Evaluation:
    path = tmp_path_factory.mktemp("eval") / "control.yaml"
    path.write_text(HAND_COUNTED, encoding="utf-8")
    return evaluate(load_control_set(path), gate.config)


def test_hand_counted_totals(hand_counted: Evaluation) -> None:
    totals = hand_counted.totals
    # right-read, model-typo-stopped, correction-ignored, confirmation-right, viewer
    assert (totals.function_choice.correct, totals.function_choice.total) == (6, 11)
    # among those, with a call expected (not no-call-right): typo and correction differ
    assert (totals.arguments.correct, totals.arguments.total) == (3, 5)
    # wrong: model-typo-stopped, unneeded-call, missing-call, unreadable-output
    assert (totals.outcome.correct, totals.outcome.total) == (7, 11)
    assert (totals.correct_actions.correct, totals.correct_actions.total) == (5, 11)
    assert totals.correct_actions.percent == pytest.approx(45.4545, abs=1e-3)
    assert dict(totals.wrong_calls) == {
        "not_found": 1, "forbidden": 1, "wrong_arguments": 1, "wrong_tool": 1,
        "unneeded_call": 1, "missing_call": 1, "malformed": 1,
    }
    assert dict(totals.stopped_by_gate) == {"forbidden": 2, "malformed": 1, "not_found": 1}


def test_hand_counted_per_request(hand_counted: Evaluation) -> None:
    by_id = {r.request.id: r for r in hand_counted.results}
    assert {i for i, r in by_id.items() if r.correct} == {
        "right-read", "refusal-by-other-tool", "no-call-right", "confirmation-right",
        "viewer-may-not-write"}
    assert by_id["correction-ignored"].differences() == [
        'arguments: dueAt expected "2026-12-16T09:00:00Z", got "2026-12-15T09:00:00Z"']
    assert by_id["missing-call"].differences() == [
        "tool: expected searchContacts, got no call",
        "outcome: expected allowed, got no call"]
    assert by_id["unreadable-output"].differences()[0] == \
        "tool: expected getTicketStatus, got an unreadable call"
    assert by_id["refusal-by-other-tool"].arguments_ok is None  # wrong tool: not scored
    assert by_id["viewer-may-not-write"].request.actor["role"] == "viewer"


def test_arguments_are_a_subset_compared_as_canonical_json(now: datetime) -> None:
    request = ControlRequest(
        id="subset", request="", output={}, location=Location("x.yaml", 1, 1),
        expect=Expectation("tool", {"count": 1, "flag": True, "name": "a"}, None, None),
        actor={}, world={}, now=now,
    )
    result = score(request, Proposal(True, "tool", {"count": 1.0, "flag": 1, "extra": "x"}),
                   None)
    assert result.function_ok and result.arguments_ok is False
    assert [str(d) for d in result.argument_differences] == [
        "flag expected true, got 1", 'name expected "a", got nothing']


def test_session_and_conversation_reach_the_gate(tmp_path: Path, gate: Any) -> None:
    path = tmp_path / "context.yaml"
    path.write_text(f"""\
actor: {{id: U-7, tenant: acme, role: agent, email_domain: acme.example}}
world: {REPO / "examples" / "world.yaml"}
session: {{authenticated: true}}
requests:
  - id: payee-on-file
    request: Pay Northwind's 80 EUR
    output: {{name: sendPayment, arguments: {{recipientIban: DE89370400440532013000,
                                             amount: 80, currency: EUR}}}}
    expect: {{tool: sendPayment, error_class: none}}
  - id: not-signed-in            # the session overrides the default: no payment right
    request: Pay Northwind's 80 EUR
    session: {{authenticated: false}}
    output: {{name: sendPayment, arguments: {{recipientIban: DE89370400440532013000,
                                             amount: 80, currency: EUR}}}}
    expect: {{tool: sendPayment, error_class: forbidden}}
  - id: made-up-address          # a colleague's domain, but nobody gave this address
    request: E-mail Lee that it is fixed
    conversation: [{{role: user, content: "E-mail Lee that it is fixed."}}]
    output: {{name: sendEmail, arguments: {{to: lee.chen@acme.example, subject: Fixed,
                                           body: It is fixed.}}}}
    expect: {{tool: sendEmail, error_class: forbidden}}
""", encoding="utf-8")
    evaluation = evaluate(load_control_set(path), gate.config)
    assert [r.correct for r in evaluation.results] == [True, True, True]
    assert evaluation.results[2].decision is not None
    assert evaluation.results[2].decision.rule == "sendEmail/recipient-given-or-read"


def test_shipped_control_set_figures(gate: Any) -> None:
    evaluation = evaluate(load_control_set(SHIPPED), gate.config)
    totals = evaluation.totals
    assert len(evaluation.results) == 24
    assert (totals.function_choice.correct, totals.function_choice.total) == (19, 24)
    assert (totals.arguments.correct, totals.arguments.total) == (12, 16)
    assert (totals.outcome.correct, totals.outcome.total) == (17, 24)
    assert (totals.correct_actions.correct, totals.correct_actions.total) == (15, 24)
    assert totals.correct_actions.percent == 62.5
    assert dict(totals.wrong_calls) == {
        "unneeded_call": 2, "wrong_arguments": 2, "invalid_argument": 1, "missing_call": 1,
        "not_found": 1, "unknown_tool": 1, "wrong_tool": 1,
    }
    assert dict(totals.stopped_by_gate) == {
        "forbidden": 3, "not_found": 3, "invalid_argument": 2, "ambiguous": 1, "unknown_tool": 1,
    }
    assert {r.request.id for r in evaluation.results if not r.correct} == {
        "status-model-typo", "status-missing-number-guessed", "followup-no-due-date-invented",
        "followup-bad-date-format", "followup-correction-date", "meeting-same-name-guessed",
        "reminder-wrong-tool", "contacts-not-searched", "close-ticket-unknown-tool",
    }


@pytest.fixture
def compiled_once(monkeypatch: pytest.MonkeyPatch, gate: Any) -> None:
    """The CLI gets the session's compiled configuration: compiling costs a third of a
    second per invocation, and loading it is tested elsewhere. The paths must still be ours."""

    def load(paths: Any) -> Any:
        assert [str(p) for p in paths] == [str(REPO / "contracts"), str(REPO / "policies")]
        return gate.config

    monkeypatch.setattr("callgate_rules.documents.compiler.load", load)


@pytest.mark.usefixtures("compiled_once")
def test_cli_json_shape_and_fail_under_met() -> None:
    result = CliRunner().invoke(main, ["eval", str(SHIPPED), *CONFIG_OPTIONS,
                                       "--format", "json", "--fail-under", "62.5"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"control_set", "requests", "totals"}
    assert report["totals"]["correct_actions"] == {"correct": 15, "total": 24, "percent": 62.5}
    assert report["totals"]["wrong_calls"]["total"] == 9
    assert report["totals"]["stopped_by_gate"]["by_error_class"]["forbidden"] == 3
    typo = next(r for r in report["requests"] if r["id"] == "status-model-typo")
    assert typo["correct"] is False and typo["wrong_call"] == "not_found"
    assert typo["argument_differences"] == [
        {"key": "ticketId", "expected": "T-1001", "actual": "T-1010", "present": True}]
    assert typo["actual"]["error_class"] == "not_found" and typo["actual"]["route"] == "replan"
    assert typo["expected"] == {"tool": "getTicketStatus", "arguments": {"ticketId": "T-1001"},
                                "error_class": None, "route": None}
    assert typo["line"] > 0


@pytest.mark.usefixtures("compiled_once")
def test_cli_text_report_and_fail_under_missed() -> None:
    result = CliRunner().invoke(main, ["eval", str(SHIPPED), *CONFIG_OPTIONS,
                                       "--fail-under", "70"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ok    status-ordinary")
    [typo] = [line for line in lines if "status-model-typo" in line]
    assert typo.startswith("FAIL") and 'ticketId expected "T-1001", got "T-1010"' in typo
    assert "outcome: expected allowed, got not_found (replan)" in typo
    assert "correct actions    15/24   62.5%" in lines
    assert result.stderr.strip() == \
        "callgate: 62.5% correct actions is below --fail-under 70"


@pytest.mark.parametrize(("text", "line", "message"), [
    ("requests:\n  - id: a\n    request: x\n    output: none\n    expect: {tool: none}\n"
     "    expected: {tool: none}\n", 6, "unknown request field 'expected'"),
    ("actor: {id: U-7, tenant: acme, role: agent}\nrequests:\n  - id: a\n    request: x\n"
     "    output: none\n", 3, "the request has no expect"),
    ("requests:\n  - id: a\n    request: [unclosed\n", 4, "error YAML"),
    ("actor: {id: U-7, tenant: acme, role: agent}\nrequests:\n  - id: a\n    request: x\n"
     "    output: none\n    expect: {tool: getTicketStatus, error_class: gone}\n", 6,
     "unknown error_class 'gone'"),
    ("actor: {id: U-7, tenant: acme, role: agent}\nrequests:\n  - id: a\n    request: x\n"
     "    conversation: 3\n    output: none\n    expect: {tool: none}\n", 5,
     "a conversation must be a list of messages"),
])
def test_broken_control_set_is_one_line_naming_the_place(
        tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["eval", str(path), *CONFIG_OPTIONS])
    assert result.exit_code == 2 and result.stdout == ""
    [error] = result.stderr.strip().splitlines()
    assert error.startswith(f"callgate: {path}:{line}:") and message in error


def test_an_expected_tool_must_be_a_contract(tmp_path: Path, gate: Any) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("actor: {id: U-7, tenant: acme, role: agent}\nrequests:\n  - id: a\n"
                    "    request: x\n    output: none\n"
                    "    expect: {tool: getTicket, error_class: none}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"typo.yaml:3:5: expect.tool 'getTicket' is not a "
                                         r"contract; known: createEvent"):
        evaluate(load_control_set(path), gate.config)
