"""Every YAML and shell example in README.md runs here, or says it is an excerpt, so the
README cannot drift from the code.

The convention (for everyone adding a README section):

- A fenced block tagged ``yaml``, ``sh``/``shell``/``bash``, or an untagged block whose first
  line starts with ``$ `` (a shell transcript), is an *example*.
- ``<!-- excerpt -->`` on the line before the fence, or a first line inside the block that is
  a comment containing the word ``excerpt`` (``# excerpt: ...``), marks an excerpt: part of a
  file, a synopsis, a deployment that needs services. Excerpts are not run; a YAML excerpt
  must still parse.
- ``<!-- tested by tests/PATH.py -->`` before the fence says another test runs it (that file
  must exist and read the README); ``<!-- lint-example -->`` is tests/test_lint_types.py's.
- Every other example runs here:
  - YAML holding a document with ``kind: ToolContract | AccessPolicy | RoutingTable |
    Definitions`` is compiled with the repository's documents (replacing the one of the same
    kind and name); a ``PolicyTest`` is run from ``policies/tests/``; a scenario (``name`` and
    ``steps``) is run from ``examples/scenarios/``. Each must compile or pass.
  - Shell runs with ``bash -euo pipefail`` in a copy of the repository's contracts/,
    policies/ and examples/, with ``callgate`` being this interpreter's
    ``python -m callgate_rules.cli``; a command expected to fail says so in the script
    (``callgate lint broken || test $? -eq 1``).
- In every YAML example, excerpts included, a key with a space and no value (``{description:
  one, two}`` makes ``two`` a key) is refused: a comma inside a flow mapping split a value.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
SHELL = {"sh", "shell", "bash"}
COMPILED_KINDS = {"ToolContract", "AccessPolicy", "RoutingTable", "Definitions"}
TESTED_BY = re.compile(r"<!--\s*tested by (\S+?)\s*-->")


@dataclass(frozen=True)
class Example:
    line: int  # of the opening fence
    language: str  # yaml or sh
    text: str
    marker: str  # the HTML comment before the fence, or ""

    @property
    def excerpt(self) -> bool:
        first = self.text.split("\n", 1)[0].strip()
        return "<!-- excerpt" in self.marker or (first.startswith(("#", "$ #"))
                                                 and "excerpt" in first) or (
            first.startswith("$ ") and "# an excerpt" in first)

    def __str__(self) -> str:
        return f"README.md:{self.line}"


def examples() -> list[Example]:
    text = README.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        language, body = match.group(1), match.group(2)
        if language in SHELL:
            language = "sh"
        elif language == "" and body.startswith("$ "):
            language = "sh"
        elif language != "yaml":
            continue
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = before if before.lstrip().startswith("<!--") else ""
        found.append(Example(text.count("\n", 0, match.start()) + 1, language, body, marker))
    return found


EXAMPLES = examples()


def _id(example: Example) -> str:
    return f"line-{example.line}-{example.language}"


def test_the_readme_has_examples_of_both_kinds() -> None:
    assert {e.language for e in EXAMPLES} == {"yaml", "sh"}


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.language == "yaml"], ids=_id)
def test_no_yaml_example_splits_a_value_at_a_comma(example: Example) -> None:
    for data in yaml.safe_load_all(example.text):
        split = list(_split_keys(data, ()))
        assert not split, (f"{example}: {', '.join(split)}: a key with a space and no value — "
                           "a comma inside a flow mapping split a value; quote it")


def _split_keys(data: Any, path: tuple[str, ...]) -> Any:
    if isinstance(data, dict):
        for key, value in data.items():
            if value is None and isinstance(key, str) and " " in key.strip():
                yield ".".join((*path, key))
            yield from _split_keys(value, (*path, str(key)))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from _split_keys(item, (*path, str(index)))


@pytest.mark.parametrize("example", [e for e in EXAMPLES if TESTED_BY.search(e.marker)
                                     or "lint-example" in e.marker], ids=_id)
def test_an_example_tested_elsewhere_names_a_test_that_reads_the_readme(
        example: Example) -> None:
    named = TESTED_BY.search(example.marker)
    path = REPO / (named.group(1) if named else "tests/test_lint_types.py")
    assert path.is_file(), f"{example}: {path} does not exist"
    assert "README" in path.read_text(encoding="utf-8"), f"{example}: {path} never reads it"


RUN_HERE = [e for e in EXAMPLES if not e.excerpt and not e.marker.strip()]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    for name in ("contracts", "policies", "examples"):
        shutil.copytree(REPO / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3"))
    return tmp_path


def callgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "callgate_rules.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("example", [e for e in RUN_HERE if e.language == "yaml"], ids=_id)
def test_a_yaml_example_compiles_or_passes(example: Example, workspace: Path) -> None:
    documents = [d for d in yaml.safe_load_all(example.text) if d is not None]
    kinds = {d.get("kind") if isinstance(d, dict) else None for d in documents}
    if kinds <= COMPILED_KINDS:
        for index, document in enumerate(documents):
            _replace_document(workspace, document, index)
        done = callgate("lint", cwd=workspace)
        errors = [line for line in done.stdout.splitlines() if " error " in line]
        assert done.returncode == 0 and not errors, f"{example}: {errors or done.stderr}"
    elif kinds == {"PolicyTest"}:
        path = workspace / "policies" / "tests" / "readme_test.yaml"
        path.write_text(example.text, encoding="utf-8")
        done = callgate("test", str(path), cwd=workspace)
        assert done.returncode == 0, f"{example}:\n{done.stdout}{done.stderr}"
    elif all(isinstance(d, dict) and {"name", "steps"} <= set(d) for d in documents):
        path = workspace / "examples" / "scenarios" / "readme.yaml"
        path.write_text(example.text, encoding="utf-8")
        done = callgate("simulate", str(path), cwd=workspace)
        assert done.returncode == 0, f"{example}:\n{done.stdout}{done.stderr}"
    else:
        pytest.fail(f"{example}: neither a document, a PolicyTest nor a scenario; mark it "
                    "<!-- excerpt --> (see this file's docstring)")


def _replace_document(workspace: Path, document: dict[str, Any], index: int) -> None:
    """Put ``document`` where the repository's document of its kind and name is, or beside
    them when it is new."""
    name = (document.get("metadata") or {}).get("name")
    for path in sorted((workspace / "contracts").glob("*.yaml")) + sorted(
            (workspace / "policies").glob("*.yaml")):
        texts = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8"))
                 if d is not None]
        kept = [d for d in texts if not (d.get("kind") == document.get("kind")
                                         and (d.get("metadata") or {}).get("name") == name)]
        if len(kept) != len(texts):
            path.write_text(yaml.safe_dump_all(kept, sort_keys=False), encoding="utf-8")
    folder = "contracts" if document.get("kind") == "ToolContract" else "policies"
    (workspace / folder / f"readme-{index}.yaml").write_text(
        yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


@pytest.mark.parametrize("example", [e for e in RUN_HERE if e.language == "sh"], ids=_id)
def test_a_shell_example_runs(example: Example, workspace: Path) -> None:
    script = example.text
    if script.startswith("$ "):
        pytest.fail(f"{example}: a transcript; mark it <!-- excerpt --> or <!-- tested by ... -->")
    prelude = f"callgate() {{ {shlex.quote(sys.executable)} -m callgate_rules.cli \"$@\"; }}\n"
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", prelude + script], cwd=workspace,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{example}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"{example}: {done.stderr[-3000:]}"
