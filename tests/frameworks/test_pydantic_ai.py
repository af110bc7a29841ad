"""The pydantic-ai adapter against real pydantic-ai, driven by its ``FunctionModel``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.frameworks.conftest import DANA, REPO, WORLD, example, gate_bindings, needs, run_example

needs("pydantic_ai", "pydantic-ai")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer  # noqa: E402

from callgate_rules.harness.simulator import Simulator  # noqa: E402
from callgate_rules.integrations.frameworks import Turn  # noqa: E402
from callgate_rules.integrations.frameworks.pydantic_ai import Callgate  # noqa: E402
from callgate_rules.pipeline.asynchronous import AsyncGate  # noqa: E402

EXAMPLE = example("pydantic_ai_agent")
EMAIL = ("sendEmail", {"to": "anna.petrova@northwind.example", "subject": "Hi",
                       "body": "Hello Anna"})


def _agent(tmp_path: Path, script: list[ModelResponse]) -> tuple[Agent[Turn, Any], Simulator,
                                                                  list[Any], Callgate]:
    simulator = Simulator(WORLD)
    gate = AsyncGate.from_paths(REPO / "contracts", REPO / "policies",
                                **gate_bindings(simulator, f"sqlite:///{tmp_path}/r.sqlite3"))
    decisions: list[Any] = []
    callgate = Callgate(gate, on_decision=decisions.append)
    agent = Agent(EXAMPLE.scripted(script), deps_type=Turn,
                  output_type=[str, DeferredToolRequests], capabilities=[callgate])
    return agent, simulator, decisions, callgate


def _returns(messages: list[Any]) -> dict[str, ToolReturnPart]:
    return {part.tool_call_id: part for message in messages if isinstance(message, ModelRequest)
            for part in message.parts if isinstance(part, ToolReturnPart)}


def test_the_example_runs_offline_and_prints_each_route(capsys: Any, tmp_path: Path) -> None:
    assert asyncio.run(EXAMPLE.main(str(tmp_path))) == 0
    lines = capsys.readouterr().out.split("\n")
    assert sorted(lines[:3]) == ["createFollowUp return_result", "deleteTicket refuse",
                                 "sendEmail refuse"]
    assert lines[3:6] == ["sendEmail await_confirmation", "sendEmail return_result", "2"]


def test_the_example_as_a_process() -> None:
    done = run_example("pydantic_ai_agent")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "2"


def test_an_unknown_tool_is_answered_in_the_gates_words(tmp_path: Path) -> None:
    seen: list[Any] = []
    script = [EXAMPLE.calls(("u", "deleteTicket", {"ticketId": "T-1001"})),
              ModelResponse(parts=[TextPart("ok")])]
    agent, simulator, decisions, _ = _agent(tmp_path, script)
    original = agent.model.function  # type: ignore[union-attr]

    def spy(messages: list[Any], info: Any) -> ModelResponse:
        seen.append(_returns(messages))
        return original(messages, info)
    agent.model.function = spy  # type: ignore[union-attr]
    result = asyncio.run(agent.run("drop it", deps=Turn(DANA, "t1")))
    assert result.output == "ok"
    [decision] = decisions
    assert decision.error_class == "unknown_tool"
    # what the model read, and what the history keeps: the gate's message
    assert decision.agent_message in str(seen[-1]["u"].content)
    assert decision.agent_message in str(_returns(result.all_messages())["u"].content)
    assert "Unknown tool name" not in str(_returns(result.all_messages())["u"].content)


def test_malformed_arguments_get_the_gates_message(tmp_path: Path) -> None:
    bad = ModelResponse(parts=[ToolCallPart("createFollowUp", '{"ticketId": "T-1001", ',
                                            tool_call_id="m")])
    agent, simulator, decisions, _ = _agent(tmp_path, [bad, ModelResponse(parts=[TextPart("ok")])])
    result = asyncio.run(agent.run("go", deps=Turn(DANA, "t1")))
    assert result.output == "ok"
    assert decisions[-1].error_class == "malformed"
    assert decisions[-1].agent_message in str(_returns(result.all_messages())["m"].content)
    assert simulator.write_count() == 0


def test_a_denied_approval_executes_nothing(tmp_path: Path) -> None:
    script = [EXAMPLE.calls(("e", *EMAIL)), ModelResponse(parts=[TextPart("not sent")])]
    agent, simulator, decisions, _ = _agent(tmp_path, script)
    turn = Turn(DANA, "t1")
    result = asyncio.run(agent.run("mail anna.petrova@northwind.example", deps=turn))
    assert isinstance(result.output, DeferredToolRequests)
    assert "anna.petrova@northwind.example" in result.output.metadata["e"]["draft"]
    denied = DeferredToolResults(approvals={"e": False})
    result = asyncio.run(agent.run(deps=turn, message_history=result.all_messages(),
                                   deferred_tool_results=denied))
    assert result.output == "not sent" and simulator.write_count() == 0


def test_the_approver_and_the_actor_come_from_the_run(tmp_path: Path) -> None:
    script = [EXAMPLE.calls(("e", *EMAIL)), ModelResponse(parts=[TextPart("sent")])]
    agent, simulator, decisions, _ = _agent(tmp_path, script)
    turn = Turn(DANA, "t1")
    result = asyncio.run(agent.run("mail anna.petrova@northwind.example", deps=turn))
    approved = DeferredToolResults(approvals={"e": True}, metadata={"e": {"by": "lee"}})
    result = asyncio.run(agent.run(deps=turn, message_history=result.all_messages(),
                                   deferred_tool_results=approved))
    assert simulator.write_count() == 1
    assert "by lee" in str([entry.detail for entry in decisions[-1].trace])


def test_the_tools_are_strict_compatible_for_openai(tmp_path: Path) -> None:
    # Five of the seven reference tools are not, in their full schema.
    agent, _, _, callgate = _agent(tmp_path, [])
    tools = asyncio.run(callgate.toolset.get_tools(None))  # type: ignore[arg-type]
    for tool in tools.values():
        transformer = OpenAIJsonSchemaTransformer(tool.tool_def.parameters_json_schema,
                                                  strict=None)
        transformer.walk()
        assert transformer.is_strict_compatible, tool.tool_def.name


def test_an_approval_that_changes_the_arguments_runs_nothing(tmp_path: Path) -> None:
    # The person approved the draft they saw; other arguments are another operation, which
    # the preview's token does not confirm.
    from pydantic_ai import ToolApproved
    script = [EXAMPLE.calls(("e", *EMAIL)), ModelResponse(parts=[TextPart("done")])]
    agent, simulator, decisions, _ = _agent(tmp_path, script)
    turn = Turn(DANA, "t1")
    result = asyncio.run(agent.run("mail anna.petrova@northwind.example", deps=turn))
    changed = ToolApproved(override_args={**EMAIL[1], "to": "a.petrova@contoso.example"})
    result = asyncio.run(agent.run(deps=turn, message_history=result.all_messages(),
                                   deferred_tool_results=DeferredToolResults(
                                       approvals={"e": changed})))
    assert simulator.write_count() == 0
    assert decisions[-1].error_class is not None


def test_a_turns_intent_holds_a_call_outside_it_and_runs_one_within(tmp_path: Path) -> None:
    # The user asked to pay the rent; the model also proposes an e-mail, in the same
    # response (pydantic-ai runs the two calls concurrently: the intent is declared once).
    import json

    from callgate_rules.integrations.frameworks import turn_from_json, turn_to_json
    from callgate_rules.intent import INTENT_RULE
    from tests.frameworks.conftest import HOLDER, MAIL, PAY_THE_RENT, RENT, Bank, banking_gate
    bank = Bank()
    gate = banking_gate(tmp_path, bank)
    decisions: list[Any] = []
    script = [EXAMPLE.calls(("out", "sendEmail", MAIL), ("in", "sendMoney", RENT)),
              ModelResponse(parts=[TextPart("rent paid")])]
    agent = Agent(EXAMPLE.scripted(script), deps_type=Turn,
                  output_type=[str, DeferredToolRequests],
                  capabilities=[Callgate(gate, on_decision=decisions.append)])
    turn = Turn(HOLDER, "t1", intent=PAY_THE_RENT)
    result = asyncio.run(agent.run("Pay my landlord the December rent", deps=turn))
    assert isinstance(result.output, DeferredToolRequests)
    [held] = result.output.approvals  # the e-mail waits for a person, unsent
    assert held.tool_call_id == "out"
    assert "goes beyond what was asked" in result.output.metadata["out"]["draft"]
    [outside] = [d for d in decisions if d.tool == "sendEmail"]
    assert (outside.route, outside.rule) == ("await_confirmation", INTENT_RULE)
    assert bank.writes == [("sendMoney", RENT)]  # the payment it asked for ran
    bound = asyncio.run(gate.aintent_of(turn.run))
    assert bound is not None and (bound.version, bound.declared_by) == (1, "U-1")
    assert gate.gate.counters["intent_narrowed"] == 0
    # resumed from JSON (another worker): the intent is not declared again
    restored = turn_from_json(json.loads(json.dumps(turn_to_json(turn))))
    assert restored.intent_declared and restored.run.run_id == turn.run.run_id
    result = asyncio.run(agent.run(deps=restored, message_history=result.all_messages(),
                                   deferred_tool_results=DeferredToolResults(
                                       approvals={"out": False})))
    assert result.output == "rent paid" and bank.writes == [("sendMoney", RENT)]
    assert asyncio.run(gate.aintent_of(turn.run)).version == 1  # type: ignore[union-attr]


def test_an_intent_the_gate_cannot_take_stops_the_run_before_any_call(tmp_path: Path) -> None:
    # The reference configuration takes no run intents: the turn's is refused, and the
    # call it was to bound does not run unbounded.
    import pytest

    from callgate_rules.intent import IntentError
    agent, simulator, decisions, _ = _agent(tmp_path, [EXAMPLE.calls(("e", *EMAIL))])
    turn = Turn(DANA, "t1", intent={"tools": {"sendEmail": {}}})
    with pytest.raises(IntentError, match="takes no run intents"):
        asyncio.run(agent.run("mail anna.petrova@northwind.example", deps=turn))
    assert simulator.write_count() == 0 and decisions == [] and not turn.intent_declared
