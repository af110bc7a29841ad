"""``callgate analyze diff OLD NEW`` and ``check`` on git refs of a real temporary repository
(git run as a subprocess): REF is the ref's copy of the current directory, REF:PATH git's
path inside the ref; places are shown as REF:path in text and as the working tree's path in
SARIF; a name that is neither a directory nor a ref is a usage error (exit 2); the working
tree is never touched."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

pytest.importorskip("z3", reason="callgate analyze needs z3-solver (the 'analyze' extra)")

from callgate_rules.cli import main  # noqa: E402

DATA = Path(__file__).parent.parent / "data" / "analyze"
ASSERTION = {"apiVersion": "callgate/v1", "kind": "PolicyAssertion",
             "metadata": {"name": "refund-invariants", "version": "1.0.0",
                          "owner": "security@example.com", "description": "Invariants."},
             "spec": {"assertions": [{"name": "own-tenant-only", "tools": ["refund"],
                                      "expression": "record.tenant == actor.tenant"}]}}


def git(repo: Path, *arguments: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=Reviewer", "-c",
                           "user.email=reviewer@example.com", *arguments], cwd=repo,
                          capture_output=True, text=True, check=True, timeout=60)
    return done.stdout


def repository(tmp_path: Path, folder: str = "") -> tuple[Path, Path]:
    """A repository whose first commit holds the base configuration (under ``folder``)
    and second the one without the tenant check, each with the tenant assertion."""
    repo = tmp_path / "repo"
    config = repo / folder if folder else repo
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name in ("base", "no_tenant_check"):
        if config.exists() and folder:
            shutil.rmtree(config)
        for part in ("contracts", "policies"):
            if (config / part).exists():
                shutil.rmtree(config / part)
            shutil.copytree(DATA / name / part, config / part)
        (config / "policies" / "assertions.yaml").write_text(yaml.safe_dump(ASSERTION))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", name)
    return repo, config


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *arguments: str) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["analyze", *arguments])
    return result.exit_code, result.output


@pytest.mark.integration
def test_two_refs_and_a_ref_against_the_working_tree(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _ = repository(tmp_path)
    status = git(repo, "status", "--porcelain")
    code, shown = run(repo, monkeypatch, "diff", "HEAD~1", "HEAD")
    assert code == 1, shown
    assert "refused in OLD → execute in NEW" in shown
    assert "Gate.check: refuse in OLD, execute in NEW (confirmed)" in shown
    code, shown = run(repo, monkeypatch, "diff", "HEAD", ".")
    assert (code, shown.strip()) == (0, "refund: equivalent")
    code, shown = run(repo, monkeypatch, "diff", "main~1", "main", "--format", "json")
    assert code == 1 and json.loads(shown)["tools"][0]["status"] == "different"
    assert git(repo, "status", "--porcelain") == status  # nothing written in the tree


@pytest.mark.integration
def test_a_configuration_in_a_folder_of_the_repository(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    repo, config = repository(tmp_path, "configs/prod")
    from_root = run(repo, monkeypatch, "diff", "HEAD~1:configs/prod", "configs/prod")
    from_folder = run(config, monkeypatch, "diff", "HEAD~1", ".")
    relative = run(repo / "configs", monkeypatch, "diff", "HEAD~1:./prod", "HEAD:./prod")
    for code, shown in (from_root, from_folder, relative):
        assert code == 1 and "refused in OLD → execute in NEW" in shown, shown
    code, shown = run(config, monkeypatch, "check", "HEAD")
    assert code == 1
    assert "HEAD:configs/prod/policies/assertions.yaml:10:17: assertion broken" in shown, shown
    assert "HEAD:configs/prod/policies/access.yaml:17:7: allows the call" in shown
    code, shown = run(config, monkeypatch, "check", "HEAD~1")
    assert code == 0 and "assertion holds" in shown, shown
    code, shown = run(repo, monkeypatch, "check", "HEAD", "--format", "sarif")
    assert code == 2 and "holds no contracts/ and no policies/" in shown, shown
    code, shown = run(repo, monkeypatch, "check", "HEAD:configs/prod", "--format", "sarif")
    assert code == 1
    (result,) = [r for r in json.loads(shown)["runs"][0]["results"]
                 if r["ruleId"] == "assertion-broken"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "configs/prod/policies/assertions.yaml"
    assert location["region"] == {"startLine": 10, "startColumn": 17}


@pytest.mark.integration
def test_neither_a_directory_nor_a_ref_is_a_usage_error(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _ = repository(tmp_path)
    code, shown = run(repo, monkeypatch, "diff", "no-such-ref", ".")
    assert code == 2 and "no-such-ref: neither a directory nor a git ref" in shown, shown
    code, shown = run(repo, monkeypatch, "diff", "HEAD:contracts", ".")
    assert code == 2 and "holds no contracts/ and no policies/" in shown, shown
    outside = tmp_path / "outside"
    outside.mkdir()
    code, shown = run(outside, monkeypatch, "check", "HEAD")
    assert code == 2 and "not in a git repository" in shown, shown
    code, shown = run(outside, monkeypatch, "check", "--format", "text", ".")
    assert code == 2 and "contracts/, policies/ missing" in shown, shown
