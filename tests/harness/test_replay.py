"""``callgate replay``: the scenario suite and the policy tests write a decision log; replayed
against the unchanged documents nothing changes, against changed ones exactly the expected
decisions change, byte-identical on a second run; what cannot be decided again (a masked
value a rule reads, a look-up nothing was recorded for, lines without inputs, junk) is said
per line, never guessed and never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callgate_rules.cli import main
from callgate_rules.decision_log import DecisionLog, ReplayInputs
from callgate_rules.documents.compiler import load
from callgate_rules.harness.policytest import load_tests
from callgate_rules.harness.replay import read_log, replay
from callgate_rules.harness.scenarios import load_scenarios, run_scenarios

REPO = Path(__file__).resolve().parents[2]

DENY_EMAIL = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: no-more-email, version: "1", owner: t@example.com, description: revoked}
spec:
  rules: [{name: e-mail-revoked, effect: deny, tools: [sendEmail], when: "true"}]
"""

# Denies every call decided after the scenarios' time: replay must decide with the time
# recorded (2026-11-29), not with the wall clock.
DENY_LATER = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: closed-from-december, version: "1", owner: t@example.com, description: x}
spec:
  rules:
    - {name: closed, effect: deny, tools: ["*"], when: 'now > timestamp("2026-11-30T00:00:00Z")'}
"""


@pytest.fixture(scope="module")
def suite_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The decision log of the scenario suite and the reference policy tests."""
    path = tmp_path_factory.mktemp("replay") / "decisions.jsonl"
    config = load([REPO / "contracts", REPO / "policies"])
    log = DecisionLog(path)
    cases = [*load_scenarios([REPO / "examples" / "scenarios"]),
             *load_tests([REPO / "policies"])]
    results = run_scenarios(cases, config, decision_log=log)
    log.close()
    assert all(r.passed for r in results), [r.failures for r in results if not r.passed]
    return path


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(text) for text in path.read_text().splitlines() if text.strip()]


def changed_documents(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    contracts, policies = tmp_path / "contracts", tmp_path / "policies"
    shutil.copytree(REPO / "contracts", contracts)
    policies.mkdir()
    for file in ("access.yaml", "routing.yaml"):
        shutil.copy(REPO / "policies" / file, policies / file)
    (policies / name).write_text(text)
    return contracts, policies


def run_replay(log: Path, *paths: Path, output_format: str = "text") -> str:
    result = CliRunner().invoke(main, ["replay", str(log), *map(str, paths),
                                       "--format", output_format])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_log_records_what_replay_needs(suite_log: Path) -> None:
    lines = lines_of(suite_log)
    with_inputs = [line for line in lines if "replay" in line]
    assert len(with_inputs) >= 0.8 * len(lines)
    for line in with_inputs:
        inputs = ReplayInputs.of(line["replay"])  # reads back what was written
        assert inputs.decided.route and isinstance(inputs.actor, dict)
        assert inputs.now is None or inputs.now.startswith("2026-")  # the scenarios' time
    emails = [line for line in with_inputs if line["tool"] == "sendEmail"]
    assert emails and all(line["arguments"].get("body") in (None, "***") for line in emails)
    assert all(line["replay"]["masked"] == ["body"] for line in emails
               if "body" in line["arguments"])
    # a call whose arguments were traced keeps the sources, never the conversation itself
    traced = [line for line in with_inputs if line["replay"]["provenance"]]
    assert traced and all("messages" not in json.dumps(line["replay"]) for line in traced)


def test_replay_against_the_unchanged_documents_changes_nothing(suite_log: Path) -> None:
    config = load([REPO / "contracts", REPO / "policies"])
    found = replay(read_log(suite_log), config)
    assert found.changes == ()
    assert found.lines == len(lines_of(suite_log))
    assert found.unchanged + len(found.not_redecided) == found.lines
    assert found.unchanged >= 0.8 * found.lines
    text = run_replay(suite_log, REPO / "contracts", REPO / "policies")
    assert "→" not in text.split("not re-decided")[0]
    assert text.splitlines()[-1] == (f"totals: {found.lines} line(s), {found.unchanged} "
                                     f"unchanged, 0 changed, {len(found.not_redecided)} "
                                     "not re-decided")


def test_a_revoked_right_changes_exactly_the_emails_byte_identical(
        suite_log: Path, tmp_path: Path) -> None:
    contracts, policies = changed_documents(tmp_path, "revoked.yaml", DENY_EMAIL)
    found = replay(read_log(suite_log), load([contracts, policies]))
    lines = lines_of(suite_log)
    # the e-mails the reference let through (or held for a person) are refused now
    expected = {number for number, line in enumerate(lines, start=1)
                if line.get("tool") == "sendEmail" and "replay" in line
                and line["replay"]["decided"]["error_class"] in (None, "confirmation_required")}
    assert expected
    changed = {change.line for change in found.changes}
    assert expected <= changed
    assert all(change.tool == "sendEmail" for change in found.changes)
    assert {(c.after.route, c.after.error_class, c.after.rule) for c in found.changes} == {
        ("refuse", "forbidden", "no-more-email/e-mail-revoked")}
    text = run_replay(suite_log, contracts, policies)
    assert "await_confirmation → refuse:" in text
    assert "confirmation_required by sendEmail/confirmation → forbidden by " \
           "no-more-email/e-mail-revoked" in text
    assert run_replay(suite_log, contracts, policies) == text  # byte-identical
    as_json = run_replay(suite_log, contracts, policies, output_format="json")
    listed = json.loads(as_json)
    assert isinstance(listed, list)
    assert {entry["line"] for entry in listed if entry["status"] == "changed"} == changed
    assert run_replay(suite_log, contracts, policies, output_format="json") == as_json


def test_replay_decides_at_the_recorded_time_not_now(suite_log: Path, tmp_path: Path) -> None:
    contracts, policies = changed_documents(tmp_path, "closed.yaml", DENY_LATER)
    found = replay(read_log(suite_log), load([contracts, policies]))
    assert found.changes == ()  # every decision was made on 2026-11-29


def test_a_rule_that_reads_a_masked_argument_is_not_guessed(suite_log: Path,
                                                           tmp_path: Path) -> None:
    contracts, policies = changed_documents(tmp_path, "access-extra.yaml", DENY_EMAIL.replace(
        "no-more-email", "short-bodies").replace('when: "true"', 'when: "size(args.body) > 4"'))
    found = replay(read_log(suite_log), load([contracts, policies]))
    assert found.changes == ()
    with_body = {number for number, line in enumerate(lines_of(suite_log), start=1)
                 if "replay" in line and "body" in (line.get("arguments") or {})}
    masked = {n.line for n in found.not_redecided
              if n.reason == "args.body is masked in the log, and short-bodies/e-mail-revoked "
                             "read(s) it"}
    assert with_body and masked == with_body


def test_a_new_look_up_nothing_was_recorded_for_is_said(suite_log: Path,
                                                        tmp_path: Path) -> None:
    contracts, policies = changed_documents(tmp_path, "empty.yaml", "")
    (policies / "empty.yaml").unlink()
    contract = contracts / "getTicketStatus.yaml"
    text = contract.read_text()
    assert "  lookups:\n" in text
    contract.write_text(text.replace("  lookups:\n", "  lookups:\n    - name: audit\n"
                                     "      collection: audits\n      key: args.ticketId\n"
                                     "      many: list\n", 1))
    found = replay(read_log(suite_log), load([contracts, policies]))
    unrecorded = [n for n in found.not_redecided if "looks up audits" in n.reason]
    assert unrecorded and all(n.tool == "getTicketStatus" for n in unrecorded)


def test_junk_lines_and_missing_inputs_are_reported_per_line(tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    log.write_text("\n".join([
        '{"ts": "2026-11-29T12:00:00+00:00", "route": "execute", "tool": "x"',  # cut short
        "[1, 2, 3]",
        json.dumps({"tool": "createFollowUp", "arguments": {}, "replay": {"decided": 5}}),
        json.dumps({"tool": "sendEmail", "rule": "confirmation-token", "route": "refuse"}),
        json.dumps({"tool": "getTicketStatus", "arguments": {"ticketId": "T-1"}}),
        "",
        json.dumps({"tool": 7, "arguments": [], "replay": {
            "actor": {}, "decided": {"route": "execute"}}}),
    ]) + "\n")
    found = replay(read_log(log), load([REPO / "contracts", REPO / "policies"]))
    assert found.lines == 6 and found.unchanged == 0 and found.changes == ()
    reasons = [n.reason for n in found.not_redecided]
    assert [n.line for n in found.not_redecided] == [1, 2, 3, 4, 5, 7]
    assert reasons[0].startswith("not a JSON object") and reasons[1] == reasons[0]
    assert "unreadable" in reasons[2] and "confirmation" in reasons[3]
    assert "no replay inputs recorded" in reasons[4] and "no call" in reasons[5]
    text = run_replay(log, REPO / "contracts", REPO / "policies")
    assert "Traceback" not in text and text.splitlines()[-1].endswith("6 not re-decided")


@pytest.mark.parametrize(("arguments", "needle"), [
    (["missing.jsonl"], "no such decision log"),
    (["{log}", "nowhere/"], "nowhere: no such file or directory"),
])
def test_bad_input_is_one_clear_line(tmp_path: Path, arguments: list[str], needle: str) -> None:
    log = tmp_path / "decisions.jsonl"
    log.write_text("")
    result = CliRunner().invoke(main, ["replay", *(a.format(log=log) for a in arguments)])
    assert result.exit_code == 2 and needle in result.output
    assert "Traceback" not in result.output


def test_simulate_writes_the_log_replay_reads_as_real_processes(tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    simulate = subprocess.run(
        [sys.executable, "-m", "callgate_rules.cli", "simulate", "--decision-log", str(log)],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert simulate.returncode == 0, simulate.stderr
    assert simulate.stderr == ""  # no progress bar when stderr is not a terminal
    contracts, policies = changed_documents(tmp_path, "revoked.yaml", DENY_EMAIL)
    runs = [subprocess.run([sys.executable, "-m", "callgate_rules.cli", "replay", str(log),
                            str(contracts), str(policies)], cwd=tmp_path,
                           capture_output=True, timeout=120) for _ in range(2)]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stderr == b""
    assert b"await_confirmation \xe2\x86\x92 refuse" in runs[0].stdout


@pytest.mark.parametrize("note", ["Invoice shows the wrong VAT", 'say "hi"\nand bye'])
def test_a_masked_argument_echoed_by_a_record_stays_masked(note: str) -> None:
    from callgate_rules.documents.source import read_data_file
    from callgate_rules.harness.world import WorldResolvers
    from callgate_rules.pipeline.gate import Gate

    world = read_data_file(str(REPO / "examples" / "world.yaml"), "the world")
    world = {**world, "tickets": [{**t, "subject": f"re: {note}"} if t["id"] == "T-1001"
                                  else t for t in world["tickets"]]}
    config = load([REPO / "contracts", REPO / "policies"])
    decision = Gate(config, resolvers=WorldResolvers(world)).check(
        {"name": "createFollowUp", "arguments": {"ticketId": "T-1001", "assigneeId": "U-7",
                                                 "dueAt": "2026-12-15T09:00:00Z", "note": note}},
        actor={"id": "U-7", "tenant": "acme", "role": "agent"})
    line = json.dumps(decision.log, ensure_ascii=False)
    assert note not in line and json.dumps(note)[1:-1] not in line
    assert decision.log["replay"]["records"]["ticket"]["found"]["subject"] == "re: ***"
    assert decision.log["replay"]["masked"] == ["note"]


def test_hostile_lines_are_one_lines_problem(tmp_path: Path, suite_log: Path) -> None:
    good = next(line for line in lines_of(suite_log) if line.get("tool") == "sendEmail"
                and "replay" in line and line["replay"]["provenance"])
    log = tmp_path / "decisions.jsonl"
    log.write_text("\n".join([
        "[" * 100_000 + "]" * 100_000,  # deeper than Python's stack
        json.dumps({**good, "replay": {**good["replay"], "provenance": 5}}),
        json.dumps({**good, "replay": {**good["replay"], "actor": "not an actor"}}),
        json.dumps({**good, "replay": {**good["replay"], "now": "yesterday"}}),
        json.dumps(good),
    ]) + "\n")
    found = replay(read_log(log), load([REPO / "contracts", REPO / "policies"]))
    assert found.lines == 5 and found.unchanged >= 1
    assert [n.line for n in found.not_redecided][:3] == [1, 2, 3]
    text = run_replay(log, REPO / "contracts", REPO / "policies")
    assert "Traceback" not in text
