"""The framework snippets of docs/how-to/frameworks.md, run as they stand there: each framework's test model
proposes a write that needs a person; the snippet shows the draft and approves it."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.harness.simulator import Simulator
from callgate_rules.pipeline.asynchronous import AsyncGate
from tests.frameworks.conftest import DANA, REPO, WORLD, example, gate_bindings, needs

SECTION = (REPO / "docs" / "how-to" / "frameworks.md").read_text(encoding="utf-8")
SNIPPETS = {module.split(".")[-1]: code for code in re.findall(r"```python\n(.*?)```", SECTION,
                                                             re.S)
            for module in re.findall(r"integrations\.frameworks\.(\w+) import", code)
            if not code.startswith("# excerpt")}  # the multi-process flows are excerpts
USER_TEXT = "Tell Anna Petrova (anna.petrova@northwind.example) we are on it."
EMAIL = {"to": "anna.petrova@northwind.example", "subject": "Your ticket", "body": "On it."}


def test_the_readme_has_a_snippet_per_framework() -> None:
    assert set(SNIPPETS) == {"pydantic_ai", "openai_agents", "langgraph"}


def _model(framework: str) -> Any:
    if framework == "pydantic_ai":
        module = example("pydantic_ai_agent")
        from pydantic_ai.messages import ModelResponse, TextPart
        return module.scripted([module.calls(("c1", "sendEmail", EMAIL)),
                                ModelResponse(parts=[TextPart("sent")])])
    if framework == "openai_agents":
        module = example("openai_agents_agent")
        return module.ScriptedModel([[module.call("c1", "sendEmail", **EMAIL)],
                                     [module.say("sent")]])
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    module = example("langgraph_agent")
    return GenericFakeChatModel(messages=iter([module.calls(("c1", "sendEmail", EMAIL)),
                                               AIMessage(content="sent")]))


EXTRAS = {"pydantic_ai": ("pydantic_ai", "pydantic-ai"),
          "openai_agents": ("agents", "openai-agents"), "langgraph": ("langgraph", "langgraph")}


@pytest.mark.parametrize("framework", sorted(EXTRAS))
def test_the_snippet_runs_and_the_person_confirms_one_write(framework: str,
                                                            tmp_path: Path) -> None:
    needs(*EXTRAS[framework])
    if framework == "openai_agents":
        from agents import set_tracing_disabled
        set_tracing_disabled(True)  # offline: no trace export
    simulator = Simulator(WORLD)
    gate = AsyncGate.from_paths(REPO / "contracts", REPO / "policies",
                                **gate_bindings(simulator, f"sqlite:///{tmp_path}/r.sqlite3"))
    shown: list[str] = []
    namespace: dict[str, Any] = {"gate": gate, "model": _model(framework), "actor": DANA,
                                 "user_text": USER_TEXT, "show": shown.append}
    code = compile(SNIPPETS[framework], f"docs/how-to/frameworks.md ({framework})", "exec",
                   flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    running = eval(code, namespace)  # noqa: S307 - the page's own code
    if running is not None:
        asyncio.run(running)
    assert len(shown) == 1 and "anna.petrova@northwind.example" in shown[0]
    assert simulator.write_count("sendEmail") == 1
