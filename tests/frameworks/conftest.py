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
