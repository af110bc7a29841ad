"""The PolicyAssertion section of docs/how-to/review-a-policy-change.md: its blocks marked
``<!-- tested by tests/analyze/test_docs_how_to.py -->`` run ``callgate analyze check`` on
docs/examples/analyze/ from the repository's root (tests/test_docs.py runs shell blocks in
a copy of contracts/, policies/ and examples/ only), and the ``text`` block after each is
held to the real output (the lines without values the solver chooses)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("z3", reason="callgate analyze needs z3-solver (the 'analyze' extra)")

REPO = Path(__file__).parent.parent.parent
PAGE = REPO / "docs" / "how-to" / "review-a-policy-change.md"
MARKER = "<!-- tested by tests/analyze/test_docs_how_to.py -->"
SCRIPT = re.compile(re.escape(MARKER) + r"\n```sh\n(.*?)```", re.S)
SHOWN = re.compile(r"```text\n(.*?)```", re.S)


def marked_blocks(text: str) -> list[tuple[str, str]]:
    """Each marked shell block, and the first ``text`` block after it."""
    blocks = []
    for script in SCRIPT.finditer(text):
        shown = SHOWN.search(text, script.end())
        assert shown is not None, "a text block follows the tested block"
        blocks.append((script.group(1), shown.group(1)))
    return blocks


@pytest.mark.integration
def test_the_assertion_example_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    blocks = marked_blocks(text)
    assert blocks, "the tested blocks are on the page"
    shim = tmp_path / "callgate"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m callgate_rules.cli "$@"\n')
    shim.chmod(0o755)
    for script, shown in blocks:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c",
                               f'export PATH="{tmp_path}:$PATH"\n{script}'], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        printed = done.stdout.splitlines()
        for line in shown.splitlines():
            if line.strip() not in ("", "...") and not re.search(r"[{'\"]", line):
                assert line in printed, (line, done.stdout)
