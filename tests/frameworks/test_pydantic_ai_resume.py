"""A pydantic-ai run paused for a person in one process and approved in another: the run's
messages saved with pydantic-ai's own serializer (``ModelMessagesTypeAdapter``), the pending
approvals' call IDs and drafts kept beside them, the agent rebuilt in a fresh interpreter
with the same gate, store and secret, resumed with ``DeferredToolResults``; exactly one
write reaches the destination, and resuming the same saved messages again writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.frameworks.conftest import REPO, needs

needs("pydantic_ai", "pydantic-ai")

WORKER = REPO / "tests" / "frameworks" / "pydantic_resume.py"
pytestmark = pytest.mark.integration  # starts interpreters


def _worker(side: str, directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, str(WORKER), side, str(directory), *extra], cwd=REPO,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    return done


def _writes(directory: Path) -> list[str]:
    path = directory / "writes"
    return path.read_text().split() if path.exists() else []


def _resumed(directory: Path, side: str = "resume", *extra: str) -> dict[str, Any]:
    done = _worker(side, directory, *extra)
    loaded: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_an_approval_saved_in_one_process_is_confirmed_in_another_once(
        tmp_path: Path) -> None:
    _worker("pause", tmp_path)
    assert _writes(tmp_path) == []  # paused: nothing sent
    saved = json.loads((tmp_path / "pending.json").read_text())
    assert saved["request_id"] == "turn-1"
    [pending] = saved["approvals"]
    assert pending["call_id"] == "pc_4" and pending["tool"] == "sendEmail"
    assert "anna.petrova@northwind.example" in pending["draft"]
    history = (tmp_path / "messages.json").read_text()
    assert '"tool_call_id":"pc_4"' in history  # the call itself travels in the messages

    seen = _resumed(tmp_path)  # a fresh interpreter: load, approve, resume
    assert seen["asked"] == 1
    [output] = seen["outputs"]
    assert output.startswith("sendEmail succeeded")
    assert seen["final"] == "The e-mail to Anna is sent."
    assert _writes(tmp_path) == ["sendEmail"]

    again = _resumed(tmp_path)  # the same saved messages resumed once more, elsewhere
    assert _writes(tmp_path) == ["sendEmail"]  # the receipt answers: no second write
    [output] = again["outputs"]
    assert "already done" in output and "M-1" in output
    assert again["final"] == "The e-mail to Anna is sent."


def test_a_denial_given_in_another_process_writes_nothing(tmp_path: Path) -> None:
    _worker("pause", tmp_path)
    seen = _resumed(tmp_path, "deny")
    assert seen["asked"] == 1 and seen["final"] == "The e-mail was not sent."
    assert _writes(tmp_path) == []


def test_the_request_id_must_travel_with_the_saved_messages(tmp_path: Path) -> None:
    # The operation a receipt answers for is the request's: resumed under a new request ID,
    # the same call is a new operation (what the docs tell you to avoid by saving the ID).
    _worker("pause", tmp_path)
    _resumed(tmp_path)
    assert _writes(tmp_path) == ["sendEmail"]
    [output] = _resumed(tmp_path, "resume", "another-request")["outputs"]
    assert output.startswith("sendEmail succeeded")
    assert _writes(tmp_path) == ["sendEmail", "sendEmail"]
