"""``callgate check`` and ``callgate lint`` through click's CliRunner and one real process.

CliRunner tests bind the reference configuration compiled once per session (``cli_load``);
the subprocess test and the broken-directory test compile for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import callgate_rules.cli.authoring as cli_module
from callgate_rules.cli import main

EXPLAIN_TRACE = [
    "trace:",
    "  propose   format: openai-chat — 1 call",
    "  parse     createFollowUp: pass — contract v1.0.0",
    "  validate  schema: pass",
    "  validate  lookup ticket: found — tickets T-1001",
    "  validate  lookup assignee: found — users U-7",
    "  authorize support-desk-access/suspended-actors: no match",
    "  authorize support-desk-access/follow-up-own-tenant: allow",
    "  validate  rule ticket-not-deleted: pass",
    "  validate  rule ticket-open: pass",
    "  validate  rule assignee-in-team: pass",
    "  validate  rule due-in-future: pass",
    "  route     allowed: execute",
]


@pytest.fixture
def cli_load(monkeypatch: pytest.MonkeyPatch, gate: Any, ref: Any) -> None:
    """``callgate check`` gets the session's compiled reference config for the reference
    paths; any other paths compile for real."""
    real_load = cli_module.load
    reference = (Path(ref.contracts).resolve(), Path(ref.policies).resolve())

    def load(paths: Any) -> Any:
        if tuple(Path(p).resolve() for p in paths) == reference:
            return gate.config
        return real_load(paths)

    monkeypatch.setattr(cli_module, "load", load)


@pytest.fixture
def run(cli_load: None, ref: Any) -> Any:
    """``run("check", ...)`` with the reference documents; returns click's Result."""

    def invoke(*args: str, input: str | None = None) -> Result:
        named = any(not arg.startswith("-") and Path(arg).is_dir() for arg in args)
        extra = ([str(ref.contracts), str(ref.policies)]
                 if args and args[0] == "check" and not named else [])
        return CliRunner().invoke(main, [*args, *extra], input=input)

    return invoke


def check_args(ref: Any, *more: str, call: str | None = None) -> list[str]:
    return ["check", "--call", call or str(ref.call_file), "--actor", str(ref.dana_file),
            "--world", str(ref.world_file), *more]


def assert_one_clear_line(result: Result, exit_code: int, *needles: str) -> str:
    """Exit ``exit_code``, nothing on stdout, exactly one line on stderr, no traceback."""
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("callgate: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


# check ----------------------------------------------------------------------------------------


def test_check_text_output(run: Any, ref: Any, gate: Any) -> None:
    versions = ", ".join(f"{k} {v}" for k, v in gate.config.versions_for("createFollowUp").items())
    assert versions.startswith("ToolContract/createFollowUp 1.0.0, AccessPolicy/")
    result = run(*check_args(ref, "--now", ref.now_text))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "route:          execute",
        "error class:    -",
        "tool:           createFollowUp v1.0.0",
        "rule:           support-desk-access/follow-up-own-tenant",
        "agent message:  All checks passed for createFollowUp.",
        "user message:   -",
        f"versions:       {versions}",
    ]


def test_check_text_output_of_a_refusal_shows_candidates(
    run: Any, ref: Any, tmp_path: Path
) -> None:
    call = tmp_path / "event.json"
    call.write_text(json.dumps({"type": "tool_use", "id": "toolu_1", "name": "createEvent",
                                "input": {"contact": "Anna Petrova", "title": "Renewal",
                                          "startsAt": "2026-12-10T14:00:00Z"}}))
    result = run(*check_args(ref, "--now", ref.now_text, call=str(call)))
    assert result.exit_code == 1  # not executed
    lines = result.stdout.splitlines()
    assert lines[:2] == ["route:          clarify", "error class:    ambiguous"]
    assert [line for line in lines if line.startswith("candidate:")] == [
        'candidate:      {"id": "C-12", "name": "Anna Petrova", "company": "Northwind"}',
        'candidate:      {"id": "C-13", "name": "Anna Petrova", "company": "Contoso"}',
    ]
    assert "C-40" not in result.stdout


def test_check_json_output_has_the_decision_keys(run: Any, ref: Any) -> None:
    result = run(*check_args(ref, "--now", ref.now_text, "--format", "json"))
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert {"route", "error_class", "tool", "contract_version", "rule", "agent_message",
            "user_message", "log", "versions", "arguments"} <= set(payload)
    assert "trace" not in payload
    assert (payload["route"], payload["error_class"], payload["tool"],
            payload["contract_version"]) == ("execute", None, "createFollowUp", "1.0.0")
    assert payload["rule"] == "support-desk-access/follow-up-own-tenant"
    assert payload["agent_message"] == "All checks passed for createFollowUp."
    assert payload["user_message"] == ""
    log = payload["log"]
    assert (log["route"], log["tool"], log["contract_version"]) == (
        "execute", "createFollowUp", "1.0.0")
    assert log["versions"] == payload["versions"]
    assert log["actor"] == {"id": "U-7", "tenant": "acme", "role": "agent"}


def test_check_json_output_with_explain_has_the_trace(run: Any, ref: Any) -> None:
    result = run(*check_args(ref, "--now", ref.now_text, "--format", "json", "--explain"))
    trace = json.loads(result.stdout)["trace"]
    assert [(t["step"], t["subject"], t["result"]) for t in trace][:2] == [
        ("propose", "format", "openai-chat"), ("parse", "createFollowUp", "pass")]
    assert trace[-1] == {"step": "route", "subject": "allowed", "result": "execute", "detail": ""}


def test_check_explain_prints_each_step_and_rule(run: Any, ref: Any) -> None:
    result = run(*check_args(ref, "--now", ref.now_text, "--explain"))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    trace = lines[lines.index("trace:"):]
    assert trace[:4] == EXPLAIN_TRACE[:4] and trace[-1] == EXPLAIN_TRACE[-1]
    # Every step and rule of the reference decision, in order (other lines may interleave).
    remaining = iter(trace)
    assert all(any(line == expected for line in remaining) for expected in EXPLAIN_TRACE)


def test_check_reads_the_call_from_stdin(run: Any, ref: Any) -> None:
    text = json.dumps({"name": "getTicketStatus", "arguments": {"ticketId": "T-2001"}})
    result = run(*check_args(ref, "--now", ref.now_text, "--format", "json", call="-"),
                 input=text)
    assert result.exit_code == 1  # refused: not executed
    payload = json.loads(result.stdout)
    assert (payload["route"], payload["error_class"]) == ("refuse", "forbidden")
    assert "globex" not in payload["agent_message"] + payload["user_message"]


def test_check_stdin_that_is_not_json_is_the_gates_malformed_verdict(run: Any, ref: Any) -> None:
    result = run(*check_args(ref, "--now", ref.now_text, call="-"),
                 input="I will now create the follow-up.")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:2] == ["route:          regenerate",
                                              "error class:    malformed"]


@pytest.mark.parametrize(
    ("now", "route"),
    [
        ("2026-11-29T12:00:00Z", "execute"),
        ("2026-12-15T09:00:00+00:00", "regenerate"),  # due exactly now: not in the future
        ("2026-12-15T09:30:00+01:00", "execute"),  # 08:30 UTC, half an hour before dueAt
        ("2026-12-15T10:30:00+01:00", "regenerate"),  # 09:30 UTC, half an hour after dueAt
    ],
)
def test_check_now_is_parsed_with_its_offset(run: Any, ref: Any, now: str, route: str) -> None:
    result = run(*check_args(ref, "--now", now, "--format", "json"))
    assert result.exit_code == (0 if route == "execute" else 1)
    payload = json.loads(result.stdout)
    assert payload["route"] == route
    if route == "regenerate":
        assert payload["rule"] == "createFollowUp/due-in-future"


@pytest.mark.parametrize(
    ("now", "needle"),
    [
        ("yesterday", "is not an RFC 3339 time"),
        ("2026-13-45T12:00:00Z", "is not an RFC 3339 time"),
        ("2026-11-29T12:00:00", "has no time zone"),
    ],
)
def test_check_bad_now_is_one_line_exit_2(run: Any, ref: Any, now: str, needle: str) -> None:
    result = run(*check_args(ref, "--now", now))
    assert_one_clear_line(result, 2, f"--now {now!r}", needle)


def test_check_missing_call_file(run: Any, ref: Any, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-call.json"
    result = run(*check_args(ref, "--now", ref.now_text, call=str(missing)))
    assert_one_clear_line(result, 2, "'--call'", str(missing), "does not exist")


@pytest.mark.parametrize("kind", ["missing", "directory", "not-utf8", "bad-yaml"])
def test_check_unreadable_actor(run: Any, ref: Any, tmp_path: Path, kind: str) -> None:
    actor = tmp_path / "actor.yaml"
    if kind == "directory":
        actor.mkdir()
    elif kind == "not-utf8":
        actor.write_bytes(b"id: \xff\xfe\n")
    elif kind == "bad-yaml":
        actor.write_text("id: U-7\n  tenant: : acme\n")
    args = ["check", "--call", str(ref.call_file), "--actor", str(actor),
            "--world", str(ref.world_file), "--now", ref.now_text]
    line = assert_one_clear_line(run(*args), 2, str(actor))
    if kind == "missing":
        assert "'--actor'" in line and "does not exist" in line
    elif kind == "directory":
        assert "'--actor'" in line and "is a directory" in line
    elif kind == "not-utf8":
        assert "cannot read the actor" in line


@pytest.mark.parametrize("text", ["- U-7\n- acme\n", "[1, 2]", "just a name\n"],
                         ids=["yaml-list", "json-list", "scalar"])
def test_check_actor_not_a_mapping(run: Any, ref: Any, tmp_path: Path, text: str) -> None:
    actor = tmp_path / "actor.yaml"
    actor.write_text(text)
    args = ["check", "--call", str(ref.call_file), "--actor", str(actor), "--now", ref.now_text]
    assert_one_clear_line(run(*args), 2, str(actor), "the actor must be a mapping")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("tickets:\n  - {id: T-1, tenant: acme}\n  - {tenant: acme, status: open}\n",
         "world.tickets[1] must be a mapping with an id"),
        ("tickets: {id: T-1}\n", "world.tickets must be a list of records"),
        ("- {id: T-1}\n", "a world must map collection names to lists of records"),
    ],
    ids=["record-without-id", "collection-not-a-list", "world-a-list"],
)
def test_check_bad_world(run: Any, ref: Any, tmp_path: Path, text: str, needle: str) -> None:
    world = tmp_path / "world.yaml"
    world.write_text(text)
    args = ["check", "--call", str(ref.call_file), "--actor", str(ref.dana_file),
            "--world", str(world), "--now", ref.now_text]
    assert_one_clear_line(run(*args), 2, str(world), needle)


def test_check_broken_contracts_dir_prints_the_findings(run: Any, ref: Any, tmp_path: Path) -> None:
    contracts, policies = ref.copy(tmp_path)
    target = contracts / "createFollowUp.yaml"
    text = target.read_text().replace("error_class: conflict", "error_class: closed")
    target.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "error_class: closed" in t)
    result = run(*check_args(ref, "--now", ref.now_text), str(contracts), str(policies))
    assert result.exit_code == 2
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"{target}:{line}:20: error schema spec.rules[1].error_class: "
                               "'closed' is not allowed")
    assert lines[-1] == ("callgate: 1 error(s) in the documents; run `callgate lint` for "
                         "details")
    assert len(lines) == 2


def test_check_missing_contracts_dir_is_an_error(run: Any, ref: Any, tmp_path: Path) -> None:
    missing = tmp_path / "contracs"
    result = run(*check_args(ref, "--now", ref.now_text), str(missing), str(ref.policies))
    assert_one_clear_line(result, 2, str(missing), "does not exist")


def test_check_old_options_still_work_and_say_they_are_deprecated(run: Any, ref: Any) -> None:
    result = run(*check_args(ref, "--now", ref.now_text),
                 "--contracts", str(ref.contracts), "--policies", str(ref.policies))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "route:          execute"
    assert result.stderr.splitlines() == [
        f"callgate: --contracts {ref.contracts} --policies {ref.policies} is deprecated and "
        "goes in the next release; name the documents as PATHS: callgate check "
        f"{ref.contracts} {ref.policies}"]


def test_check_old_option_naming_a_missing_folder(run: Any, ref: Any, tmp_path: Path) -> None:
    missing = tmp_path / "contracs"
    result = run(*check_args(ref, "--now", ref.now_text), "--contracts", str(missing))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (f"callgate: --contracts {missing}: no such file "
                                              "or directory")


# lint -------------------------------------------------------------------------------------------


def test_lint_reference_config_exits_0(run: Any, ref: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ref.repo)  # the default paths are contracts/ and policies/
    result = run("lint")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr.strip() == "0 error(s), 0 warning(s)"


SMALL_CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: ping, version: "1", owner: t@example.com, description: answer pong}
spec:
  effect: read
  arguments: {type: object, properties: {text: {type: string}}}
  rules:
    - name: polite
      expression: has(args.text) && args.text != "rude"
      error_class: invalid_argument
      message: Be polite.
  examples: [{arguments: {text: hi}}]
"""

SMALL_POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: everyone, version: "1", owner: t@example.com, description: all may ping}
spec:
  rules: [{name: anyone, effect: allow, tools: [ping], when: "true"}]
"""


def test_lint_exits_1_on_errors(run: Any, tmp_path: Path) -> None:
    broken = tmp_path / "ping.yaml"
    broken.write_text(SMALL_CONTRACT.replace('!= "rude"', '!= "rude" &&'))
    (tmp_path / "access.yaml").write_text(SMALL_POLICY)
    result = run("lint", str(tmp_path))
    assert result.exit_code == 1
    # The error is at the end of the expression, where the missing operand should be.
    assert result.stdout.splitlines() == [
        f"{broken}:1:1: warning no-routing-table no RoutingTable among the documents; the "
        "built-in default routes and budgets apply",
        f"{broken}:9:57: error cel-syntax spec.rules[0].expression: CEL syntax error at "
        "1:39: found the end of the expression, expected an operand",
    ]
    assert result.stderr.strip() == "1 error(s), 1 warning(s)"


def test_lint_warnings_alone_exit_0(run: Any, tmp_path: Path) -> None:
    (tmp_path / "ping.yaml").write_text(SMALL_CONTRACT.replace(
        "has(args.text) && args.text", "args.text"))
    (tmp_path / "access.yaml").write_text(SMALL_POLICY)
    result = run("lint", "--format", "json", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert [(f["severity"], f["code"], Path(f["file"]).name, f["line"])
            for f in json.loads(result.stdout)] == [
        ("warning", "no-routing-table", "ping.yaml", 1),
        ("warning", "unguarded-optional-field", "ping.yaml", 9),
    ]


def test_lint_missing_path_is_one_line_exit_2(run: Any, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert_one_clear_line(run("lint", str(missing)), 2, str(missing), "does not exist")


# The installed entry point, in a real process ---------------------------------------------------


def _entry_point() -> list[str]:
    script = Path(sys.executable).with_name("callgate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "callgate_rules.cli"]


def test_installed_entry_point_checks_a_call(ref: Any) -> None:
    text = json.dumps({"type": "function_call", "call_id": "call_9", "name": "createFollowUp",
                       "arguments": json.dumps({"ticketId": "T-1003", "assigneeId": "U-7",
                                                "dueAt": "2026-12-15T09:00:00Z"})})
    process = subprocess.run(
        [*_entry_point(), "check", "--call", "-", "--actor", str(ref.dana_file),
         "--world", str(ref.world_file), "--now", ref.now_text, "--format", "json"],
        input=text, capture_output=True, text=True, cwd=ref.repo, timeout=60,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert process.returncode == 1, process.stderr  # replan: the call is not executed
    payload = json.loads(process.stdout)
    assert (payload["route"], payload["error_class"], payload["rule"]) == (
        "replan", "not_found", "createFollowUp/ticket-not-deleted")
    assert payload["log"]["versions"]["ToolContract/createFollowUp"] == "1.0.0"
    assert process.stderr == ""


def test_check_explain_shows_the_records_a_lookup_left_out(run: Any, ref: Any,
                                                           tmp_path: Path) -> None:
    """Three contacts are called Anna Petrova; Dana may act on two of them (the access
    rules): the trace says so, counts the one left out, and never names it."""
    call = tmp_path / "event.json"
    call.write_text(json.dumps({"type": "tool_use", "id": "toolu_1", "name": "createEvent",
                                "input": {"contact": "Anna Petrova", "title": "Renewal",
                                          "startsAt": "2026-12-10T14:00:00Z"}}))
    result = run(*check_args(ref, "--now", ref.now_text, "--explain", call=str(call)))
    assert result.exit_code == 1
    trace = result.stdout.splitlines()[result.stdout.splitlines().index("trace:"):]
    assert ("  validate  lookup contact: narrowed — 3 contacts found; the access rules let the "
            "actor act on 2: C-12, C-13; 1 left out") in trace
    assert "  validate  lookup contact: ambiguous — 2 matches" in trace
    assert "C-40" not in result.stdout


def test_check_explain_shows_records_the_visible_rule_hid(tmp_path: Path) -> None:
    """A look-up's ``visible`` rule drops the records the actor may not see: with
    --explain the trace counts them (a payee of another user here), as JSON too."""
    banking = Path(__file__).resolve().parents[2] / "examples" / "banking"
    call = tmp_path / "pay.json"
    call.write_text(json.dumps({"name": "sendMoney", "arguments": {
        "recipient": "DE89370400440532013000", "amount": 10, "subject": "Lunch"}}))
    actor = tmp_path / "actor.yaml"
    actor.write_text("id: U-1\nrole: holder\n")
    world = tmp_path / "world.yaml"
    world.write_text("payees:\n"
                     "  - {id: PY-1, owner: U-1, iban: DE89370400440532013000, name: A}\n"
                     "  - {id: PY-9, owner: U-2, iban: DE89370400440532013000, name: B}\n")
    result = CliRunner().invoke(main, ["check", str(banking / "contracts"),
                                       str(banking / "policies"), "--call", str(call),
                                       "--actor", str(actor), "--world", str(world),
                                       "--explain", "--format", "json"])
    assert result.exit_code == 0, result.output
    entries = [(t["subject"], t["result"], t["detail"]) for t in json.loads(result.stdout)["trace"]]
    assert ("lookup payees_on_file", "narrowed", "2 payees found; the visible rule lets the "
            "actor see 1: PY-1; 1 left out") in entries
    assert "PY-9" not in result.stdout
