"""The service's own OpenAPI document, held to account by schemathesis with every check
(``schemathesis run --checks all``, the command line of schemathesis 4): positive and
negative data for every operation (the coverage, fuzzing and stateful phases), and any
finding fails the test — a server error, a schema-valid request refused (ST202: the
document is looser than the server), a schema-invalid one accepted, an undeclared status,
content type or response shape, a 405 without ``Allow`` (ST204).

The run is seeded and bounded (``--max-examples``), so it is repeatable; it takes about a
minute on a quiet machine (the coverage phase tries every boundary of every field).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("schemathesis", reason="schemathesis is not installed "
                                           "(pip install 'schemathesis>=4')")

from .conftest import Server, start_server, token  # noqa: E402

pytestmark = pytest.mark.integration

EXAMPLES_PER_OPERATION = 15
SEED = 20261205


@pytest.fixture(scope="module")
def fuzzed_server(documents: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'receipts.db'}"
    server = start_server(documents, store)
    try:
        yield server
    finally:
        server.stop()


def test_schemathesis_with_every_check_finds_nothing(fuzzed_server: Server,
                                                     tmp_path: Path) -> None:
    command = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or \
        shutil.which("schemathesis")
    assert command is not None, "schemathesis is importable but its command is not installed"
    report = tmp_path / "junit.xml"
    run = subprocess.run(
        [command, "run", f"{fuzzed_server.url}/openapi.json", "--checks", "all",
         "--mode", "all", "--phases", "examples,coverage,fuzzing,stateful",
         "--max-examples", str(EXAMPLES_PER_OPERATION), "--seed", str(SEED),
         "--header", f"Authorization: Bearer {token(seconds=3600)}",
         "--report", "junit", "--report-junit-path", str(report), "--no-color"],
        capture_output=True, text=True, timeout=900, check=False,
        cwd=tmp_path)  # schemathesis keeps its example database in the working directory
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-20000:]  # schemathesis exits non-zero on a finding
    assert "12 selected / 12 total" in output  # every operation of /v1 was run
    assert 'failures="0"' in report.read_text()
