"""Progress bars: ``lint``, ``test``, ``simulate``, ``eval`` and ``replay`` draw one on
stderr when it is a terminal (a real pseudo-terminal here), and stay quiet when it is not or
under ``--format json``; stdout is the same either way."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def on_a_terminal(arguments: list[str], cwd: Path = REPO) -> tuple[int, bytes, bytes]:
    """Run the CLI with stderr on a pseudo-terminal: (exit code, stdout, what the terminal
    showed)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "callgate_rules.cli", *arguments],
                               cwd=cwd, stdout=subprocess.PIPE, stderr=follower,
                               stdin=subprocess.DEVNULL)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the process closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    stdout = process.stdout.read() if process.stdout else b""
    os.close(leader)
    return process.wait(timeout=120), stdout, shown


@pytest.fixture(scope="module")
def decision_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "decisions.jsonl"
    done = subprocess.run([sys.executable, "-m", "callgate_rules.cli", "simulate",
                           "--decision-log", str(path)], cwd=REPO, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return path


@pytest.mark.parametrize(("arguments", "label"), [
    (["simulate"], b"simulating"),
    (["test"], b"testing"),
    (["eval", "examples/control_set.yaml"], b"evaluating"),
    (["lint"], b"linting"),
    (["replay", "{log}"], b"replaying"),
])
def test_a_terminal_sees_the_work_move(arguments: list[str], label: bytes,
                                       decision_log: Path) -> None:
    arguments = [a.format(log=decision_log) for a in arguments]
    code, stdout, shown = on_a_terminal(arguments)
    assert code == 0, shown
    assert label in shown and re.search(rb"\] +(\d+)/\1\b", shown), shown  # it reached the end
    quiet = subprocess.run([sys.executable, "-m", "callgate_rules.cli", *arguments], cwd=REPO,
                           capture_output=True, timeout=120)
    assert label not in quiet.stderr and b"[#" not in quiet.stderr  # not a terminal
    assert quiet.stdout == stdout  # the report itself does not change


@pytest.mark.parametrize("arguments", [
    ["simulate", "--format", "json"], ["test", "--format", "json"],
    ["lint", "--format", "json"], ["replay", "{log}", "--format", "json"],
])
def test_json_is_never_mixed_with_a_bar(arguments: list[str], decision_log: Path) -> None:
    code, _, shown = on_a_terminal([a.format(log=decision_log) for a in arguments])
    assert code == 0
    assert b"[-" not in shown and b"[#" not in shown
