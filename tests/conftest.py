"""Shared fixtures for the core tests: the reference configuration, compiled once.

Nothing here is autouse: the store, CEL and simulator tests are not affected by it. Heavy
imports happen inside fixtures, so collecting other test packages stays cheap.

The two tiers: ``pytest_collection_modifyitems`` below marks ``integration`` every test that
starts processes, servers, databases or browsers, so the quick tier
(``python -m pytest -m "not integration"``) is the rest and the marker cannot be forgotten.
A test is marked when it lives in a folder of such tests (``INTEGRATION_FOLDERS``), when it is
parametrized or uses a fixture named for PostgreSQL, or when the code it runs — the test
function, every fixture it uses, and every function of the test packages they call, followed
through their names — refers to ``subprocess``, ``multiprocessing``, uvicorn, psycopg or
Playwright. An explicit ``@pytest.mark.integration`` is kept as it is.
"""

from __future__ import annotations

import copy
import inspect
import json
import shutil
import types
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CONTRACTS = REPO / "contracts"
POLICIES = REPO / "policies"
WORLD_FILE = REPO / "examples" / "world.yaml"
DANA_FILE = REPO / "examples" / "actors" / "dana.yaml"
CALL_FILE = REPO / "examples" / "calls" / "create_follow_up.json"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NOW_TEXT = "2026-11-29T12:00:00Z"


class Calls:
    """One tool call in each model-output format the gate accepts (SPEC §2, step 1)."""

    @staticmethod
    def plain(name: Any, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
        call: dict[str, Any] = {"name": name, "arguments": arguments}
        if call_id is not None:
            call["id"] = call_id
        return call

    @staticmethod
    def openai_tool_call(name: Any, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}

    @classmethod
    def openai_chat(cls, name: Any, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
        """An assistant message of Chat Completions; arguments as a JSON string."""
        return {"role": "assistant", "content": None,
                "tool_calls": [cls.openai_tool_call(name, arguments, call_id)]}

    @classmethod
    def openai_completion(
        cls, name: Any, arguments: Any, call_id: str = "call_1"
    ) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": cls.openai_chat(name, arguments, call_id)}]}

    @staticmethod
    def responses_item(name: Any, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name,
                "arguments": text}

    @classmethod
    def responses(cls, name: Any, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
        """A whole OpenAI Responses object with a reasoning item before the call."""
        return {"id": "resp_1", "object": "response",
                "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                           cls.responses_item(name, arguments, call_id)]}

    @staticmethod
    def tool_use(name: Any, arguments: Any, call_id: str = "toolu_1") -> dict[str, Any]:
        return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}

    @classmethod
    def anthropic(cls, name: Any, arguments: Any, call_id: str = "toolu_1") -> dict[str, Any]:
        """An Anthropic assistant message: a text block, then the tool_use block."""
        return {"id": "msg_1", "type": "message", "role": "assistant",
                "content": [{"type": "text", "text": "Let me do that."},
                            cls.tool_use(name, arguments, call_id)]}

    @staticmethod
    def follow_up_args(**changes: Any) -> dict[str, Any]:
        """The reference createFollowUp arguments; a change of ``None`` drops the field."""
        arguments: dict[str, Any] = {
            "ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z",
        }
        arguments.update(changes)
        return {k: v for k, v in arguments.items() if v is not None}

    @classmethod
    def follow_up(cls, **changes: Any) -> dict[str, Any]:
        return cls.plain("createFollowUp", cls.follow_up_args(**changes))


class Destination:
    """A destination of writes for tests: every write it was asked to make, in order, each
    answered with a new ID, for the ``tools`` given."""

    def __init__(self, *tools: str) -> None:
        self.tools = tools
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def executors(self) -> dict[str, Any]:
        def executor(tool: str) -> Any:
            def execute(request: Any) -> dict[str, Any]:  # an ExecutionRequest
                self.writes.append((tool, dict(request.arguments)))
                return {"id": f"tx-{len(self.writes)}"}
            return execute
        return {tool: executor(tool) for tool in self.tools}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


class Reference:
    """Where the reference configuration lives, and how to copy it for a variant."""

    repo = REPO
    contracts = CONTRACTS
    policies = POLICIES
    world_file = WORLD_FILE
    dana_file = DANA_FILE
    call_file = CALL_FILE
    now_text = NOW_TEXT
    write = staticmethod(write)

    @staticmethod
    def copy(target: Path, routing_yaml: str | None = None) -> tuple[Path, Path]:
        """The reference contracts and access policy copied under ``target``; the routing
        table replaced by ``routing_yaml`` when given. Returns (contracts, policies) dirs."""
        contracts = target / "contracts"
        policies = target / "policies"
        shutil.copytree(CONTRACTS, contracts)
        policies.mkdir(parents=True)
        shutil.copy(POLICIES / "access.yaml", policies / "access.yaml")
        if routing_yaml is None:
            shutil.copy(POLICIES / "routing.yaml", policies / "routing.yaml")
        else:
            write(policies / "routing.yaml", routing_yaml)
        return contracts, policies


# Fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def calls() -> type[Calls]:
    return Calls


@pytest.fixture(scope="session")
def ref() -> type[Reference]:
    return Reference


@pytest.fixture(scope="session")
def now() -> datetime:
    return NOW


@pytest.fixture(scope="session")
def reference_world() -> dict[str, list[dict[str, Any]]]:
    """examples/world.yaml; treat as read-only (copy it with ``copy.deepcopy`` to change)."""
    world: dict[str, list[dict[str, Any]]] = load_yaml(WORLD_FILE)
    return world


@pytest.fixture(scope="session")
def dana() -> dict[str, Any]:
    """The acme agent of examples/actors/dana.yaml; read-only, build variants with {**dana}."""
    actor: dict[str, Any] = load_yaml(DANA_FILE)
    return actor


@pytest.fixture(scope="session")
def gate(reference_world: dict[str, list[dict[str, Any]]]) -> Any:
    """The reference configuration, compiled once per session, bound to the example world."""
    from callgate_rules.harness.world import WorldResolvers
    from callgate_rules.pipeline.gate import Gate

    return Gate.from_paths(CONTRACTS, POLICIES, resolvers=WorldResolvers(reference_world))


@pytest.fixture(scope="session")
def gate_with_world(gate: Any) -> Callable[[Mapping[str, Any]], Any]:
    """The compiled reference configuration bound to another world (no recompilation)."""
    from callgate_rules.harness.world import WorldResolvers
    from callgate_rules.pipeline.gate import Gate

    def bind(world: Mapping[str, Any]) -> Any:
        return Gate(gate.config, resolvers=WorldResolvers(copy.deepcopy(dict(world))))

    return bind


@pytest.fixture(scope="session")
def compile_gate() -> Callable[..., Any]:
    """Compile documents under ``paths`` into a Gate bound to ``world`` (for custom configs)."""
    from callgate_rules.harness.world import WorldResolvers
    from callgate_rules.pipeline.gate import Gate

    def build(*paths: Path, world: Mapping[str, Any] | None = None) -> Any:
        return Gate.from_paths(*paths, resolvers=WorldResolvers(dict(world or {})))

    return build


# The quick tier and the full tier ------------------------------------------------------------

# Folders every test of which starts processes (workers killed with -9, 16-process races).
INTEGRATION_FOLDERS = ("tests/processes",)
# What starting a process, a server, a database connection or a browser goes through.
STARTING_MODULES = ("subprocess", "multiprocessing", "uvicorn", "psycopg", "psycopg_pool",
                    "playwright", "concurrent.futures.process", "mcp.client.stdio")


def _starts_something(value: Any) -> bool:
    module = value.__name__ if isinstance(value, types.ModuleType) else getattr(
        value, "__module__", None)
    return isinstance(module, str) and any(
        module == name or module.startswith(name + ".") for name in STARTING_MODULES)


def _code_starts_something(code: types.CodeType, namespace: Mapping[str, Any],
                           seen: set[types.CodeType]) -> bool:
    """Whether ``code`` (or a function of the test packages it names) refers to what starts
    a process, a server, a database or a browser."""
    if code in seen:
        return False
    seen.add(code)
    for name in code.co_names:
        value = namespace.get(name)
        if value is None:
            continue
        if _starts_something(value):
            return True
        if _is_test_code(value) and _function_starts_something(value, seen):
            return True
    return any(_code_starts_something(const, namespace, seen) for const in code.co_consts
               if isinstance(const, types.CodeType))


def _is_test_code(value: Any) -> bool:
    module = getattr(value, "__module__", "") or ""
    return (module.startswith("tests.") or module in ("conftest", "tests")) and (
        inspect.isfunction(value) or inspect.isclass(value))


def _function_starts_something(value: Any, seen: set[types.CodeType]) -> bool:
    if inspect.isclass(value):
        return any(_function_starts_something(member, seen) for member in vars(value).values()
                   if inspect.isfunction(member))
    function = inspect.unwrap(value)
    inner = getattr(getattr(function, "hypothesis", None), "inner_test", None)
    function = inner or function
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    return _code_starts_something(code, function.__globals__, seen)


def _fixture_functions(item: pytest.Item) -> Iterable[Any]:
    info = getattr(item, "_fixtureinfo", None)
    for definitions in (info.name2fixturedefs.values() if info is not None else ()):
        for definition in definitions:
            yield definition.func


def _is_integration(item: pytest.Item) -> bool:
    path = Path(str(item.path)).resolve().relative_to(REPO).as_posix()
    if path.startswith(INTEGRATION_FOLDERS):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "postgres" in callspec.id.lower():
        return True
    if any("postgres" in name for name in getattr(item, "fixturenames", ())):
        return True
    seen: set[types.CodeType] = set()
    function = getattr(item, "function", None)
    if function is not None and _function_starts_something(function, seen):
        return True
    return any(_function_starts_something(fixture, seen) for fixture in _fixture_functions(item))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("integration") is None and _is_integration(item):
            item.add_marker(pytest.mark.integration)
