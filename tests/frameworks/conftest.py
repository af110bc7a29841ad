"""Shared pieces of the framework adapter tests: the reference world, Dana, a fixed clock."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WORLD = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
DANA = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text())


def needs(module: str, extra: str) -> None:
    """Skip unless the framework is installed, naming the extra that installs it."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: pip install 'callgate-rules[{extra}]'")


def example(name: str) -> ModuleType:
    path = REPO / "examples" / "frameworks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_example(name: str) -> subprocess.CompletedProcess[str]:
    """The example as a user runs it: its own process, from the repository."""
    return subprocess.run([sys.executable, str(REPO / "examples" / "frameworks" / f"{name}.py")],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def gate_bindings(simulator: Any, store: str) -> dict[str, Any]:
    from callgate_rules.harness.world import WorldResolvers
    return dict(resolvers=WorldResolvers(WORLD), executors=simulator.executors(),
                finder=simulator.find, store=store, clock=lambda: NOW)


# The banking example with run intents on (examples/intents): the run-intent tests.
BANKING = REPO / "examples" / "banking"
INTENTS = REPO / "examples" / "intents"
HOLDER = {"id": "U-1", "role": "holder"}
LANDLORD = "DE89370400440532013000"
RENT = {"recipient": LANDLORD, "amount": 950, "subject": "Rent December"}
MAIL = {"to": "someone@elsewhere.example", "subject": "Hi", "body": "Hello"}
PAY_THE_RENT = (INTENTS / "pay-the-rent.yaml").read_text()  # allows one tool: sendMoney


class Bank:
    """The banking tools' destination: every write that reached it."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def executors(self) -> dict[str, Any]:
        def executor(tool: str) -> Any:
            def execute(request: Any) -> dict[str, Any]:
                self.writes.append((tool, dict(request.arguments)))
                return {"id": f"tx-{len(self.writes)}"}
            return execute
        return {tool: executor(tool) for tool in ("sendMoney", "createPayee", "sendEmail",
                                                  "readChannel", "readInbox")}


def banking_gate(tmp_path: Path, bank: Bank) -> Any:
    """An ``AsyncGate`` on the banking example with run intents on, over SQLite."""
    from callgate_rules.documents.compiler import load
    from callgate_rules.harness.world import WorldResolvers
    from callgate_rules.pipeline.asynchronous import AsyncGate
    config = load([BANKING / "contracts", BANKING / "policies", INTENTS / "routing.yaml"])
    payees = WorldResolvers({"payees": [{"id": "p1", "iban": LANDLORD, "owner": "U-1"}]})
    return AsyncGate(config, executors=bank.executors(), resolvers=payees,
                     store=f"sqlite:///{tmp_path}/r.sqlite3", clock=lambda: NOW)
