"""One side of a LangGraph run paused in one process and resumed from its SQLite checkpoint
in another, run as its own interpreter by ``test_langgraph_hitl.py``:

    python tests/frameworks/langgraph_resume.py pause  DIRECTORY
    python tests/frameworks/langgraph_resume.py resume DIRECTORY '{"type": "accept"}'

Both sides share the checkpoint (``DIRECTORY/checkpoints.sqlite``) and the receipt store;
the resuming side has no actor in its config: the actor is in the checkpointed state. Every
call the destination receives is appended to ``DIRECTORY/writes``; ``resume`` prints the
tool messages as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from callgate_rules.harness.simulator import Simulator  # noqa: E402
from callgate_rules.pipeline.asynchronous import AsyncGate  # noqa: E402
from tests.frameworks.agents_resume import counted  # noqa: E402
from tests.frameworks.conftest import DANA, WORLD, gate_bindings  # noqa: E402
from tests.frameworks.test_langgraph_hitl import EMAIL, EXAMPLE, THREAD, _graph  # noqa: E402


def gate(directory: Path) -> AsyncGate:
    bindings = gate_bindings(Simulator(WORLD), f"sqlite:///{directory}/receipts.sqlite3")
    bindings["executors"] = {tool: counted(directory, tool, executor)
                             for tool, executor in bindings["executors"].items()}
    return AsyncGate.from_paths(REPO / "contracts", REPO / "policies", **bindings)


async def main(side: str, directory: Path, answer: Any) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(directory / "checkpoints.sqlite")) as saver:
        if side == "pause":
            app = _graph(gate(directory), [EXAMPLE.calls(("b", *EMAIL))], saver)
            paused = await app.ainvoke({"messages": [HumanMessage("mail Anna")],
                                        "callgate": {"actor": DANA}}, THREAD)
            print(json.dumps([pending.value["draft"] for pending in paused["__interrupt__"]]))
            return
        app = _graph(gate(directory), [AIMessage(content="done")], saver)
        state = await app.ainvoke(Command(resume=answer), THREAD)
        print(json.dumps({m.tool_call_id: m.content for m in state["messages"]
                          if isinstance(m, ToolMessage)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]),
                     json.loads(sys.argv[3]) if len(sys.argv) > 3 else None))
