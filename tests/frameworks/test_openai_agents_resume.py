"""An Agents SDK run paused for a person in one process and approved in another: the SDK's
``RunState`` saved as JSON, restored in a fresh interpreter, approved there; exactly one
write reaches the destination, and resuming the same saved state again writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.frameworks.conftest import REPO, needs

needs("agents", "openai-agents")

WORKER = REPO / "tests" / "frameworks" / "agents_resume.py"
pytestmark = pytest.mark.integration  # starts interpreters


def _worker(side: str, directory: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, str(WORKER), side, str(directory)], cwd=REPO,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    return done


def _writes(directory: Path) -> list[str]:
    path = directory / "writes"
    return path.read_text().split() if path.exists() else []


def _resumed(directory: Path, side: str = "resume") -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_worker(side, directory).stdout.splitlines()[-1])
    return loaded


def test_an_approval_saved_in_one_process_is_confirmed_in_another_once(
        tmp_path: Path) -> None:
    _worker("pause", tmp_path)
    assert _writes(tmp_path) == []  # paused: nothing sent, nothing held
    saved = json.loads((tmp_path / "state.json").read_text())
    [pending] = saved["context"]["context"]["approvals"].values()  # the run's Turn
    assert pending["tool"] == "sendEmail" and pending["token"] and pending["approved_by"] is None

    seen = _resumed(tmp_path)  # a fresh interpreter: restore, list, approve, resume
    assert seen["asked"] == 1
    [draft] = seen["drafts"]
    assert "anna.petrova@northwind.example" in draft
    assert seen["final"] == "The e-mail to Anna is sent."
    assert _writes(tmp_path) == ["sendEmail"]

    again = _resumed(tmp_path)  # the same saved state resumed once more, elsewhere
    assert _writes(tmp_path) == ["sendEmail"]  # the receipt answers: no second write
    assert again["asked"] == 1 and again["final"] == "The e-mail to Anna is sent."


def test_an_approval_saved_by_one_worker_is_carried_out_by_a_third(tmp_path: Path) -> None:
    # pause in one process, approve (and save) in a second, resume in a third
    _worker("pause", tmp_path)
    assert _resumed(tmp_path, "approve")["asked"] == 1
    assert _writes(tmp_path) == []
    saved = json.loads((tmp_path / "state.json").read_text())
    [pending] = saved["context"]["context"]["approvals"].values()
    assert pending["approved_by"] == "dana"
    assert _resumed(tmp_path, "run")["final"] == "The e-mail to Anna is sent."
    assert _writes(tmp_path) == ["sendEmail"]


def test_a_state_saved_without_callgates_serializer_says_how_to_save_it(
        tmp_path: Path) -> None:
    import asyncio

    from agents import RunState

    from tests.frameworks.agents_resume import pause, setup
    asyncio.run(pause(tmp_path))
    callgate, agent = setup(tmp_path, [])
    saved = json.loads((tmp_path / "state.json").read_text())
    saved["context"]["context"] = {}  # what a plain state.to_json() keeps of a Turn
    state = asyncio.run(RunState.from_json(agent, saved))
    with pytest.raises(TypeError, match="CallgateTools.save"):
        callgate.requests(state)
