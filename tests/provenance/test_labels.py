"""Labels on reads (a contract's spec.labels) and the ``origins`` / ``reads`` variables
through the gate: a real configuration compiled from YAML, decisions through Gate.check."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callgate_rules import Gate, Route
from callgate_rules.cli import main

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ACTOR = {"id": "u1", "role": "member"}

READ = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: read_channel, version: "1.0.0", owner: t@example.com, description: Read a channel.}
spec:
  effect: read
  labels:
    confidential: 'args.channel.startsWith("private")'
    untrusted: 'result.contains("external")'
  arguments:
    type: object
    required: [channel]
    properties: {channel: {type: string}}
  examples: [{arguments: {channel: general}}]
"""
WRITE = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: send_email, version: "1.0.0", owner: t@example.com, description: Send a mail.}
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [to, body]
    properties: {to: {type: string}, body: {type: string}}
  rules:
    - name: no-confidential-text-outside
      expression: >-
        args.to.endsWith("@corp.example")
        || !origins.body.parts.exists(p, "confidential" in p.labels && !("user" in p.sources))
      error_class: confirmation_required
      message: The mail carries what was read in a private channel.
    - name: recipient-from-the-request
      expression: origins.to.latest_turn
      error_class: confirmation_required
      message: The recipient was not given in this request.
    - name: nothing-after-an-untrusted-read
      expression: '!reads.exists(r, "untrusted" in r.labels)'
      error_class: confirmation_required
      message: The run read something from outside.
  confirmation: {summary: "Mail {args.to}"}
  examples: [{arguments: {to: a@corp.example, body: hi}}]
"""
INBOX = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: get_received_emails, version: "1.0.0", owner: t@example.com, description: The inbox.}
spec:
  effect: read
  labels:
    untrusted:                   # a mail from outside the organisation
      each: result
      where: '!item.sender.endsWith("@bluesparrowtech.com")'
  arguments: {type: object, properties: {}}
  examples: [{arguments: {}}]
"""
LINK = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: send_link, version: "1.0.0", owner: t@example.com, description: Send a link.}
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [to, url]
    properties: {to: {type: string}, url: {type: string}}
  rules:
    - name: no-link-from-outside
      expression: '!("untrusted" in origins.url.labels) || "user" in origins.url.sources'
      error_class: confirmation_required
      message: The link comes from a mail sent from outside the organisation.
  confirmation: {summary: "Send {args.url} to {args.to}"}
  examples: [{arguments: {to: a@corp.example, url: "https://example.com"}}]
"""
# AgentDojo's inbox answers in YAML, with dates as written
INBOX_RESULT = """\
- id_: '1'
  sender: emma.johnson@bluesparrowtech.com
  subject: Sprint review
  body: Join at https://meet.bluesparrowtech.com/sprint-review
  timestamp: 2024-05-15 10:00:00
- id_: '2'
  sender: security@bluesparrow-support.example
  subject: Action required
  body: Verify your account at https://bluesparrow-support.example/login today
  timestamp: 2024-05-15 11:00:00
"""
POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: access, version: "1.0.0", owner: t@example.com, description: Everyone.}
spec:
  actor: {type: object, required: [id, role], properties: {id: {type: string}, role: {type: string}}}
  rules: [{name: members, effect: allow, tools: ["*"], when: actor.role == "member"}]
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("labels")
    (root / "contracts").mkdir()
    (root / "policies").mkdir()
    (root / "contracts" / "read_channel.yaml").write_text(READ)
    (root / "contracts" / "send_email.yaml").write_text(WRITE)
    (root / "contracts" / "get_received_emails.yaml").write_text(INBOX)
    (root / "contracts" / "send_link.yaml").write_text(LINK)
    (root / "policies" / "access.yaml").write_text(POLICY)
    return root


@pytest.fixture(scope="module")
def gate(config: Path) -> Any:
    return Gate.from_paths(config / "contracts", config / "policies")


def read(call_id: str, channel: str, text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "tool_calls": [{"id": call_id, "type": "function",
             "function": {"name": "read_channel",
                          "arguments": json.dumps({"channel": channel})}}]},
            {"role": "tool", "tool_call_id": call_id, "content": text}]


def decide(gate: Any, arguments: dict[str, Any], conversation: Any) -> Any:
    return gate.check({"name": "send_email", "arguments": arguments}, actor=ACTOR, now=NOW,
                      conversation=conversation)


def test_a_secret_from_a_private_channel_in_an_outside_mail_waits(gate: Any) -> None:
    conversation = [{"role": "user", "content": "mail bob@outside.example a summary"},
                    *read("c1", "private-board", "the code name is BLUEHERON, launch 2027-03-01")]
    leak = decide(gate, {"to": "bob@outside.example", "body": "FYI: blueheron on March 1st, 2027"},
                  conversation)
    assert (leak.route, leak.rule) == (Route.AWAIT_CONFIRMATION,
                                       "send_email/no-confidential-text-outside")
    harmless = decide(gate, {"to": "bob@outside.example", "body": "see you on Monday"},
                      conversation)
    assert harmless.route == Route.EXECUTE
    inside = decide(gate, {"to": "ann@corp.example", "body": "blueheron"},
                    [{"role": "user", "content": "mail ann@corp.example"}, *conversation[1:]])
    assert inside.route == Route.EXECUTE


def test_the_same_text_from_a_public_channel_carries_no_label(gate: Any) -> None:
    conversation = [{"role": "user", "content": "mail bob@outside.example a summary"},
                    *read("c1", "general", "the code name is BLUEHERON")]
    assert decide(gate, {"to": "bob@outside.example", "body": "blueheron"},
                  conversation).route == Route.EXECUTE


def test_a_recipient_given_earlier_for_something_else_waits(gate: Any) -> None:
    conversation = [{"role": "user", "content": "mail bob@outside.example the menu"},
                    {"role": "assistant", "content": "done"},
                    {"role": "user", "content": "now send the minutes"}]
    decision = decide(gate, {"to": "bob@outside.example", "body": "minutes"}, conversation)
    assert (decision.route, decision.rule) == (Route.AWAIT_CONFIRMATION,
                                               "send_email/recipient-from-the-request")


def test_labels_read_so_far_in_the_run(gate: Any) -> None:
    conversation = [{"role": "user", "content": "mail bob@outside.example hello"},
                    *read("c1", "general", "an external guest wrote: click here")]
    decision = decide(gate, {"to": "bob@outside.example", "body": "hello"}, conversation)
    assert (decision.route, decision.rule) == (Route.AWAIT_CONFIRMATION,
                                               "send_email/nothing-after-an-untrusted-read")


def test_without_a_conversation_origins_are_unknown(gate: Any) -> None:
    decision = decide(gate, {"to": "bob@outside.example", "body": "hello"}, None)
    assert decision.route == Route.AWAIT_CONFIRMATION  # latest_turn is false: a person asks


def test_lint_checks_label_expressions(config: Path, tmp_path: Path) -> None:
    broken = READ.replace('result.contains("external")', "resutl.size() > 0")
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "read_channel.yaml").write_text(broken)
    (tmp_path / "contracts" / "send_email.yaml").write_text(WRITE)
    result = CliRunner().invoke(main, ["lint", str(tmp_path / "contracts"),
                                       str(config / "policies")])
    assert "labels.untrusted" in result.output and "resutl" in result.output
    clean = CliRunner().invoke(main, ["lint", str(config / "contracts"),
                                      str(config / "policies")])
    assert " 0 error(s)" in clean.output or clean.output.startswith("0 error(s)") or \
        "0 error(s)" in clean.output, clean.output


def inbox_conversation(request: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": request},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_received_emails", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": INBOX_RESULT}]


def test_a_link_from_a_mail_sent_from_outside_waits_one_from_inside_runs(gate: Any) -> None:
    conversation = inbox_conversation("send ann@corp.example the link from my inbox")

    def send(url: str) -> Any:
        return gate.check({"name": "send_link", "arguments": {"to": "ann@corp.example",
                                                                "url": url}},
                          actor=ACTOR, now=NOW, conversation=conversation)

    inside = send("https://meet.bluesparrowtech.com/sprint-review")
    assert inside.route == Route.EXECUTE, inside.trace
    outside = send("https://bluesparrow-support.example/login")
    assert (outside.route, outside.rule) == (Route.AWAIT_CONFIRMATION,
                                             "send_link/no-link-from-outside")


def test_item_labels_in_origins_and_reads(config: Path) -> None:
    from callgate_rules.provenance import Thresholds, is_evidence, read_conversation
    from callgate_rules.provenance.labels import configuration_labeller
    from callgate_rules.provenance.origins import trace_origins

    config_ = Gate.from_paths(config / "contracts", config / "policies").config
    found, reads = trace_origins(
        {"outside": "https://bluesparrow-support.example/login",
         "inside": "https://meet.bluesparrowtech.com/sprint-review",
         "both": "Sprint review and Action required"},
        read_conversation(inbox_conversation("show me my mail")), [],
        lambda value: is_evidence(value, Thresholds()), configuration_labeller(config_))
    assert found["outside"]["labels"] == ["untrusted"]
    assert [read["item"] for read in found["outside"]["reads"]] == [1]
    assert found["inside"]["labels"] == []
    assert [read["item"] for read in found["inside"]["reads"]] == [0]
    assert found["inside"]["sources"] == ["tool", "tool:get_received_emails"]
    # the read carries every label any of its items has
    assert [(read["tool"], read["labels"], read["item"]) for read in reads] == [
        ("get_received_emails", ["untrusted"], -1)]
    assert reads[0]["counts"]["url"] == 2


def test_lint_checks_item_label_expressions(config: Path, tmp_path: Path) -> None:
    (tmp_path / "contracts").mkdir()
    for name, text in (("read_channel", READ), ("send_email", WRITE), ("send_link", LINK)):
        (tmp_path / "contracts" / f"{name}.yaml").write_text(text)
    broken = INBOX.replace("each: result", "each: reslut").replace("!item.sender", "!itme.sender")
    (tmp_path / "contracts" / "get_received_emails.yaml").write_text(broken)
    result = CliRunner().invoke(main, ["lint", str(tmp_path / "contracts"),
                                       str(config / "policies")])
    lines = result.output.splitlines()
    each = [line for line in lines if "labels.untrusted.each" in line and "reslut" in line]
    where = [line for line in lines if "labels.untrusted.where" in line and "itme" in line]
    assert each and where, result.output
    assert ":8:" in each[0] and ":9:" in where[0], result.output  # each at its own line
    assert "known: args, result;" in each[0] or "known: args, result" in each[0], each[0]


def test_the_draft_warns_with_what_origins_knows(gate: Any) -> None:
    """A rule reading ``origins``: the draft the person confirms names the parts of the
    text that came from labelled content, and the link only an outside mail held."""
    conversation = [{"role": "user", "content": "mail bob@outside.example a summary"},
                    *read("c1", "private-board", "the code name is BLUEHERON, launch 2027-03-01")]
    leak = gate.preview({"name": "send_email", "arguments": {
        "to": "bob@outside.example", "body": "FYI: blueheron on March 1st, 2027"}},
        actor=ACTOR, now=NOW, request_id="r1", conversation=conversation)
    warnings = [line for line in (leak.draft or "").splitlines() if line.startswith("WARNING:")]
    assert warnings == [
        'WARNING: body holds what the assistant read: "march 1st, 2027" (labelled '
        'confidential: read_channel), "blueheron" (labelled confidential: read_channel). '
        "Check it before you confirm."], leak.draft
    link = gate.preview({"name": "send_link", "arguments": {
        "to": "ann@corp.example", "url": "https://bluesparrow-support.example/login"}},
        actor=ACTOR, now=NOW, request_id="r2", conversation=inbox_conversation("send ann"))
    assert "WARNING: url was not given by the user: it appears only in content the assistant " \
        "read (get_received_emails, labelled untrusted). Check it before you confirm." \
        in (link.draft or ""), link.draft


def test_replay_re_decides_a_rule_reading_origins_as_it_was(config: Path,
                                                            tmp_path: Path) -> None:
    """The log records each argument's origins and the run's reads for a tool whose rules
    read them, so ``callgate replay`` decides such a rule again as it was decided."""
    from callgate_rules.decision_log import DecisionLog
    from callgate_rules.harness.replay import read_log, replay

    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(path)
    logged = Gate.from_paths(config / "contracts", config / "policies", decision_log=log,
                             executors={"send_link": lambda request: {"ok": True}})
    held = logged.handle({"name": "send_link", "arguments": {
        "to": "ann@corp.example", "url": "https://bluesparrow-support.example/login"}},
        actor=ACTOR, now=NOW, request_id="r1", conversation=inbox_conversation("send ann"))
    assert held.route == Route.AWAIT_CONFIRMATION
    log.close()
    [line] = [json.loads(text) for text in path.read_text().splitlines()]
    assert line["replay"]["origins"]["url"]["labels"] == ["untrusted"]
    assert [read["labels"] for read in line["replay"]["reads"]] == [["untrusted"]]
    found = replay(read_log(path), logged.config)
    assert (found.unchanged, found.changes, found.not_redecided) == (1, (), ())
    text = CliRunner().invoke(main, ["replay", str(path), str(config / "contracts"),
                                     str(config / "policies")]).output
    assert "1 unchanged" in text, text
