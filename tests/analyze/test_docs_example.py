"""The how-to docs/how-to/review-a-policy-change.md runs ``callgate analyze diff`` on the
configurations under docs/examples/analyze/ from the repository's root (tests/test_docs.py
runs shell blocks in a copy of contracts/, policies/ and examples/ only): its block runs
here, and what the page says the command prints is held to the real output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("z3", reason="callgate analyze needs z3-solver (the 'analyze' extra)")

REPO = Path(__file__).parent.parent.parent
PAGE = REPO / "docs" / "how-to" / "review-a-policy-change.md"
MARKER = "<!-- tested by tests/analyze/test_docs_example.py -->"


@pytest.mark.integration
def test_the_pages_shipped_example_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    block = re.search(re.escape(MARKER) + r"\n```sh\n(.*?)```", text, re.S)
    assert block is not None, "the tested block is on the page"
    shim = tmp_path / "callgate"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m callgate_rules.cli "$@"\n')
    shim.chmod(0o755)
    script = f'export PATH="{tmp_path}:$PATH"\n{block.group(1)}'
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    shown = re.search(r"```text\n(.*?)```", text, re.S)
    assert shown is not None
    # the solver's choice of values may change with z3's version: the lines without
    # concrete values must be there as shown
    for line in shown.group(1).splitlines():
        if line.strip() not in ("", "...") and not re.search(r"[{'\"]", line):
            assert line in done.stdout.splitlines(), line
