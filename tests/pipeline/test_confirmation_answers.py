"""Two of issue 19's small things about confirmations, through scenarios as a user writes
them: a write that always needs a person names the contract's confirmation as its deciding
rule (not the allow rule that let it through), and a confirmation used again after its write
was sent never tells the model that nothing was executed."""

from __future__ import annotations

from pathlib import Path

import pytest

from callgate_rules.documents.compiler import load
from callgate_rules.harness.scenarios import load_scenarios, run_scenarios

REPO = Path(__file__).resolve().parents[2]

SCENARIOS = """\
name: the e-mail's answer is lost, then the same confirmation again
destination: support-desk
actor: {actor}
world: {world}
faults: {{sendEmail: {{{fault}}}}}
steps:
  - propose: {{name: sendEmail, arguments: {{to: anna.petrova@northwind.example, subject: Hi, body: Hello Anna}}}}
    expect: {{route: await_confirmation, error_class: confirmation_required, rule: sendEmail/confirmation}}
  - confirm: {{by: dana}}
    expect: {{writes: {writes}}}
  - confirm: {{by: dana}}
    expect:
      route: refuse
      writes: {writes}
      agent_message_excludes: nothing was executed
      agent_message_contains: [This confirmation was already used, "{told}", Do not propose sendEmail again]
      user_message_contains: this confirmation was already used
"""


@pytest.fixture(scope="module")
def config():  # type: ignore[no-untyped-def]
    return load([REPO / "contracts", REPO / "policies"])


@pytest.mark.parametrize(("fault", "writes", "told"), [
    # sent, its answer lost and not found again: a person settles it
    ("timeout_after_applying: 1", 1, "already tried and a person is settling its outcome"),
    ("refuse: true", 0, "already tried and did not succeed"),  # the destination said no
])
def test_a_used_confirmation_tells_what_became_of_its_write(
        tmp_path: Path, config, fault: str, writes: int,  # type: ignore[no-untyped-def]
        told: str) -> None:
    path = tmp_path / "used.yaml"
    path.write_text(SCENARIOS.format(actor=REPO / "examples" / "actors" / "dana.yaml",
                                     world=REPO / "examples" / "world.yaml", fault=fault,
                                     told=told, writes=writes))
    [result] = run_scenarios(load_scenarios([path]), config)
    assert result.passed, result.failures
    second = result.steps[2].decision
    assert second.log["receipt_state"] in ("outcome_unknown", "failed", "in_review")
    assert "confirmation already used" in second.log["detail"]


def test_the_confirmation_rule_decides_and_the_allow_rule_is_kept(config) -> None:  # type: ignore[no-untyped-def]
    from callgate_rules.documents.source import read_data_file
    from callgate_rules.harness.world import WorldResolvers
    from callgate_rules.pipeline.gate import Gate

    world = read_data_file(str(REPO / "examples" / "world.yaml"), "the world")
    decision = Gate(config, resolvers=WorldResolvers(world)).check(
        {"name": "sendEmail", "arguments": {"to": "anna.petrova@northwind.example",
                                            "subject": "Hi", "body": "Hello"}},
        actor={"id": "U-7", "tenant": "acme", "role": "agent"})
    assert decision.rule == "sendEmail/confirmation"
    assert decision.log["rule"] == "sendEmail/confirmation"
    assert "allowed by support-desk-access/agents-send-email" in decision.log["detail"]
