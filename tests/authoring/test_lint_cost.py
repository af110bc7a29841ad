"""``callgate lint`` refuses a rule whose estimated worst-case cost is over the limit
(``cel-cost``), at file:line:col of its costliest comprehension, with the estimate, and says
how to bound it; the same rule passes once ``maxItems`` bounds what it runs over."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from callgate_rules.authoring.lint import lint
from callgate_rules.cli import main
from tests.authoring.test_lint import POLICY, ROUTING, place

TRIPLE = "args.items.all(a, args.items.all(b, args.items.all(c, a + b + c >= 0)))"


def contract(rule: str, items: str = "{type: integer}", bound: str = "") -> str:
    return f"""\
apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: tagItems
  version: "1.0.0"
  owner: t@example.com
  description: tag items
spec:
  effect: read
  arguments:
    type: object
    required: [items]
    properties:
      items:
        type: array{bound}
        items: {items}
  rules:
    - name: sums
      expression: {rule}
      error_class: invalid_argument
      message: The items do not add up.
  examples:
    - arguments: {{items: [1, 2]}}
"""


def written(tmp_path: Path, text: str, routing: str = ROUTING) -> list[Path]:
    paths = [tmp_path / "contract.yaml", tmp_path / "policy.yaml", tmp_path / "routing.yaml"]
    for path, content in zip(paths, (text, POLICY, routing), strict=True):
        path.write_text(content, encoding="utf-8")
    return paths


def costs(tmp_path: Path, text: str, routing: str = ROUTING) -> list[tuple[int, int, str]]:
    return [(f.location.line, f.location.column, f.message)
            for f in lint(written(tmp_path, text, routing)) if f.code == "cel-cost"]


def test_a_nested_comprehension_over_an_unbounded_list_is_refused_at_its_place(
        tmp_path: Path) -> None:
    text = contract(f'"{TRIPLE}"')
    [(line, column, message)] = costs(tmp_path, text)
    # the outermost comprehension: ``all`` after ``args.items.``
    assert (line, column) == place(text, "all(a,")
    estimate = int(re.search(r"cost of this expression is ([\d,]+)", message)
                   .group(1).replace(",", ""))
    assert estimate > 32_768 ** 3  # the parse step's limit: 64 KiB holds 32,768 items
    assert "over the limit of 1,000,000" in message
    assert "args.items has no maxItems" in message
    assert "add maxItems to args.items in the arguments schema of tagItems" in message


def test_the_same_rule_passes_once_max_items_bounds_it(tmp_path: Path) -> None:
    assert costs(tmp_path, contract(f'"{TRIPLE}"', bound="\n        maxItems: 20")) == []


def test_a_bound_too_large_for_the_nesting_is_refused_with_its_size(tmp_path: Path) -> None:
    [(_, _, message)] = costs(tmp_path, contract(f'"{TRIPLE}"',
                                                 bound="\n        maxItems: 700"))
    assert "args.items (up to 700)" in message
    assert "has no maxItems" not in message  # declared: nothing to declare, only to lower


def test_a_single_comprehension_within_the_parse_limits_needs_no_declared_bound(
        tmp_path: Path) -> None:
    # 32,768 items at most, a few operations each: under the limit without maxItems
    assert costs(tmp_path, contract('"args.items.all(i, i >= 0)"')) == []


def test_the_limit_is_the_routing_tables(tmp_path: Path) -> None:
    rule = contract('"args.items.all(i, i >= 0)"', bound="\n        maxItems: 100")
    strict = ROUTING + "  cel:\n    cost_limit: 100\n"
    [(_, _, message)] = costs(tmp_path, rule, strict)
    assert "over the limit of 100 " in message
    assert costs(tmp_path, rule) == []


def test_unbounded_strings_in_a_loop_say_which_max_length_to_add(tmp_path: Path) -> None:
    text = contract('"args.items.all(i, args.items.exists(j, i.matches(j)))"',
                    items="{type: string}", bound="\n        maxItems: 50")
    [(_, _, message)] = costs(tmp_path, text)
    assert "args.items[] has no maxLength" in message


def test_the_command_fails_and_prints_file_line_col(tmp_path: Path) -> None:
    text = contract(f'"{TRIPLE}"')
    written(tmp_path, text)
    result = CliRunner().invoke(main, ["lint", str(tmp_path)])
    assert result.exit_code == 1, result.output
    line, column = place(text, "all(a,")
    assert f"contract.yaml:{line}:{column}: error cel-cost" in result.output


@pytest.mark.parametrize("limit", [0, 1_000_001])
def test_a_limit_outside_what_the_run_time_budget_backs_is_a_schema_error(
        tmp_path: Path, limit: int) -> None:
    findings = lint(written(tmp_path, contract('"true"'),
                            ROUTING + f"  cel:\n    cost_limit: {limit}\n"))
    assert any(f.code == "schema" and "cost_limit" in f.message for f in findings), findings


def test_a_cost_only_callgates_own_data_makes_is_a_note_not_an_error(tmp_path: Path) -> None:
    # ``reads`` (the run's tool results) has no schema anyone could bound: the run-time
    # budget bounds it, and lint says so without refusing the rule
    rule = contract('"!reads.exists(r, reads.exists(s, r.tool == s.tool && r != s))"')
    findings = [f for f in lint(written(tmp_path, rule), notes=True) if f.code == "cel-cost"]
    assert [f.severity for f in findings] == ["note"]
    assert "run-time budget" in findings[0].message
    assert not any(f.code == "cel-cost" for f in lint(written(tmp_path, rule)))
