"""Bad configuration stops the gateway at start, one clear line per problem; and
``callgate init --from-mcp`` drafts documents that lint accepts once filled in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import ACTOR_FILE, CONFIG, GATEWAY, PYTHON, REPO, upstream_command


def start(*arguments: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GATEWAY, *arguments], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def documents_with(tmp_path: Path, name: str, spec_changes: dict[str, object]) -> list[str]:
    contracts = tmp_path / "contracts"
    shutil.copytree(CONFIG / "contracts", contracts)
    document = yaml.safe_load((contracts / "createNote.yaml").read_text())
    document["metadata"]["name"] = name
    for key, value in spec_changes.items():
        document["spec"][key] = value
    (contracts / f"{name}.yaml").write_text(yaml.safe_dump(document))
    return [str(contracts), str(CONFIG / "policies")]


def test_an_upstream_that_will_not_start(tmp_path: Path) -> None:
    done = start("--upstream-command", "no-such-mcp-server --flag", "--actor",
                 str(ACTOR_FILE), "--store", f"sqlite:///{tmp_path / 's.db'}",
                 str(CONFIG / "contracts"), str(CONFIG / "policies"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [lines[-1]] and "Traceback" not in done.stderr
    assert "the upstream command `no-such-mcp-server --flag` did not start" in lines[0]


def test_contracts_that_do_not_fit_the_upstream(tmp_path: Path) -> None:
    archive = documents_with(tmp_path, "archiveNote", {})
    (tmp_path / "contracts" / "createNote.yaml").write_text(
        (tmp_path / "contracts" / "createNote.yaml").read_text()
        .replace("body: {type: string, maxLength: 2000}",
                 "body: {type: integer}\n      color: {type: string}")
        .replace("tool: findNote", "tool: findNoteById"))
    done = start("--upstream-command", upstream_command(tmp_path / "state"), "--actor",
                 str(ACTOR_FILE), "--store", f"sqlite:///{tmp_path / 's.db'}", *archive)
    assert done.returncode == 2, done.stderr
    problems = [line for line in done.stderr.splitlines() if "callgate gateway:" in line]
    assert any("archiveNote: the upstream has no tool 'archiveNote'" in p for p in problems)
    assert any("arguments.body is integer in the contract but string upstream" in p
               for p in problems)
    assert any("arguments.color is not an argument of the upstream tool" in p
               for p in problems)
    assert any("reconcile.tool 'findNoteById' is not a tool of the upstream" in p
               for p in problems)
    assert all("createNote.yaml" in p or "archiveNote.yaml" in p for p in problems)
    assert "Traceback" not in done.stderr


def test_a_required_upstream_argument_the_contract_makes_optional(tmp_path: Path) -> None:
    documents = documents_with(tmp_path, "createNote", {"arguments": {
        "type": "object", "required": ["notebookId"],
        "properties": {"notebookId": {"type": "string"}, "title": {"type": "string"}}}})
    done = start("--upstream-command", upstream_command(tmp_path / "state"), "--actor",
                 str(ACTOR_FILE), "--store", f"sqlite:///{tmp_path / 's.db'}", *documents)
    assert done.returncode == 2
    assert "arguments.title is required by the upstream tool but optional in the contract" \
        in done.stderr


@pytest.mark.parametrize("arguments,says", [
    ([], "over stdio the actor comes from --actor FILE"),
    (["--http", "127.0.0.1:9"], "over --http every caller needs a verified bearer token"),
    (["--http", "nowhere"], "--http nowhere: expected HOST:PORT"),
])
def test_missing_identity_configuration(arguments: list[str], says: str) -> None:
    done = start("--upstream-command", "true", *arguments, str(CONFIG / "contracts"),
                 str(CONFIG / "policies"))
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


def lint(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "callgate_rules.cli", "lint",
                           str(directory / "contracts"), str(directory / "policies")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


def test_init_from_mcp_drafts_documents_lint_accepts_once_filled_in(tmp_path: Path) -> None:
    drafted = tmp_path / "drafted"
    done = subprocess.run(
        [PYTHON, "-m", "callgate_rules.cli", "init", str(drafted), "--from-mcp",
         upstream_command(tmp_path / "state"), "--owner", "notes@example.com"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    contract = yaml.safe_load((drafted / "contracts" / "createNote.yaml").read_text())
    assert contract["spec"]["effect"] == "write"  # no readOnlyHint: the careful reading
    assert contract["spec"]["arguments"]["additionalProperties"] is False
    assert contract["spec"]["arguments"]["required"] == ["notebookId", "title"]
    assert contract["spec"]["examples"] == [
        {"arguments": {"notebookId": "example", "title": "example"}}]
    assert contract["metadata"]["description"] == "Create a note."
    policy = yaml.safe_load((drafted / "policies" / "access.yaml").read_text())
    assert policy["kind"] == "AccessPolicy" and policy["spec"]["rules"] == []
    findings = lint(drafted)
    marked = [line for line in findings.stdout.splitlines() if " error " in line]
    assert findings.returncode == 1 and marked  # every FILL-IN is pointed at
    assert all("FILL-IN" in line for line in marked), marked
    assert all(line.split(":")[1].isdigit() for line in marked)  # file:line:col
    for path in (drafted / "contracts").glob("*.yaml"):
        path.write_text(path.read_text().replace("idempotency: FILL-IN", "idempotency: key"))
    filled = lint(drafted)
    assert filled.returncode == 0, filled.stdout
    again = subprocess.run(
        [PYTHON, "-m", "callgate_rules.cli", "init", str(drafted), "--from-mcp",
         upstream_command(tmp_path / "state")], cwd=REPO, capture_output=True, text=True,
        timeout=60)
    assert again.returncode == 2 and "not overwriting" in again.stderr
