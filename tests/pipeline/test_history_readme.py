"""The `history` and sequence-rule examples of docs/how-to/injection-resistance.md are the
banking example's own text, and its commands pass (test_docs.py leaves the blocks marked
for this file to it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "docs" / "how-to" / "injection-resistance.md"
BANKING = REPO / "examples" / "banking"
MARKED = re.compile(
    r"<!-- tested by tests/pipeline/test_history_readme\.py -->\n```(\w+)\n(.*?)^```",
    re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    found = [(match[1], match[2]) for match in MARKED.finditer(README.read_text())]
    assert len(found) == 3, "the page's history section has its three examples"
    return found


def test_the_yaml_examples_are_the_banking_documents_text() -> None:
    documents = [(BANKING / "contracts" / "sendMoney.yaml").read_text(),
                 (BANKING / "policies" / "access.yaml").read_text()]
    examples = [text for language, text in blocks() if language == "yaml"]
    assert len(examples) == 2
    for text, document in zip(examples, documents, strict=True):
        assert text in document


def test_the_shell_example_passes() -> None:
    (shell,) = [text for language, text in blocks() if language == "sh"]
    for line in shell.splitlines():
        command = line.split()
        assert command[0] == "callgate"
        done = subprocess.run([sys.executable, "-m", "callgate_rules.cli", *command[1:]],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        if command[1] == "simulate":
            assert "6 passed, 0 failed" in done.stdout
