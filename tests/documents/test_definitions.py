"""Named definitions: constants, tables and functions shared by every rule, expanded into a
rule's syntax tree before it is compiled (``callgate_rules.cel.definitions``), and declared
in a ``Definitions`` document that lint checks and the gate compiles once."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from callgate_rules.cel import syntax
from callgate_rules.cel.definitions import MAX_NODES, Definition, Definitions
from callgate_rules.cel.errors import CelCompileError
from callgate_rules.cel.parser import parse
from callgate_rules.cli import main
from callgate_rules.documents.compiler import compile_paths, load
from callgate_rules.documents.model import GateConfig
from callgate_rules.documents.source import read_data_file
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.gate import Gate

TABLES = [
    Definition("max_refund", "500.0"),
    Definition("fee_by_tier", '{"gold": 0.0, "silver": 2.5, "basic": 5.0}'),
    Definition("within_limit", "amount <= max_refund - fee_by_tier[tier]", ("amount", "tier")),
    Definition("any_over", "xs.exists(x, x > limit)", ("xs", "limit")),
]


def defined(*definitions: Definition) -> Definitions:
    found, problems = Definitions.of(definitions or TABLES)
    assert problems == []
    return found


def expanded(text: str, definitions: Definitions | None = None) -> syntax.Node:
    return (definitions or defined()).expand(parse(text))


@pytest.mark.parametrize(("rule", "meaning"), [
    ("args.amount <= max_refund", "args.amount <= 500.0"),
    ('fee_by_tier[actor.tier] < 3.0',
     '{"gold": 0.0, "silver": 2.5, "basic": 5.0}[actor.tier] < 3.0'),
    ("within_limit(args.amount, actor.tier)",
     'args.amount <= 500.0 - {"gold": 0.0, "silver": 2.5, "basic": 5.0}[actor.tier]'),
    ("!within_limit(args.amount + 1.0, 'gold') || has(actor.vip)",
     '!(args.amount + 1.0 <= 500.0 - {"gold": 0.0, "silver": 2.5, "basic": 5.0}["gold"]) '
     "|| has(actor.vip)"),
    ("any_over(args.items.map(i, i.price), max_refund)",
     "args.items.map(i, i.price).exists(x, x > 500.0)"),
])
def test_a_rule_means_what_its_definitions_stand_for(rule: str, meaning: str) -> None:
    assert expanded(rule) == parse(meaning)


def test_a_rules_own_variable_hides_a_definition_of_its_name() -> None:
    assert expanded("args.items.all(max_refund, max_refund > 1)") == \
        parse("args.items.all(max_refund, max_refund > 1)")
    assert expanded("cel.bind(max_refund, 3, max_refund + 1) + max_refund") == \
        parse("cel.bind(max_refund, 3, max_refund + 1) + 500.0")


def test_substitution_never_captures_an_arguments_name() -> None:
    # any_over's own iteration variable is x; the argument uses the rule's x
    tree = expanded("args.lists.all(x, any_over(x.prices, x.limit))")
    assert tree == parse("args.lists.all(x, x.prices.exists(x_1, x_1 > x.limit))")


def test_definitions_use_each_other_in_any_order() -> None:
    found = defined(Definition("b", "a * 2"), Definition("a", "c + 1"), Definition("c", "1"))
    assert found.expand(parse("b")) == parse("(1 + 1) * 2")


def test_an_error_in_a_definition_is_placed_where_the_rule_uses_it() -> None:
    tree = expanded("1 + \n  within_limit(2.0, 'gold')")
    assert {node.at.line for node in syntax.walk(tree)} == {1, 2}
    inner = [n for n in syntax.walk(tree) if isinstance(n, syntax.Literal) and n.value == 500.0]
    assert inner and inner[0].at.line == 2 and inner[0].at.column == 3


@pytest.mark.parametrize(("rule", "message", "column"), [
    ("within_limit(1.0)", "takes 2 argument(s), 1 given", 1),
    ("args.x && within_limit", "within_limit is a function of (amount, tier); call it", 11),
    ("max_refund(3) > 1", "max_refund is a constant, not a function", 1),
])
def test_a_wrong_use_is_a_compile_error_at_its_place(rule: str, message: str,
                                                     column: int) -> None:
    with pytest.raises(CelCompileError, match=re.escape(message)) as raised:
        expanded(rule)
    assert (raised.value.line, raised.value.column) == (1, column)


@pytest.mark.parametrize(("definitions", "name", "message"), [
    ([Definition("a", "b + 1"), Definition("b", "a + 1")], "a", "uses itself: a → b → a"),
    ([Definition("a", "a")], "a", "uses itself: a → a"),
    ([Definition("f", "f(x)", ("x",))], "f", "uses itself: f → f"),
    ([Definition("actor", "1")], "actor", "a name every rule already has"),
    ([Definition("a", "1"), Definition("a", "2")], "a", "defined twice"),
    ([Definition("f", "x", ("x", "x"))], "f", "parameter 'x' is given twice"),
    ([Definition("f", "args", ("args",))], "f", "would hide the variable"),
    ([Definition("a", "1 +")], "a", ""),
    ([Definition("f", "g(1)", ()), Definition("g", "x", ("x", "y"))], "f",
     "takes 2 argument(s), 1 given"),
])
def test_what_is_wrong_with_a_definition_names_it(definitions: list[Definition], name: str,
                                                  message: str) -> None:
    found, problems = Definitions.of(definitions)
    assert any(p.name == name and message in p.message for p in problems), problems
    assert name not in found.names or len([d for d in definitions if d.name == name]) > 1


def test_a_cycle_leaves_the_sound_definitions_usable() -> None:
    found, problems = Definitions.of([Definition("a", "b"), Definition("b", "a"),
                                      Definition("c", "2"), Definition("d", "a + c")])
    assert found.names == {"c"}
    assert {p.name for p in problems} == {"a", "b", "d"}


def test_an_exploding_expansion_is_refused_not_run() -> None:
    chain = [Definition("f0", "x + x", ("x",))] + [
        Definition(f"f{n}", f"f{n - 1}(x) + f{n - 1}(x)", ("x",)) for n in range(1, 30)]
    found, problems = Definitions.of(chain)
    last = max(int(name[1:]) for name in found.names)
    assert 5 < last < 29
    assert any(p.name == f"f{last + 1}" and f"more than {MAX_NODES} nodes" in p.message
               for p in problems)
    assert any(p.name == "f29" and "which has an error" in p.message for p in problems)
    with pytest.raises(CelCompileError, match="more than"):
        found.expand(parse(" + ".join([f"f{last}(1)"] * 4)))


@given(st.integers(-10**6, 10**6), st.sampled_from(["gold", "silver", "basic"]))
def test_expansion_is_the_same_tree_as_writing_it_out(amount: int, tier: str) -> None:
    rule = f"within_limit(double({amount}), '{tier}')"
    written = (f"double({amount}) <= 500.0 - "
               f"{{\"gold\": 0.0, \"silver\": 2.5, \"basic\": 5.0}}['{tier}']")
    assert expanded(rule) == parse(written)


# The Definitions document ---------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]

# The documentation's example (docs/reference/documents.md includes these files), run here as
# the tests' configuration: the reference contracts and policies with sendPayment, the access
# policy and a Definitions document replaced by the example's.
EXAMPLE = REPO / "docs" / "examples" / "definitions"
TABLES_DOCUMENT = (EXAMPLE / "policies" / "payment_tables.yaml").read_text(encoding="utf-8")
NEXT_LINE = TABLES_DOCUMENT.count("\n") + 1  # the line a definition appended to it is on
EXAMPLE_PAYMENT = (EXAMPLE / "contracts" / "sendPayment.yaml").read_text(encoding="utf-8")


LIMIT_RULE = """\
    - name: within-the-currencys-limit
      expression: within_limit(args.amount, args.currency)
      error_class: forbidden
      message: "{args.amount} {args.currency} is above this process's limit."
"""
assert LIMIT_RULE in EXAMPLE_PAYMENT, "the example contract holds the rule the tests vary"


def configuration(tmp_path: Path, definitions: str = TABLES_DOCUMENT,
                  rule: str = LIMIT_RULE) -> tuple[Path, Path]:
    contracts, policies = tmp_path / "contracts", tmp_path / "policies"
    shutil.copytree(REPO / "contracts", contracts)
    policies.mkdir()
    shutil.copy(REPO / "policies" / "routing.yaml", policies / "routing.yaml")
    shutil.copy(EXAMPLE / "policies" / "access.yaml", policies / "access.yaml")
    (contracts / "sendPayment.yaml").write_text(EXAMPLE_PAYMENT.replace(LIMIT_RULE, rule, 1))
    (policies / "tables.yaml").write_text(definitions)
    return contracts, policies


PAYMENT = {"name": "sendPayment", "arguments": {
    "recipientIban": "DE89370400440532013000", "currency": "GBP", "reference": "INV-1"}}
DANA = {"id": "U-7", "tenant": "acme", "role": "agent", "organizations": ["org-northwind"]}


def decide(config: GateConfig, amount: float, currency: str = "GBP",
           actor: dict[str, str] | None = None) -> tuple[str, str | None]:
    world = read_data_file(str(REPO / "examples" / "world.yaml"), "the world")
    call = {**PAYMENT, "arguments": {**PAYMENT["arguments"], "amount": amount,
                                     "currency": currency}}
    decision = Gate(config, resolvers=WorldResolvers(world)).check(
        call, actor=actor or DANA, session={"authenticated": True},
        conversation=[{"role": "user", "content": "Pay DE89370400440532013000 please"}])
    return str(decision.error_class), decision.rule


def test_rules_of_several_documents_use_the_shared_definitions(tmp_path: Path) -> None:
    config = load(configuration(tmp_path))
    assert decide(config, 3999.0) == ("None", "support-desk-access/payments-by-authenticated-agents")
    assert decide(config, 4000.5) == ("forbidden", "sendPayment/within-the-currencys-limit")
    assert decide(config, 4000.5, "EUR")[0] == "None"
    assert decide(config, 10.0, actor={**DANA, "role": "viewer"})[0] == "forbidden"
    # the definitions' document takes part in every decision it can change
    decision_versions = config.versions_for("sendPayment")
    assert decision_versions["Definitions/payment-tables"] == "1.0.0"
    rule = next(r for r in config.contracts["sendPayment"].rules
                if r.name == "within-the-currencys-limit")
    assert {("args", "amount"), ("args", "currency")} <= set(rule.expression.references)


def test_lint_passes_the_shared_definitions_and_reports_an_unused_one(tmp_path: Path) -> None:
    contracts, policies = configuration(tmp_path, TABLES_DOCUMENT + "    unused_fee: 2.5\n")
    findings = [str(f) for f in compile_paths([contracts, policies]).findings]
    assert len(findings) == 1 and "unused-definition" in findings[0], findings
    assert f"tables.yaml:{NEXT_LINE}:" in findings[0] and "'unused_fee'" in findings[0]
    result = CliRunner().invoke(main, ["lint", str(contracts), str(policies)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("definitions", "rule", "needles"), [
    # a wrong number of arguments, at the rule's own line and column
    (TABLES_DOCUMENT, LIMIT_RULE.replace("args.amount, args.currency", "args.amount"),
     ["sendPayment.yaml:", "takes 2 argument(s), 1 given"]),
    # a cycle, at the definition's key
    (TABLES_DOCUMENT + "    a: b + 1\n    b: a * 2\n", LIMIT_RULE,
     [f"tables.yaml:{NEXT_LINE}:", "uses itself: a → b → a"]),
    # an error inside a definition is reported in it, even before any rule uses it
    (TABLES_DOCUMENT + "    broken(x): x +\n", LIMIT_RULE, [f"tables.yaml:{NEXT_LINE}:", "broken"]),
    (TABLES_DOCUMENT + "    'bad name': 1\n", LIMIT_RULE,
     [f"tables.yaml:{NEXT_LINE}:", "write a name (letters, digits, _)"]),
    (TABLES_DOCUMENT + "    args: 1\n", LIMIT_RULE, ["a name every rule already has"]),
])
def test_what_is_wrong_is_said_at_its_file_and_line(tmp_path: Path, definitions: str,
                                                    rule: str, needles: list[str]) -> None:
    contracts, policies = configuration(tmp_path, definitions, rule)
    errors = [str(f) for f in compile_paths([contracts, policies]).errors]
    assert any(all(needle in error for needle in needles) for error in errors), errors
    result = CliRunner().invoke(main, ["lint", str(contracts), str(policies)])
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_a_name_defined_in_two_documents_is_an_error(tmp_path: Path) -> None:
    contracts, policies = configuration(tmp_path)
    (policies / "more.yaml").write_text(TABLES_DOCUMENT.replace("payment-tables", "more"))
    errors = [str(f) for f in compile_paths([contracts, policies]).errors]
    assert any("defined twice" in error for error in errors), errors


def test_the_definitions_are_compiled_once_per_configuration(tmp_path: Path) -> None:
    contracts, policies = configuration(tmp_path)
    compilation = compile_paths([contracts, policies])
    assert compilation.config is not None
    # every rule of the sendPayment contract reads through the one parsed table
    assert compilation.config.definition_documents[0].key == "Definitions/payment-tables"


def test_lint_type_checks_a_rule_through_its_definitions(tmp_path: Path) -> None:
    # the function's body compares a number with a text once the arguments are substituted
    contracts, policies = configuration(
        tmp_path, rule=LIMIT_RULE.replace("within_limit(args.amount, args.currency)",
                                          "within_limit(args.reference, args.currency)"))
    result = CliRunner().invoke(main, ["lint", str(contracts), str(policies)])
    assert result.exit_code == 1, result.output
    line = next(text for text in result.output.splitlines() if "sendPayment.yaml" in text)
    assert "within-the-currencys-limit" in line and "error no-overload" in line
    # reported at the rule's own line in the contract, not inside the Definitions document
    assert "tables.yaml" not in line
