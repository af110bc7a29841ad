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
