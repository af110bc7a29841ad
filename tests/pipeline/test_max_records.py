"""``max_records`` on a listing look-up (``many: list``): at most that many records are
bound, more is ``ambiguous`` (the user is asked which); the bound is what ``callgate lint``'s
cost estimate counts a rule over the list by; and it is refused on a one-record look-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callgate_rules.authoring.lint import lint
from callgate_rules.pipeline.gate import Gate
from callgate_rules.taxonomy import ErrorClass
from tests.authoring.test_lint import POLICY, ROUTING

CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: messageMember, version: "1", owner: t@example.com, description: a member}
spec:
  effect: read
  arguments:
    type: object
    required: [name]
    properties: {name: {type: string, maxLength: 100}}
  lookups:
    - name: member
      collection: members
      key: args.name
      field: name
      many: list
      LIMIT
      schema:
        type: object
        required: [channels]
        properties:
          channels: {type: array, maxItems: 100, items: {type: string, maxLength: 50}}
  rules:
    - name: not-in-an-outside-channel
      expression: '!member.exists(m, m.channels.exists(c, c.startsWith("ext-")))'
      error_class: confirmation_required
      message: "{args.name} is in a channel shared with outsiders."
  examples:
    - arguments: {name: Bob}
"""

MEMBERS = [{"id": "M-1", "name": "Bob", "channels": ["general"]},
           {"id": "M-2", "name": "Bob", "channels": ["random"]},
           {"id": "M-3", "name": "Eve", "channels": ["ext-partners"]}]


def configuration(tmp_path: Path, limit: str) -> list[Path]:
    paths = [tmp_path / "contract.yaml", tmp_path / "policy.yaml", tmp_path / "routing.yaml"]
    for path, text in zip(paths, (CONTRACT.replace("LIMIT", limit), POLICY, ROUTING),
                          strict=True):
        path.write_text(text, encoding="utf-8")
    return paths


def members(field: str, key: Any) -> list[dict[str, Any]]:
    return [member for member in MEMBERS if member.get(field) == key]


def decided(tmp_path: Path, limit: str, name: str) -> Any:
    gate = Gate.from_paths(*configuration(tmp_path, limit), resolvers={"members": members},
                           store="memory://")
    return gate.check({"name": "messageMember", "arguments": {"name": name}},
                      actor={"id": "U-1", "tenant": "acme"})


@pytest.mark.parametrize(("limit", "name", "error_class"), [
    ("max_records: 2", "Bob", None),  # two records: within the bound, bound as a list
    ("max_records: 1", "Bob", ErrorClass.AMBIGUOUS),  # more than the bound: which Bob?
    ("max_records: 1", "Eve", ErrorClass.CONFIRMATION_REQUIRED),  # one: the rule reads it
    ("", "Bob", None),  # no bound declared: the whole list (up to 10,000)
])
def test_more_records_than_the_bound_is_ambiguous(tmp_path: Path, limit: str, name: str,
                                                  error_class: ErrorClass | None) -> None:
    decision = decided(tmp_path, limit, name)
    assert decision.error_class == error_class
    if error_class == ErrorClass.AMBIGUOUS:
        assert "matches 2 members" in decision.agent_message


def cost_findings(tmp_path: Path, limit: str) -> list[str]:
    return [finding.message for finding in lint(configuration(tmp_path, limit))
            if finding.code == "cel-cost"]


def test_the_bound_is_what_the_cost_estimate_counts(tmp_path: Path) -> None:
    [unbounded] = cost_findings(tmp_path, "")
    assert "member (up to 10,000)" in unbounded
    assert cost_findings(tmp_path, "max_records: 10") == []


def test_a_bound_on_a_one_record_look_up_is_refused_at_its_place(tmp_path: Path) -> None:
    paths = configuration(tmp_path, "max_records: 3")
    text = paths[0].read_text().replace("      many: list\n", "")
    paths[0].write_text(text)
    [finding] = [f for f in lint(paths) if f.code == "max-records"]
    assert finding.severity == "error"
    assert finding.location.line == text.splitlines().index("      max_records: 3") + 1
    assert "add many: list or remove max_records" in finding.message
