"""The Service section of docs/how-to/deploy-service.md: every shell example that is not marked as an excerpt runs
here, with curl and jq, against a real ``callgate serve``, and prints what the page says."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import REPO, Server, start_server, token

SECTION = re.compile(r"^# Service: `callgate serve`\n(.*?)^## ", re.S | re.M)
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


def examples() -> list[str]:
    text = (REPO / "docs" / "how-to" / "deploy-service.md").read_text()
    section = SECTION.search(text)
    assert section is not None, "the page has no Service section"
    return [block for block in BLOCK.findall(section.group(1))
            if not block.startswith("# excerpt")]


@pytest.fixture(scope="module")
def readme_server(documents: Path, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[Server]:
    server = start_server(documents, f"sqlite:///{tmp_path_factory.mktemp('readme') / 'r.db'}")
    try:
        yield server
    finally:
        server.stop()


EXPECTED = [
    ["execute", "execute", "return_result", "return_receipt"],  # the write protocol
    ["execute"] * 5 + ["review"],  # a named run's calls per tool, records from the host
]


@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("jq") is None,
                    reason="the README's examples need curl and jq (apt-get install curl jq)")
def test_the_readme_curl_examples_run(readme_server: Server) -> None:
    blocks = examples()
    assert len(blocks) == len(EXPECTED), "a new README example needs its expected output here"
    for example, expected in zip(blocks, EXPECTED, strict=True):
        ran = subprocess.run(["bash", "-euo", "pipefail", "-c", example], capture_output=True,
                             text=True, timeout=60,
                             env={"CALLGATE_URL": readme_server.url, "TOKEN": token(),
                                  "PATH": "/usr/bin:/bin"})
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.split() == expected, ran.stdout
