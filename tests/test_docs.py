"""Every code block in README.md and docs/**/*.md runs here, or says what it is, so the
documentation cannot drift from the code.

The convention (for everyone writing a page):

- A fenced block tagged ``yaml``, ``sh``/``shell``/``bash``, ``python``, or an untagged block
  whose first line starts with ``$ `` (a shell transcript), is an *example*. Other blocks
  (``text``, ``json``, ``toml``...) are shown, not run.
- ``<!-- excerpt -->`` (or ``<!-- excerpt: why -->``) on the line before the fence, or a first
  line inside the block that is a comment containing the word ``excerpt`` (``# excerpt:
  ...``), marks an excerpt: part of a file, a synopsis, a deployment that needs services.
  Excerpts are not run; a YAML excerpt must still parse. A YAML excerpt whose first line
  names a file of the repository (``# excerpt: contracts/sendPayment.yaml, spec.rules``)
  must be that file's text: every line of it, comments aside, is a line of the file.
- Prefer including to copying. In docs/ a block whose lines are ``--8<-- "PATH"``,
  ``--8<-- "PATH:SECTION"`` (between ``# --8<-- [start:SECTION]`` and ``[end:SECTION]``
  lines of the file) or ``--8<-- "PATH:FIRST:LAST"`` (lines, from 1) is filled in by
  pymdownx.snippets when the site is built, from the repository's root; here each named file,
  section and range must exist and hold text, and an included YAML must parse. README.md is
  read on GitHub and PyPI, where nothing is included: there ``<!-- include: PATH -->`` before
  the fence says the block is PATH's whole text, exactly; it is compared here (and a Python
  one is run as that file).
- ``<!-- tested by tests/PATH.py -->`` before the fence says another test runs it (that file
  must exist and name the page it reads); ``<!-- lint-example -->`` is
  tests/authoring/test_lint_types.py's.
- Every other example runs here:
  - YAML holding a document with ``kind: ToolContract | AccessPolicy | RoutingTable |
    Definitions`` is compiled with the repository's documents (replacing the one of the same
    kind and name); a ``PolicyTest`` is run from ``policies/tests/``; a scenario (``name`` and
    ``steps``) is run from ``examples/scenarios/``. Each must compile or pass.
  - Shell runs with ``bash -euo pipefail`` in a copy of the repository's contracts/,
    policies/ and examples/ (the *workspace*), with ``callgate`` being this interpreter's
    ``python -m callgate_rules.cli`` (and ``python``, ``python3`` this interpreter); a command
    expected to fail says so in the script
    (``callgate lint broken || test $? -eq 1``).
  - Python runs as a standalone script (``python -`` with this interpreter) from the
    repository's root, so a script names files as ``examples/...``; it must exit 0 and print
    no traceback.
- A page that says ``<!-- docs-test: one workspace -->`` (the tutorial) runs its shell and
  Python blocks in order in one workspace, each Python block with the workspace as its
  working directory, so each step builds on the ones before it.
- In every YAML example, excerpts included, a key with a space and no value (``{description:
  one, two}`` makes ``two`` a key) is refused: a comma inside a flow mapping split a value.

These tests start processes (``callgate``, bash, Python): conftest.py marks them
``integration``, except the checks that read files only (parsing, includes, excerpts), which
stay in the quick tier. ``test_the_site_builds_strictly`` builds the site as CI does.
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
DOCS = REPO / "docs"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(\w*)[ \t]*\n(.*?)^(?P=indent)```[ \t]*$",
                   re.S | re.M)
SHELL = {"sh", "shell", "bash"}
RUN_LANGUAGES = {"yaml", "sh", "python"}
COMPILED_KINDS = {"ToolContract", "AccessPolicy", "RoutingTable", "Definitions"}
TESTED_BY = re.compile(r"<!--\s*tested by (\S+?)\s*-->")
INCLUDE = re.compile(r"<!--\s*include:\s*(\S+?)\s*-->")
SNIPPET = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$')
ONE_WORKSPACE = "<!-- docs-test: one workspace -->"
NAMED_FILE = re.compile(r"\b((?:contracts|policies|examples|benchmarks|docs)/[\w./-]+\.ya?ml)\b")


def pages() -> list[Path]:
    """README.md and every page of the site (the hook's and the examples' folders aside)."""
    found = [REPO / "README.md"]
    found += sorted(path for path in DOCS.rglob("*.md")
                    if path.relative_to(DOCS).parts[0] not in ("hooks", "examples"))
    return found


@dataclass(frozen=True)
class Example:
    page: Path
    line: int  # of the opening fence
    language: str  # yaml, sh or python
    text: str
    marker: str  # the HTML comment before the fence, or ""

    @property
    def excerpt(self) -> bool:
        first = self.text.split("\n", 1)[0].strip()
        return "<!-- excerpt" in self.marker or (first.startswith(("#", "$ #"))
                                                 and "excerpt" in first) or (
            first.startswith("$ ") and "# an excerpt" in first)

    @property
    def snippets(self) -> list[str]:
        """The ``--8<--`` includes of this block (all its lines, or none)."""
        lines = [line for line in self.text.splitlines() if line.strip()]
        found = [m.group(1) for m in map(SNIPPET.match, lines) if m]
        if found and len(found) != len(lines):
            pytest.fail(f"{self}: a block mixes --8<-- includes with text")
        return found

    @property
    def name(self) -> str:
        return str(self.page.relative_to(REPO))

    def __str__(self) -> str:
        return f"{self.name}:{self.line}"


def examples(page: Path) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        indent, language, body = match.group("indent"), match.group(2), match.group(3)
        if indent:  # a block inside a list item: its lines carry the item's indent
            body = "\n".join(line.removeprefix(indent) for line in body.split("\n"))
        if language in SHELL or (language == "" and body.startswith("$ ")):
            language = "sh"
        elif language not in RUN_LANGUAGES:
            continue
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = before.strip() if before.lstrip().startswith("<!--") else ""
        found.append(Example(page, text.count("\n", 0, match.start()) + 1, language, body,
                             marker))
    return found


EXAMPLES = [example for page in pages() for example in examples(page)]
ONE_WORKSPACE_PAGES = [page for page in pages()
                       if ONE_WORKSPACE in page.read_text(encoding="utf-8")]


def _id(example: Example) -> str:
    return f"{example.name}:{example.line}-{example.language}"


def test_every_page_has_been_read() -> None:
    assert (REPO / "README.md") in pages() and len(pages()) > 10
    assert {e.language for e in EXAMPLES} == RUN_LANGUAGES


def test_the_readme_stays_a_front_door() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move detail into docs/"


# Reading only: parsing, includes, excerpts ------------------------------------------------------

YAML_EXAMPLES = [e for e in EXAMPLES if e.language == "yaml"]


def _included_text(example: Example, spec: str) -> str:
    """The text pymdownx.snippets puts in place of ``--8<-- "spec"``."""
    path_text, *selector = spec.split(":")
    path = REPO / path_text
    assert path.is_file(), f"{example}: {path_text} does not exist"
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(selector) == 1:
        section = selector[0]
        starts = [i for i, line in enumerate(lines) if f"--8<-- [start:{section}]" in line]
        ends = [i for i, line in enumerate(lines) if f"--8<-- [end:{section}]" in line]
        assert len(starts) == 1 and len(ends) == 1 and starts[0] < ends[0], (
            f"{example}: {path_text} has no section {section!r} (one '# --8<-- [start:"
            f"{section}]' line and one '[end:{section}]' line after it)")
        lines = lines[starts[0] + 1:ends[0]]
    elif len(selector) == 2:
        first, last = int(selector[0]), int(selector[1])
        assert 1 <= first <= last <= len(lines), f"{example}: {spec}: no such lines"
        lines = lines[first - 1:last]
    lines = [line for line in lines if "--8<-- [" not in line]
    text = "\n".join(lines)
    assert text.strip(), f"{example}: {spec} includes nothing"
    return text + "\n"


def _text_of(example: Example) -> str:
    snippets = example.snippets
    if not snippets:
        return example.text
    if example.page.name == "README.md":
        pytest.fail(f"{example}: GitHub and PyPI do not include --8<--; copy the file and mark "
                    "it <!-- include: PATH -->")
    return "".join(_included_text(example, spec) for spec in snippets)


@pytest.mark.parametrize("example", YAML_EXAMPLES, ids=_id)
def test_a_yaml_example_parses_and_splits_no_value_at_a_comma(example: Example) -> None:
    text = _text_of(example)
    if example.snippets and all(spec.count(":") for spec in example.snippets):
        text = _dedent(text)
    for data in yaml.safe_load_all(text):
        split = list(_split_keys(data, ()))
        assert not split, (f"{example}: {', '.join(split)}: a key with a space and no value — "
                           "a comma inside a flow mapping split a value; quote it")


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def _split_keys(data: Any, path: tuple[str, ...]) -> Any:
    if isinstance(data, dict):
        for key, value in data.items():
            if value is None and isinstance(key, str) and " " in key.strip():
                yield ".".join((*path, key))
            yield from _split_keys(value, (*path, str(key)))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from _split_keys(item, (*path, str(index)))


@pytest.mark.parametrize("example", [e for e in EXAMPLES if INCLUDE.search(e.marker)],
                         ids=_id)
def test_an_included_block_is_the_files_text(example: Example) -> None:
    match = INCLUDE.search(example.marker)
    assert match is not None
    path = REPO / match.group(1)
    assert path.is_file(), f"{example}: {match.group(1)} does not exist"
    assert example.text == path.read_text(encoding="utf-8"), (
        f"{example}: the block differs from {match.group(1)}; copy the file again")


def _without_comment(line: str) -> str:
    return re.sub(r"\s+#\s.*$", "", line).strip()


def labelled_excerpt_problems(example: Example) -> list[str]:
    """What is wrong with a YAML excerpt whose first line names files of the repository: a
    file that does not exist, or a line that is in none of them."""
    named = NAMED_FILE.findall(example.text.split("\n", 1)[0])
    missing = [name for name in named if not (REPO / name).is_file()]
    if missing:
        return [f"{example}: labelled as part of {name}, which does not exist; include the "
                "real file with --8<--" for name in missing]
    known = {_without_comment(line) for name in named
             for line in (REPO / name).read_text(encoding="utf-8").splitlines()}
    return [f"{example}: {line.strip()!r} is in no line of {', '.join(named)}"
            for line in example.text.splitlines()[1:]
            if (stripped := _without_comment(line)) and not stripped.startswith("#")
            and stripped not in ("...", "- ...") and stripped not in known]


def test_every_excerpt_labelled_with_a_file_is_that_files_text() -> None:
    labelled = [e for e in YAML_EXAMPLES if e.excerpt
                and NAMED_FILE.search(e.text.split("\n", 1)[0])]
    assert [problem for e in labelled for problem in labelled_excerpt_problems(e)] == []


def test_the_excerpt_check_finds_a_missing_file_and_a_changed_line() -> None:
    page = REPO / "README.md"
    rule = "  - name: due-in-future\n    expression: timestamp(args.dueAt) > now\n"
    assert labelled_excerpt_problems(Example(
        page, 1, "yaml", "# excerpt: contracts/createFollowUp.yaml\n" + rule, "")) == []
    assert "does not exist" in labelled_excerpt_problems(Example(
        page, 1, "yaml", "# excerpt: policies/payment_tables.yaml\n" + rule, ""))[0]
    changed = rule.replace("> now", ">= now")
    assert "is in no line of" in labelled_excerpt_problems(Example(
        page, 1, "yaml", "# excerpt: contracts/createFollowUp.yaml\n" + changed, ""))[0]


@pytest.mark.parametrize("example", [e for e in EXAMPLES if TESTED_BY.search(e.marker)
                                     or "lint-example" in e.marker], ids=_id)
def test_an_example_tested_elsewhere_names_a_test_that_reads_its_page(
        example: Example) -> None:
    named = TESTED_BY.search(example.marker)
    path = REPO / (named.group(1) if named else "tests/authoring/test_lint_types.py")
    assert path.is_file(), f"{example}: {path} does not exist"
    source = path.read_text(encoding="utf-8")
    page = example.page.relative_to(DOCS) if example.page.is_relative_to(DOCS) else None
    assert (example.name in source or (page is not None and str(page) in source)), (
        f"{example}: {path.name} never names {example.name}")


# Running: these start processes (conftest.py marks them integration) ------------------------


def _runs_here(example: Example) -> bool:
    return (not example.excerpt and not example.snippets
            and not TESTED_BY.search(example.marker) and "lint-example" not in example.marker
            and "<!-- excerpt" not in example.marker
            and example.page not in ONE_WORKSPACE_PAGES)


RUN_HERE = [e for e in EXAMPLES if _runs_here(e) and not INCLUDE.search(e.marker)]


def make_workspace(target: Path) -> Path:
    for name in ("contracts", "policies", "examples"):
        shutil.copytree(REPO / name, target / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3"))
    return target


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


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
        path = workspace / "policies" / "tests" / "docs_test.yaml"
        path.write_text(example.text, encoding="utf-8")
        done = callgate("test", str(path), cwd=workspace)
        assert done.returncode == 0, f"{example}:\n{done.stdout}{done.stderr}"
    elif all(isinstance(d, dict) and {"name", "steps"} <= set(d) for d in documents):
        path = workspace / "examples" / "scenarios" / "docs.yaml"
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
    (workspace / folder / f"docs-{index}.yaml").write_text(
        yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def run_shell(example: Example, cwd: Path) -> None:
    script = example.text
    if script.startswith("$ "):
        pytest.fail(f"{example}: a transcript; mark it <!-- excerpt --> or <!-- tested by ... -->")
    python = shlex.quote(sys.executable)
    prelude = (f"callgate() {{ {python} -m callgate_rules.cli \"$@\"; }}\n"
               f"python() {{ {python} \"$@\"; }}\npython3() {{ {python} \"$@\"; }}\n")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", prelude + script], cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{example}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"{example}: {done.stderr[-3000:]}"


def run_python(example: Example, text: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-"], input=text, cwd=cwd, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{example}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"{example}: {done.stderr[-3000:]}"


@pytest.mark.parametrize("example", [e for e in RUN_HERE if e.language == "sh"], ids=_id)
def test_a_shell_example_runs(example: Example, workspace: Path) -> None:
    run_shell(example, workspace)


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.language == "python"
                                     and (_runs_here(e) or INCLUDE.search(e.marker))], ids=_id)
def test_a_python_example_runs(example: Example) -> None:
    run_python(example, example.text, REPO)


@pytest.mark.parametrize("page", ONE_WORKSPACE_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_a_one_workspace_page_runs_step_by_step(page: Path, workspace: Path) -> None:
    steps = [e for e in examples(page) if e.language in ("sh", "python") and not e.excerpt
             and "<!-- excerpt" not in e.marker and not e.snippets]
    assert steps, f"{page}: nothing to run"
    for example in steps:
        if example.language == "sh":
            run_shell(example, workspace)
        else:
            run_python(example, example.text, workspace)


# The site ---------------------------------------------------------------------------------------


def _hook() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_reference_hook",
                                                  DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_covers_the_code() -> None:
    from callgate_rules.cel.library import FUNCTIONS
    from callgate_rules.taxonomy import ErrorClass, Route

    generated = _hook().pages()
    for path in generated:
        assert not (DOCS / path).exists(), f"docs/{path} is generated; do not commit a copy"
    documents = generated["reference/documents-schema.md"]
    for kind in ("ToolContract", "AccessPolicy", "RoutingTable", "Definitions"):
        assert f"## {kind}" in documents
    for field in ("`spec.lookups[].visible`", "`spec.budgets.retries_per_call`",
                  "`spec.definitions`", "`spec.actor`"):
        assert field in documents, field
    errors = generated["reference/errors.md"]
    assert all(f"| `{value}` |" in errors for value in (*ErrorClass, *Route))
    cli = generated["reference/cli.md"]
    for command in ("check", "lint", "simulate", "test", "replay", "serve", "gateway", "init",
                    "review list", "receipts purge"):
        assert f"## `callgate {command}`" in cli, command
    api = generated["reference/python-api.md"]
    assert "## `Gate`" in api and "### `Gate.handle`" in api and "## `open_store`" in api
    functions = generated["reference/cel-functions.md"]
    assert all(f"`{name.replace('|', chr(92) + '|')}`" in functions for name in FUNCTIONS)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="the docs extra: pip install -e '.[docs]'")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                           str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
