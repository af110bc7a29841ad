"""``callgate init``: a project that lints, tests at 100% coverage and simulates as written,
from any directory; drafts from OpenAI and Anthropic tool lists that lint points at until a
person fills them in; hostile tool lists refused with one clear line.

The commands run as real subprocesses in a temporary directory (no repository around them);
tests/test_package.py does the same from a wheel installed into a fresh venv.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

PYTHON = sys.executable


def callgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "callgate_rules.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("init") / "refunds"
    done = callgate("init", str(directory), cwd=directory.parent)
    assert done.returncode == 0, done.stderr
    return directory


def test_init_writes_the_project_it_describes(project: Path) -> None:
    written = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert written == [
        "README.md", "contracts/getOrder.yaml", "contracts/issueRefund.yaml",
        "examples/actors/agent.yaml", "examples/actors/viewer.yaml",
        "examples/calls/refund.json", "examples/scenarios/refunds.yaml",
        "examples/world.yaml", "policies/access.yaml", "policies/routing.yaml",
        "policies/tests/refunds_test.yaml"]
    contract = yaml.safe_load((project / "contracts/issueRefund.yaml").read_text())
    assert contract["spec"]["effect"] == "write"
    assert contract["metadata"]["owner"] == "owner@example.com"
    assert "OWNER" not in "".join(p.read_text() for p in project.rglob("*.yaml"))


def test_the_new_project_lints_clean(project: Path) -> None:
    done = callgate("lint", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 error(s), 0 warning(s)" in done.stderr


def test_the_new_project_tests_at_full_coverage(project: Path) -> None:
    done = callgate("test", "--coverage", "--fail-under", "100", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "total: 100.0%" in done.stdout
    assert " 0 failed" in done.stdout
    # what coverage left out, and why, is said
    assert "error class ambiguous: every look-up is by id" in done.stdout
    assert "route await_confirmation:" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_new_project_simulates(project: Path) -> None:
    done = callgate("simulate", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed" in done.stdout


def test_the_new_project_checks_its_example_call(project: Path) -> None:
    done = callgate("check", "--call", "examples/calls/refund.json", "--actor",
                    "examples/actors/agent.yaml", "--world", "examples/world.yaml",
                    "--format", "json", cwd=project)
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    assert decision["route"] == "execute" and decision["rule"] == "access/agents-refund"


def test_every_fault_case_of_the_write_tool_reaches_its_route(project: Path) -> None:
    done = callgate("test", "--format", "json", cwd=project)
    cases = {case["name"]: case for case in json.loads(done.stdout)["cases"]}
    assert cases["a destination that ignores the operation ID refunds twice"]["writes"] == 2
    assert cases["the refund was changed after it was made"]["error_class"] == \
        "reconcile_failed"
    assert cases["unreachable for good"]["route"] == "review"
    assert all(case["passed"] for case in cases.values())


def test_a_missing_case_lowers_coverage_and_is_named(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    callgate("init", str(copy), cwd=tmp_path)
    tests = copy / "policies/tests/refunds_test.yaml"
    document = yaml.safe_load(tests.read_text())
    document["spec"]["cases"] = [case for case in document["spec"]["cases"]
                                 if case["name"] != "an order refunded already"]
    tests.write_text(yaml.safe_dump(document, sort_keys=False))
    done = callgate("test", "--coverage", "--fail-under", "100", cwd=copy)
    assert done.returncode == 1
    assert "1/2 rules fired; never fired: not-refunded-yet" in done.stdout
    assert "below --fail-under 100%" in done.stderr


def test_init_never_overwrites_unless_forced(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "again"
    assert callgate("init", str(target), cwd=tmp_path).returncode == 0
    (target / "README.md").write_text("mine")
    refused = callgate("init", str(target), cwd=tmp_path)
    assert refused.returncode == 2 and "not overwriting" in refused.stderr
    assert (target / "README.md").read_text() == "mine"
    forced = callgate("init", str(target), "--force", "--owner", "ops@example.com",
                      cwd=tmp_path)
    assert forced.returncode == 0
    assert (target / "README.md").read_text() != "mine"
    assert "ops@example.com" in (target / "contracts/getOrder.yaml").read_text()


def test_init_in_the_current_directory(tmp_path: Path) -> None:
    done = callgate("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert callgate("simulate", cwd=tmp_path).returncode == 0


# Drafts from tool lists -------------------------------------------------------------------

REFUND = {"name": "issueRefund", "description": "Refund an order.",
          "schema": {"type": "object", "required": ["orderId", "amount"],
                     "properties": {"orderId": {"type": "string", "pattern": "^O-[0-9]+$"},
                                    "amount": {"type": "number", "minimum": 1}}}}
ORDER = {"name": "getOrder", "description": "Read an order.",
         "schema": {"type": "object", "required": ["orderId"],
                    "properties": {"orderId": {"type": "string"}}}}

OPENAI_CHAT = [{"type": "function", "function": {"name": t["name"],
                                                 "description": t["description"],
                                                 "parameters": t["schema"]}}
               for t in (REFUND, ORDER)]
OPENAI_RESPONSES = {"tools": [{"type": "function", "name": t["name"],
                               "description": t["description"], "parameters": t["schema"]}
                              for t in (REFUND, ORDER)]}
ANTHROPIC = [{"name": t["name"], "description": t["description"], "input_schema": t["schema"]}
             for t in (REFUND, ORDER)]


@pytest.mark.parametrize(("option", "tools"), [
    ("--from-openai", OPENAI_CHAT),
    ("--from-openai", OPENAI_RESPONSES),
    ("--from-anthropic", ANTHROPIC),
], ids=["openai-chat", "openai-responses", "anthropic"])
def test_drafts_from_a_tool_list_are_pointed_at_until_filled(
        tmp_path: Path, option: str, tools: Any) -> None:
    listing = tmp_path / "tools.json"
    listing.write_text(json.dumps(tools))
    drafted = tmp_path / "drafted"
    done = callgate("init", str(drafted), option, str(listing), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    contract = yaml.safe_load((drafted / "contracts/issueRefund.yaml").read_text())
    assert contract["metadata"]["description"] == "Refund an order."
    assert contract["spec"]["arguments"]["additionalProperties"] is False
    assert contract["spec"]["effect"] == "FILL-IN"  # neither API says; a person decides
    assert contract["spec"]["examples"] == [{"arguments": {"orderId": "FILL-IN", "amount": 1}}]
    findings = callgate("lint", str(drafted / "contracts"), str(drafted / "policies"),
                        cwd=tmp_path)
    errors = [line for line in findings.stdout.splitlines() if " error " in line]
    assert findings.returncode == 1
    assert {line.split(":")[0].rsplit("/", 1)[1] for line in errors} == {
        "issueRefund.yaml", "getOrder.yaml"}
    assert all("FILL-IN" in line and line.split(":")[1].isdigit() for line in errors), errors
    for name, effect in (("issueRefund", "write"), ("getOrder", "read")):
        path = drafted / "contracts" / f"{name}.yaml"
        document = yaml.safe_load(path.read_text())
        document["spec"]["effect"] = effect
        if effect == "write":
            document["spec"]["idempotency"] = "key"
        else:
            document["spec"].pop("idempotency")
        document["spec"]["examples"][0]["arguments"]["orderId"] = "O-1"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    filled = callgate("lint", str(drafted / "contracts"), str(drafted / "policies"),
                      cwd=tmp_path)
    assert filled.returncode == 0, filled.stdout


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "tools.json:1:2: not JSON"),
    ("[]", "expected a non-empty JSON list"),
    ('{"tools": 3}', "expected a non-empty JSON list"),
    ('[{"type": "web_search"}]', "only function tools can be drafted"),
    ('[{"type": "function", "function": {"name": "../../etc/passwd"}}]',
     "name must be a tool name"),
    ('[{"type": "function", "function": {"name": "a", "parameters": []}}]',
     "parameters must be a JSON Schema object"),
    ('[{"type": "function", "function": {"name": "a"}}, '
     '{"type": "function", "name": "a"}]', "the tool 'a' is defined 2 times"),
    ('["issueRefund"]', "a tool definition must be an object"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_hostile_tool_lists_are_refused_in_one_line(tmp_path: Path, text: str,
                                                    message: str) -> None:
    listing = tmp_path / "tools.json"
    listing.write_text(text)
    done = callgate("init", str(tmp_path / "out"), "--from-openai", str(listing),
                    cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_one_source_at_a_time(tmp_path: Path) -> None:
    listing = tmp_path / "tools.json"
    listing.write_text(json.dumps(ANTHROPIC))
    done = callgate("init", "--from-openai", str(listing), "--from-anthropic", str(listing),
                    cwd=tmp_path)
    assert done.returncode == 2
    assert "one source, not --from-openai and --from-anthropic" in done.stderr


def test_a_missing_tool_list_is_a_usage_error(tmp_path: Path) -> None:
    done = callgate("init", "--from-anthropic", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr


# Example projects ------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def test_init_list_names_every_example_with_what_it_shows(tmp_path: Path) -> None:
    done = callgate("init", "--list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == ["support-desk", "quickstart", "banking", "refunds"]
    assert "scenario suite" in done.stdout
    assert list(tmp_path.iterdir()) == []  # --list writes nothing


def test_the_support_desk_example_is_the_repositorys_and_runs_its_full_suite(
        tmp_path: Path) -> None:
    done = callgate("init", "--example", "support-desk", "desk", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    desk = tmp_path / "desk"
    # the files are the repository's own, byte for byte: one copy, in the repository
    for folder in ("contracts", "policies", "examples/scenarios"):
        for written in (desk / folder).rglob("*.yaml"):
            assert written.read_bytes() == (REPO / written.relative_to(desk)).read_bytes()
    assert not (desk / "examples" / "banking").exists()
    assert "next: cd desk && callgate lint && callgate test" in done.stderr
    simulated = callgate("simulate", cwd=desk)
    assert simulated.returncode == 0, simulated.stdout[-2000:] + simulated.stderr
    scenarios = sum(1 for _ in (REPO / "examples" / "scenarios").glob("*.yaml"))
    assert scenarios == 4 and simulated.stdout.rstrip().endswith(" 0 failed")
    passed = int(simulated.stdout.rstrip().splitlines()[-1].split()[0])
    assert passed >= 28  # the whole suite, as `callgate simulate` in the repository runs it
    tested = callgate("test", cwd=desk)
    assert tested.returncode == 0, tested.stdout[-2000:] + tested.stderr


def test_the_banking_example_runs_its_policy_tests_and_scenarios(tmp_path: Path) -> None:
    done = callgate("init", "--example", "banking", "bank", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    bank = tmp_path / "bank"
    assert (bank / "scenarios" / "run_history.yaml").is_file()
    for step, summary in ((("test",), "4 passed, 0 failed"), (("simulate",), "6 passed, 0 failed"),
                          (("lint",), "0 error(s)")):
        ran = callgate(*step, cwd=bank)
        assert ran.returncode == 0, (step, ran.stdout[-2000:], ran.stderr)
        assert summary in ran.stdout + ran.stderr


def test_the_refunds_example_is_the_template(tmp_path: Path) -> None:
    done = callgate("init", "--example", "refunds", "shop", "--owner", "me@example.com",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "owner: me@example.com" in (tmp_path / "shop/contracts/issueRefund.yaml").read_text()
    tested = callgate("test", "--coverage", "--fail-under", "100", cwd=tmp_path / "shop")
    assert tested.returncode == 0, tested.stdout[-2000:]


def test_an_unknown_example_or_two_sources_is_one_line(tmp_path: Path) -> None:
    done = callgate("init", "--example", "payroll", "x", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("callgate: no example named 'payroll'; `callgate init "
                                   "--list` names them: support-desk, quickstart, banking, "
                                   "refunds")
    listing = tmp_path / "tools.json"
    listing.write_text(json.dumps(ANTHROPIC))
    done = callgate("init", "--example", "banking", "--from-anthropic", str(listing),
                    cwd=tmp_path)
    assert done.returncode == 2
    assert "one source, not --example and --from-anthropic" in done.stderr
    assert not (tmp_path / "x").exists()


def test_an_example_never_overwrites_without_force(tmp_path: Path) -> None:
    assert callgate("init", "--example", "banking", "b", cwd=tmp_path).returncode == 0
    access = tmp_path / "b" / "policies" / "access.yaml"
    access.write_text("# mine\n")
    again = callgate("init", "--example", "banking", "b", cwd=tmp_path)
    assert again.returncode == 2 and "pass --force to replace" in again.stderr
    assert access.read_text() == "# mine\n"
    forced = callgate("init", "--example", "banking", "b", "--force", cwd=tmp_path)
    assert forced.returncode == 0
    assert access.read_bytes() == (REPO / "examples/banking/policies/access.yaml").read_bytes()
