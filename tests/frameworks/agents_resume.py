"""One side of the Agents SDK's pause-in-one-process, approve-in-another flow, run as its own
interpreter by ``test_openai_agents_resume.py``:

    python tests/frameworks/agents_resume.py pause  DIRECTORY   # run until the approval
    python tests/frameworks/agents_resume.py resume DIRECTORY   # restore, approve, resume
    python tests/frameworks/agents_resume.py approve DIRECTORY  # restore, approve, save
    python tests/frameworks/agents_resume.py run DIRECTORY      # restore, resume as saved

Both sides use the reference contracts, the same SQLite receipt store and the same secret
in ``DIRECTORY``; every call the destination receives is appended to ``DIRECTORY/writes``,
so the count of writes spans processes. ``pause`` saves the run as ``state.json``;
``resume`` prints what it saw as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agents import Agent, Runner  # noqa: E402

from callgate_rules.harness.simulator import Simulator  # noqa: E402
from callgate_rules.integrations.frameworks import Turn  # noqa: E402
from callgate_rules.integrations.frameworks.openai_agents import CallgateTools  # noqa: E402
from callgate_rules.pipeline.asynchronous import AsyncGate  # noqa: E402
from tests.frameworks.conftest import DANA, WORLD, example, gate_bindings  # noqa: E402

EXAMPLE = example("openai_agents_agent")
SECRET = "the secret both workers share"  # CALLGATE_SECRET in a deployment


def counted(directory: Path, tool: str, executor: Callable[..., Any]) -> Callable[..., Any]:
    def send(*arguments: Any) -> Any:
        with (directory / "writes").open("a") as writes:
            writes.write(tool + "\n")
        return executor(*arguments)
    return send


def setup(directory: Path, script: list[list[Any]]) -> tuple[CallgateTools, Agent[Any]]:
    simulator = Simulator(WORLD)
    bindings = gate_bindings(simulator, f"sqlite:///{directory}/receipts.sqlite3")
    bindings["executors"] = {tool: counted(directory, tool, executor)
                             for tool, executor in bindings["executors"].items()}
    gate = AsyncGate.from_paths(REPO / "contracts", REPO / "policies", secret=SECRET,
                                **bindings)
    callgate = CallgateTools(gate)
    return callgate, Agent(name="desk", model=EXAMPLE.ScriptedModel(script),
                           tools=callgate.tools)


async def pause(directory: Path) -> None:
    mail = EXAMPLE.call("fc_4", "sendEmail", to="anna.petrova@northwind.example",
                        subject="Your ticket T-1001", body="Hello Anna, we are on it.")
    callgate, agent = setup(directory, [[mail]])
    result = await Runner.run(agent, "Tell Anna (anna.petrova@northwind.example) we are on it.",
                              context=Turn(DANA, "turn-1"),
                              run_config=callgate.run_config(tracing_disabled=True))
    assert result.interruptions, "the e-mail waits for a person"
    (directory / "state.json").write_text(json.dumps(callgate.save(result.to_state())))


async def resume(directory: Path, side: str = "resume") -> None:
    callgate, agent = setup(directory, [[EXAMPLE.say("The e-mail to Anna is sent.")]])
    state = await callgate.restore(agent, json.loads((directory / "state.json").read_text()))
    asked = callgate.requests(state)
    drafts = [callgate.draft(item) for item in asked]
    for item in asked if side != "run" else ():
        callgate.approve(state, item, by="dana")
    if side == "approve":  # the person's answer, saved for another worker to act on
        (directory / "state.json").write_text(json.dumps(callgate.save(state)))
        print(json.dumps({"asked": len(asked), "drafts": drafts}))
        return
    result = await Runner.run(agent, state, run_config=callgate.run_config(
        tracing_disabled=True))
    outputs = [item.output for item in result.new_items if item.type == "tool_call_output_item"]
    print(json.dumps({"asked": len(asked), "drafts": drafts, "outputs": outputs,
                      "final": result.final_output}))


if __name__ == "__main__":
    side, where = sys.argv[1], Path(sys.argv[2])
    asyncio.run(pause(where) if side == "pause" else resume(where, side))
