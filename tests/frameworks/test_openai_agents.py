"""The OpenAI Agents SDK adapter against the real SDK, driven by a scripted ``Model``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.frameworks.conftest import DANA, REPO, WORLD, example, gate_bindings, needs, run_example

needs("agents", "openai-agents")

from agents import Agent, Runner  # noqa: E402
from agents.exceptions import ModelBehaviorError  # noqa: E402

from callgate_rules.harness.simulator import Simulator  # noqa: E402
from callgate_rules.integrations.frameworks import Turn  # noqa: E402
from callgate_rules.integrations.frameworks.openai_agents import CallgateTools  # noqa: E402
from callgate_rules.pipeline.asynchronous import AsyncGate  # noqa: E402

EXAMPLE = example("openai_agents_agent")


def _setup(tmp_path: Path, script: list[list[Any]]) -> tuple[Simulator, CallgateTools, Agent[Any],
                                                             list[Any]]:
    simulator = Simulator(WORLD)
    gate = AsyncGate.from_paths(REPO / "contracts", REPO / "policies",
                                **gate_bindings(simulator, f"sqlite:///{tmp_path}/r.sqlite3"))
    decisions: list[Any] = []
    callgate = CallgateTools(gate, on_decision=decisions.append)
    agent = Agent(name="desk", model=EXAMPLE.ScriptedModel(script), tools=callgate.tools)
    return simulator, callgate, agent, decisions


def _outputs(result: Any) -> list[str]:
    return [item.output for item in result.new_items if item.type == "tool_call_output_item"]


def test_the_example_runs_offline_and_prints_each_route(capsys: Any, tmp_path: Path) -> None:
    assert asyncio.run(EXAMPLE.main(str(tmp_path))) == 0
    lines = capsys.readouterr().out.split("\n")
    assert sorted(lines[:3]) == ["createFollowUp return_result", "deleteTicket refuse",
                                 "sendEmail refuse"]
    assert lines[3:6] == ["sendEmail await_confirmation", "sendEmail return_result", "2"]


def test_the_example_as_a_process() -> None:
    done = run_example("openai_agents_agent")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "2"


def test_an_unknown_tool_gets_the_gates_message_and_the_run_goes_on(tmp_path: Path) -> None:
    script = [[EXAMPLE.call("fc_9", "deleteTicket", ticketId="T-1001")], [EXAMPLE.say("ok")]]
    simulator, callgate, agent, decisions = _setup(tmp_path, script)
    result = asyncio.run(Runner.run(agent, "drop it", context=Turn(DANA, "t1"),
                                    run_config=callgate.run_config(tracing_disabled=True)))
    assert result.final_output == "ok"
    [output] = _outputs(result)
    assert "deleteTicket" in output and "createFollowUp" in output  # names the real tools
    assert decisions[0].error_class == "unknown_tool"
    assert simulator.write_count() == 0


def test_without_the_run_config_the_sdk_aborts_on_an_unknown_tool(tmp_path: Path) -> None:
    # The trap the run config removes: the SDK's default for a tool it does not have.
    script = [[EXAMPLE.call("fc_9", "deleteTicket", ticketId="T-1001")], [EXAMPLE.say("ok")]]
    _, _, agent, _ = _setup(tmp_path, script)
    with pytest.raises(ModelBehaviorError):
        asyncio.run(Runner.run(agent, "drop it", context=Turn(DANA, "t1")))


@pytest.mark.parametrize("arguments", ['{"ticketId": "T-1001", "assigneeId": ', '[1, 2]',
                                       '{"ticketId": "T-1001", "ticketId": "T-2001"}'])
def test_malformed_arguments_get_the_gates_message(tmp_path: Path, arguments: str) -> None:
    from openai.types.responses import ResponseFunctionToolCall
    bad = ResponseFunctionToolCall(type="function_call", call_id="fc_1", name="createFollowUp",
                                   arguments=arguments)
    simulator, callgate, agent, decisions = _setup(tmp_path, [[bad], [EXAMPLE.say("ok")]])
    run_config = callgate.run_config(tracing_disabled=True)
    turn = Turn(DANA, "t1")
    result = asyncio.run(Runner.run(agent, "follow up", context=turn, run_config=run_config))
    if result.interruptions:  # the SDK asks for approval of what it cannot parse
        state = result.to_state()
        assert callgate.requests(state) == []  # ... and the gate did not: it answers
        result = asyncio.run(Runner.run(agent, state, context=turn, run_config=run_config))
    assert result.final_output == "ok"
    assert decisions[-1].error_class is not None
    assert _outputs(result) == [decisions[-1].agent_message] or \
        decisions[-1].agent_message in _outputs(result)[0]
    assert simulator.write_count() == 0


def test_actor_comes_from_the_context_not_the_model(tmp_path: Path) -> None:
    # Another tenant's actor in the context: the same call is refused.
    script = [[EXAMPLE.call("fc_1", "createFollowUp", ticketId="T-1001", assigneeId="U-7",
                            dueAt="2026-12-03T09:00:00Z", note=None)], [EXAMPLE.say("ok")]]
    simulator, callgate, agent, decisions = _setup(tmp_path, script)
    globex = {**DANA, "id": "U-90", "tenant": "globex"}
    asyncio.run(Runner.run(agent, "go", context=Turn(globex, "t1"),
                           run_config=callgate.run_config(tracing_disabled=True)))
    assert decisions[-1].error_class is not None and simulator.write_count() == 0


def test_a_strict_null_for_an_optional_field_is_an_absent_field(tmp_path: Path) -> None:
    script = [[EXAMPLE.call("fc_1", "createFollowUp", ticketId="T-1001", assigneeId="U-7",
                            dueAt="2026-12-03T09:00:00Z", note=None)], [EXAMPLE.say("ok")]]
    simulator, callgate, agent, decisions = _setup(tmp_path, script)
    asyncio.run(Runner.run(agent, "go", context=Turn(DANA, "t1"),
                           run_config=callgate.run_config(tracing_disabled=True)))
    assert str(decisions[-1].route) == "return_result"
    assert "note" not in decisions[-1].arguments
    assert simulator.write_count() == 1
    tool = next(t for t in callgate.tools if t.name == "createFollowUp")
    assert tool.strict_json_schema and set(tool.params_json_schema["required"]) == \
        set(tool.params_json_schema["properties"])


def test_a_rejected_approval_executes_nothing(tmp_path: Path) -> None:
    script = [[EXAMPLE.call("fc_4", "sendEmail", to="anna.petrova@northwind.example",
                            subject="Hi", body="Hello")], [EXAMPLE.say("not sent")]]
    simulator, callgate, agent, decisions = _setup(tmp_path, script)
    run_config = callgate.run_config(tracing_disabled=True)
    turn = Turn(DANA, "t1")
    result = asyncio.run(Runner.run(agent, "mail", context=turn, run_config=run_config))
    state = result.to_state()
    [item] = callgate.requests(state)
    assert "anna.petrova@northwind.example" in (callgate.draft(item) or "")
    callgate.reject(state, item)
    result = asyncio.run(Runner.run(agent, state, context=turn, run_config=run_config))
    assert result.final_output == "not sent" and simulator.write_count() == 0


def test_an_approval_the_sdk_gives_without_a_person_only_holds(tmp_path: Path) -> None:
    # state.approve() called directly, not through CallgateTools.approve: nobody the
    # adapter knows of approved it, so the gate holds the write instead of running it.
    script = [[EXAMPLE.call("fc_4", "sendEmail", to="anna.petrova@northwind.example",
                            subject="Hi", body="Hello")], [EXAMPLE.say("held")]]
    simulator, callgate, agent, decisions = _setup(tmp_path, script)
    run_config = callgate.run_config(tracing_disabled=True)
    turn = Turn(DANA, "t1")
    result = asyncio.run(Runner.run(agent, "mail", context=turn, run_config=run_config))
    state = result.to_state()
    for item in state.get_interruptions():
        state.approve(item)
    asyncio.run(Runner.run(agent, state, context=turn, run_config=run_config))
    assert str(decisions[-1].route) == "await_confirmation"
    assert simulator.write_count() == 0


def test_what_a_tool_returned_earlier_in_the_run_is_in_the_conversation(
        tmp_path: Path) -> None:
    # The SDK shows a tool only the run's input; the adapter adds the calls it answered in
    # the turn, so provenance sees what the assistant read a step earlier.
    from openai.types.responses import ResponseFunctionToolCall
    search = ResponseFunctionToolCall(type="function_call", call_id="fc_1",
                                      name="searchContacts", arguments='{"name": "Boris"}')
    script = [[search], [EXAMPLE.call("fc_2", "getTicketStatus", ticketId="T-1001")],
              [EXAMPLE.say("done")]]
    simulator, callgate, agent, decisions = _setup(tmp_path, script)
    seen: list[Any] = []
    handle = callgate.gate.ahandle

    async def spy(*arguments: Any, **keywords: Any) -> Any:
        seen.append(keywords["conversation"])
        return await handle(*arguments, **keywords)
    callgate.gate.ahandle = spy  # type: ignore[method-assign]
    asyncio.run(Runner.run(agent, "Status of T-1001?", context=Turn(DANA, "t1"),
                           run_config=callgate.run_config(tracing_disabled=True)))
    first, second = seen
    assert [item.get("type") for item in first if isinstance(item, dict)].count(
        "function_call_output") == 0
    outputs = [item for item in second if isinstance(item, dict)
               and item.get("type") == "function_call_output"]
    assert [item["call_id"] for item in outputs] == ["fc_1"]
    assert "Boris Ivanov" in outputs[0]["output"]
    from callgate_rules.provenance import read_conversation
    assert read_conversation(second) is not None  # a conversation the gate can read


def test_a_turns_intent_holds_a_call_outside_it_and_runs_one_within(tmp_path: Path) -> None:
    import yaml

    from callgate_rules.intent import INTENT_RULE, compile_intent
    from tests.frameworks.conftest import HOLDER, MAIL, PAY_THE_RENT, RENT, Bank, banking_gate
    bank = Bank()
    gate = banking_gate(tmp_path, bank)
    decisions: list[Any] = []
    callgate = CallgateTools(gate, on_decision=decisions.append)
    script = [[EXAMPLE.call("out", "sendEmail", **MAIL), EXAMPLE.call("in", "sendMoney", **RENT)],
              [EXAMPLE.say("rent paid")]]
    agent = Agent(name="bank", model=EXAMPLE.ScriptedModel(script), tools=callgate.tools)
    run_config = callgate.run_config(tracing_disabled=True)
    intent = compile_intent(yaml.safe_load(PAY_THE_RENT), gate.gate.config)  # a RunIntent
    turn = Turn(HOLDER, "t1", intent=intent, intent_by="planner")
    result = asyncio.run(Runner.run(agent, "Pay my landlord the December rent", context=turn,
                                    run_config=run_config))
    state = result.to_state()
    [held] = callgate.requests(state)  # the e-mail waits for a person, unsent
    assert held.tool_name == "sendEmail"
    assert "goes beyond what was asked" in str(callgate.draft(held))
    [outside] = [d for d in decisions if d.tool == "sendEmail"]
    assert (outside.route, outside.rule) == ("await_confirmation", INTENT_RULE)
    assert bank.writes == [("sendMoney", RENT)]  # the payment it asked for ran
    # saved and restored, rejected and resumed: the intent is not declared again
    restored = asyncio.run(callgate.restore(agent, json.loads(json.dumps(callgate.save(state)))))
    [held] = callgate.requests(restored)
    callgate.reject(restored, held)
    result = asyncio.run(Runner.run(agent, restored, run_config=run_config))
    assert result.final_output == "rent paid" and bank.writes == [("sendMoney", RENT)]
    bound = asyncio.run(gate.aintent_of(turn.run))
    assert bound is not None and (bound.version, bound.declared_by) == (1, "planner")
