"""What importing callgate loads: nothing a command does not need (not timing — module sets).

``import callgate_rules`` loads none of callgate's modules and no third-party package at all;
every public name is imported on first use. Making a gate loads what deciding needs, never a
database driver, a web framework, the MCP SDK or cel-python. Each check runs in a fresh
interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import callgate_rules

REPO = Path(__file__).resolve().parents[1]
NEVER_FOR_A_DECISION = {
    "psycopg", "psycopg_pool", "fastapi", "starlette", "uvicorn", "mcp", "httpx", "celpy",
    "lark", "jinja2", "prometheus_client", "opentelemetry", "click",
}


def modules_after(statement: str) -> set[str]:
    """Every module a fresh interpreter holds after running ``statement``."""
    script = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    finished = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                              text=True, check=True, timeout=120)
    return set(json.loads(finished.stdout.strip().splitlines()[-1]))  # after what it printed


def third_party(modules: set[str]) -> set[str]:
    tops = {name.partition(".")[0] for name in modules}
    return {name for name in tops if not name.startswith("_")
            and name not in sys.stdlib_module_names and name != "callgate_rules"}


def test_importing_callgate_loads_none_of_its_modules_and_no_other_package() -> None:
    baseline = modules_after("")
    loaded = modules_after("import callgate_rules") - baseline

    assert {name for name in loaded if name.startswith("callgate_rules")} == {"callgate_rules"}
    assert third_party(loaded) == set()


def test_making_a_decision_loads_no_driver_framework_or_sdk() -> None:
    loaded = modules_after(
        "import yaml\n"
        "from callgate_rules import Gate, WorldResolvers\n"
        "world = WorldResolvers(yaml.safe_load(open('examples/world.yaml')))\n"
        "gate = Gate.from_paths('contracts', 'policies', resolvers=world)\n"
        "decision = gate.check({'name': 'getTicketStatus', 'arguments': {'ticketId': 'T-1001'}},"
        " actor={'id': 'U-7', 'tenant': 'acme', 'role': 'agent'})\n"
        "assert decision.route is not None")

    assert third_party(loaded) & NEVER_FOR_A_DECISION == set()


@pytest.mark.parametrize("name", callgate_rules.__all__)
def test_every_public_name_is_there_when_asked_for(name: str) -> None:
    assert getattr(callgate_rules, name) is not None
    assert name in dir(callgate_rules)


def test_a_name_that_is_not_exported_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Gates'"):
        callgate_rules.Gates  # noqa: B018 - the attribute access is the test


def test_the_command_table_names_every_command_where_it_is_defined() -> None:
    from importlib import import_module

    from callgate_rules.cli import COMMAND_MODULES

    defined = {command.name: module for module in set(COMMAND_MODULES.values())
               for command in import_module(f"callgate_rules.cli.{module}").COMMANDS}
    assert defined == COMMAND_MODULES


def test_checking_one_call_loads_neither_other_commands_nor_the_simulator_nor_a_service() -> None:
    loaded = modules_after(
        "import sys\n"
        "from callgate_rules.cli import main\n"
        "sys.argv = ['callgate', 'check', '--call', 'examples/calls/create_follow_up.json',"
        " '--actor', 'examples/actors/dana.yaml', '--world', 'examples/world.yaml',"
        " '--now', '2026-11-29T12:00:00Z']\n"
        "try:\n    main()\nexcept SystemExit as end:\n    assert end.code == 0, end.code")

    assert {"callgate_rules.cli.authoring", "callgate_rules.cli.store",
            "callgate_rules.cli.serve", "callgate_rules.cli.gateway",
            "callgate_rules.authoring.lint",
            # check decides and executes nothing: the suites and the simulated destination
            # are for simulate, test and eval
            "callgate_rules.harness.scenarios", "callgate_rules.harness.simulator",
            "callgate_rules.harness.destination", "callgate_rules.harness.support_desk",
            "callgate_rules.harness.policytest"} & loaded == set()
    assert third_party(loaded) & (NEVER_FOR_A_DECISION - {"click"}) == set()


def test_the_type_checkers_imports_are_the_exported_names() -> None:
    """``__init__`` lists each public name twice, for two readers: the run-time table
    (``_EXPORTED_FROM``) and the imports type checkers read; they must agree."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(callgate_rules.__file__).read_text(encoding="utf-8"))
    guarded = next(node for node in tree.body if isinstance(node, ast.If))
    imported = {alias.name: node.module for node in guarded.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert imported == callgate_rules._EXPORTED_FROM
