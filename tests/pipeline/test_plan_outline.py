"""A tool's plan reads as its policy, and names only what it binds.

``gate.plan(tool).outline()`` shows the steps in order without the code; the generated
source has each look-up's and rule's CEL text in a comment above its code; every name the
source uses resolves to what the plan bound (the step functions themselves, by reference,
so a rename is seen by mypy and rename tools and cannot silently break a plan). The plans
checked are those of every shipped configuration and of the test configurations that
reach the rarer shapes (shadow modes, conditional and listing look-ups, approvals)."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate_rules import provenance
from callgate_rules.pipeline import argument_origins, authorize, lookups, validate
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.plan import CALLED, ToolPlan, called
from callgate_rules.pipeline.plan_outline import described
from tests.conftest import REPO

from .test_plan import SHADOWED_ACCESS
from .test_steps import TINY_ACCESS, TINY_TOOLS, TINY_WORLD

SHIPPED = [("contracts", "policies"), ("examples/banking/contracts", "examples/banking/policies"),
           *((f"benchmarks/agentdojo/{suite}/contracts", f"benchmarks/agentdojo/{suite}/policies")
             for suite in ("banking", "slack", "travel", "workspace")),
           ("tests/data/approval_covers",)]


def plans_of(gate: Gate) -> Iterator[ToolPlan]:
    for tool in sorted(gate.config.contracts):
        yield gate.plan(tool)


@pytest.fixture(scope="module")
def every_plan(tmp_path_factory: pytest.TempPathFactory) -> list[ToolPlan]:
    """The plan of every tool of every shipped configuration and of the test ones."""
    found = [plan for paths in SHIPPED
             for plan in plans_of(Gate.from_paths(*(REPO / path for path in paths)))]
    tiny = tmp_path_factory.mktemp("tiny")
    (tiny / "tools.yaml").write_text(TINY_TOOLS, encoding="utf-8")
    (tiny / "access.yaml").write_text(TINY_ACCESS, encoding="utf-8")
    shadowed = tmp_path_factory.mktemp("shadowed")
    (shadowed / "config.yaml").write_text(SHADOWED_ACCESS, encoding="utf-8")
    for directory in (tiny, shadowed):
        found += plans_of(Gate.from_paths(directory))
    assert len(found) >= 40
    return found


# The outline -------------------------------------------------------------------------------


def test_the_outline_of_create_follow_up_reads_as_its_policy(gate: Gate) -> None:
    plan = gate.plan("createFollowUp")
    outline = plan.outline()
    print(outline)  # shown with -s: the outline the closing note quotes
    lines = outline.splitlines()
    assert lines[0] == "plan of createFollowUp v1.0.0"
    assert "def " not in outline and "_validate" not in outline  # no code inlined
    # the steps in order, each named where it starts
    steps = [line.split()[:2] for line in lines[1:] if not line.startswith(" ")]
    assert steps == [["2", "PARSE"], ["3", "VALIDATE"], ["4", "AUTHORIZE"], ["3", "VALIDATE"],
                     ["4", "AUTHORIZE"], ["3", "VALIDATE"], ["ALLOWED", "in"]]
    limits = gate.config.routing.input_limits
    assert f"at most {limits.max_bytes:,} bytes" in lines[1]
    # each look-up with its collection and key, each rule with its CEL text, mode and class
    assert "look-up ticket: one record of tickets whose id is args.ticketId" in outline
    assert "look-up assignee: one record of users whose id is args.assigneeId" in outline
    assert "deny support-desk-access/suspended-actors (enforce)" in outline
    assert "allow support-desk-access/follow-up-own-tenant (enforce):" in outline
    assert 'rule ticket-open (enforce, conflict): ticket.status != "closed"' in outline
    words = " ".join(outline.split())  # wrapped lines joined again
    for rule in plan.rules.rules:
        assert " ".join(rule.when.source.split()) in words
    places = [words.index(f"rule {rule.name} (enforce, {rule.error_class}): "
                          f"{rule.expression.source}") for rule in plan.contract.rules]
    assert places == sorted(places) and len(places) == 4  # in declared order
    assert max(len(line) for line in lines) <= 100


def test_the_outline_in_the_docs_is_the_one_printed(gate: Gate) -> None:
    """docs/explanation/pipeline.md shows createFollowUp's outline as it is printed."""
    page = (REPO / "docs" / "explanation" / "pipeline.md").read_text(encoding="utf-8")
    shown = page.split("For `createFollowUp` it prints, first:\n\n```text\n", 1)[1]
    assert shown.split("```", 1)[0] == gate.plan("createFollowUp").outline()


def test_an_outline_shows_modes_conditions_and_lists(every_plan: list[ToolPlan]) -> None:
    by_tool = {plan.contract.name: plan for plan in every_plan}
    assert "deny shadowed-access/audited-deny (audit): " \
           'args.text == "audit"' in by_tool["guarded"].outline()
    conditional = by_tool["conditional"].outline()
    assert '    only when: args.text != "skip"' in conditional
    assert "look-up tickets: the records of tickets whose tenant is args.tenant" \
        in by_tool["listing"].outline()
    assert "rule needs-a-person (enforce, confirmation_required)" in by_tool["guarded"].outline()
    assert "the first rule that asks for confirmation" in by_tool["guarded"].outline()


# The CEL text above its code ---------------------------------------------------------------


def test_each_rule_has_its_cel_text_in_a_comment_above_its_code(
        every_plan: list[ToolPlan]) -> None:
    checked = 0
    for plan in every_plan:
        source = plan.source
        comments = " ".join(line.strip().removeprefix("#") for line in source.splitlines()
                            if line.strip().startswith("#"))
        comments = " ".join(comments.split())
        for index, rule in enumerate(plan.contract.rules):
            text = " ".join(rule.expression.source.split())
            if not text.isprintable():
                continue  # escaped in the comment
            assert f"rule {rule.name} (" in comments and text in comments, (plan, rule.name)
            heading = source.index(f"rule {rule.name} (")  # in the comment
            assert heading < source.index(f"_rule{index}_expression"), rule.name
            checked += 1
        for rule in plan.rules.rules:
            assert " ".join(rule.when.source.split()) in comments, rule.qualified_name
        for lookup in plan.contract.lookups:
            assert f"look-up {lookup.name}: " in comments and lookup.key.source in comments
    assert checked >= 30


@given(heading=st.text(min_size=1, max_size=60), cel=st.none() | st.text(max_size=300),
       width=st.integers(20, 100))
def test_a_description_is_lines_of_python_comments_that_keep_every_word(
        heading: str, cel: str | None, width: int) -> None:
    lines = described(heading, cel, width)
    source = "".join(f"# {line}\n" for line in lines)
    compile(source, "<comments>", "exec")  # each line a comment: nothing breaks out
    assert len(source.splitlines()) == len(lines)  # as linecache and tracebacks count them
    words = [word for text in (heading, cel or "") for word in text.split()
             if word.isprintable()]
    kept = " ".join(lines)
    assert all(word in kept for word in words)


# Names bound by reference ------------------------------------------------------------------


def unresolved(plan: ToolPlan) -> list[str]:
    """Each name the plan's source reads that its namespace does not bind: a global that is
    not there, or an attribute of a bound table of functions that it does not have."""
    namespace = plan.decide.__globals__
    tree = ast.parse(plan.source)
    local = {node.id for node in ast.walk(tree)
             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    local |= {node.name for node in ast.walk(tree)
              if isinstance(node, ast.ExceptHandler) and node.name}
    local |= {arg.arg for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
              for arg in node.args.args}
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and node.id not in local and node.id not in namespace \
                and not hasattr(builtins, node.id):
            missing.append(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in CALLED \
                and not callable(getattr(namespace.get(node.value.id), node.attr, None)):
            missing.append(f"{node.value.id}.{node.attr}")
    return missing


def test_every_name_a_plan_uses_is_bound(every_plan: list[ToolPlan]) -> None:
    used: set[str] = set()
    for plan in every_plan:
        assert unresolved(plan) == [], plan.contract.name
        used.update(name for name in map(called, [f for fs in CALLED.values() for f in fs])
                    if name in plan.source)
    # the functions, not the modules, are bound
    for plan in every_plan:
        modules = [name for name, value in plan.decide.__globals__.items()
                   if isinstance(value, ModuleType) and name != "__builtins__"]
        assert modules == [], plan.contract.name
    # and the plans seen call most of them (the rest only in shapes no config here has)
    assert len(used) >= 12, used


def test_a_name_a_plan_does_not_bind_is_caught(gate: Gate) -> None:
    """The check above fails on a plan whose source names a function it did not bind."""
    plan = Gate(gate.config).plan("createFollowUp")  # made here, not by another test
    broken = object.__new__(ToolPlan)
    broken.source = plan.source.replace("_validate.unmatched(", "_validate.unmatch(") \
        .replace("_failure_of(", "_fail_of(", 1)
    broken.decide = plan.decide
    assert sorted(set(unresolved(broken))) == ["_fail_of", "_validate.unmatch"]


def test_a_plan_names_each_function_by_the_function_itself() -> None:
    """A renamed step function is renamed in every plan: its name comes from ``__name__``;
    a function not bound for plans cannot be written into one."""
    assert called(validate.unmatched) == f"_validate.{validate.unmatched.__name__}"
    assert called(authorize.access_verdict) == "_authorize.access_verdict"
    assert called(lookups.ask) == "_lookups.ask"
    for step, functions in CALLED.items():
        module: Any = {"_validate": validate, "_authorize": authorize, "_lookups": lookups,
                       "_origins": argument_origins, "_provenance": provenance}[step]
        for function in functions:
            assert getattr(module, function.__name__) is function
    with pytest.raises(KeyError):
        called(validate.example_call)


def test_a_plan_decides_with_the_functions_it_names(tmp_path: Path, ref: Any,
                                                    compile_gate: Any) -> None:
    """The bound tables hold the step functions themselves."""
    ref.write(tmp_path / "tools.yaml", TINY_TOOLS)
    ref.write(tmp_path / "access.yaml", TINY_ACCESS)
    gate: Gate = compile_gate(tmp_path, world=TINY_WORLD)
    namespace = gate.plan("strict").decide.__globals__
    assert namespace["_validate"].unmatched is validate.unmatched
    assert namespace["_lookups"].ask is lookups.ask
    assert namespace["_authorize"].access_verdict is authorize.access_verdict
