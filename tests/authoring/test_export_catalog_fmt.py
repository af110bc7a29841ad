"""The policy authoring toolchain: ``callgate export``, ``callgate catalog``, ``callgate fmt``.

Exported tool lists are validated against the published SDK types (openai, anthropic, mcp).
Importing the three SDKs costs seconds, so each runs in its own child process, started by
the first test of this module and collected by the last ones: they import in parallel while
the other tests run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import callgate_rules.cli.authoring as cli_module
from callgate_rules.authoring.catalog import (
    DECIDING_ORDER,
    build_catalog,
    load_catalog,
    render_html,
    render_markdown,
)
from callgate_rules.authoring.fmt import (
    WIDTH,
    cel_scalar,
    fold_positions,
    format_paths,
    format_text,
)
from callgate_rules.cli import main
from callgate_rules.documents.compiler import load
from callgate_rules.integrations.formats import (
    TOOL_FORMATS,
    ToolDefinitionError,
    openai_strict_schema,
    tool_definitions,
)

# A contract with what the reference contracts lack: nested objects, arrays of objects,
# enums, a default, numeric bounds — and text that must be escaped in HTML.
ORDER_CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: placeOrder
  version: "2.1.0"
  owner: shop-ops@example.com
  description: Place an order <script>alert("owned")</script> & pay later.
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [customer, lines]
    properties:
      customer:
        type: object
        required: [id]
        properties:
          id: {type: string, pattern: "^C-[0-9]+$", description: the customer's ID}
          tier: {type: string, enum: [basic, gold]}
      lines:
        type: array
        minItems: 1
        maxItems: 20
        items:
          type: object
          required: [sku, quantity]
          properties:
            sku: {type: string, minLength: 1}
            quantity: {type: integer, minimum: 1, maximum: 99}
      delivery: {type: string, enum: [standard, express], default: standard}
      tags: {type: array, items: {type: string}, uniqueItems: true}
  rules:
    - name: few-express-lines
      expression: args.delivery != "express" || size(args.lines) <= 5
      error_class: invalid_argument
      message: Express delivery takes at most 5 lines <b>per order</b>.
  examples:
    - description: one line, standard delivery
      arguments: {customer: {id: C-1, tier: gold}, lines: [{sku: A-1, quantity: 2}]}
"""

ORDER_POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata:
  name: shop-access
  version: "3"
  owner: security@example.com
  description: Who may order.
spec:
  rules:
    - name: nobody-on-friday
      description: Orders <i>wait</i> for Monday.
      effect: deny
      tools: ["*"]
      when: now.getDayOfWeek() == 5
      message: No orders on Fridays.
"""


def _write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def order_dirs() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        contracts = _write(root / "contracts", "order.yaml", ORDER_CONTRACT).parent
        policies = _write(root / "policies", "access.yaml", ORDER_POLICY).parent
        yield contracts, policies


@pytest.fixture(scope="module")
def order_config(order_dirs: tuple[Path, Path]) -> Any:
    return load(order_dirs)


# The SDK checks, in child processes ----------------------------------------------------------

# Each child validates every item of each of its formats and prints the problems as JSON.
# TypedDict validation silently drops keys it does not know, so an item passes only if the
# validated value, turned back into JSON, is the item itself: nothing was dropped.
_SDK_CHILD = """
import json, sys
from pydantic import TypeAdapter

def typed_dict(kind):
    adapter = TypeAdapter(kind)
    def check(item):
        return json.loads(json.dumps(adapter.validate_python(item), default=list)) == item
    return check

def model(kind):
    def check(item):
        dumped = kind.model_validate(item).model_dump(by_alias=True, exclude_none=True,
                                                      mode="json")
        return dumped == item
    return check

%s

problems = []
for style, items in json.load(open(sys.argv[1])).items():
    for item in items:
        try:
            kept = CHECKS[style](item)
        except Exception as error:
            problems.append([style, item.get("name") or item.get("function", {}).get("name"),
                             type(error).__name__ + ": " + str(error)[:300]])
            continue
        if not kept:
            problems.append([style, item.get("name"), "fields were dropped"])
print(json.dumps(problems))
"""

# sdk -> (the formats it checks, the code that imports its types)
_SDK_CHECKS = {
    "openai": (("openai", "openai-responses", "openai-strict", "openai-responses-strict"), """
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
CHECKS = {"openai": typed_dict(ChatCompletionToolParam),
          "openai-responses": typed_dict(FunctionToolParam),
          "openai-strict": typed_dict(ChatCompletionToolParam),
          "openai-responses-strict": typed_dict(FunctionToolParam)}
"""),
    "anthropic": (("anthropic",), """
from anthropic.types import ToolParam
CHECKS = {"anthropic": typed_dict(ToolParam)}
"""),
    "mcp": (("mcp",), """
from mcp.types import Tool
CHECKS = {"mcp": model(Tool)}
"""),
}

# One item per format that its SDK type must refuse: proof the check can fail at all.
_BROKEN = {
    "openai": {"type": "function", "function": {"description": "no name"}},
    "openai-responses": {"type": "function", "name": "noParameters"},
    "openai-strict": {"type": "function", "function": {"description": "no name"}},
    "openai-responses-strict": {"type": "function", "name": "noParameters"},
    "anthropic": {"name": "noSchema", "description": "input_schema is missing"},
    "mcp": {"name": "noSchema", "description": "inputSchema is missing"},
}


@pytest.fixture(scope="module", autouse=True)
def sdk_checks(gate: Any, order_config: Any, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Mapping[str, subprocess.Popen[str]]]:
    """Start one child per SDK on the reference and the generated tool lists (plus one broken
    item per format); tests read each child's answer when they need it."""
    directory = tmp_path_factory.mktemp("sdk")
    children = {}
    for sdk, (styles, imports) in _SDK_CHECKS.items():
        tools = {style: tool_definitions(gate.config, style)
                 + tool_definitions(order_config, style) + [_BROKEN[style]]
                 for style in styles}
        data = _write(directory, f"{sdk}.json", json.dumps(tools))
        children[sdk] = subprocess.Popen(
            [sys.executable, "-c", _SDK_CHILD % imports, str(data)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield children
    for child in children.values():
        if child.poll() is None:
            child.kill()
        child.communicate()


def _sdk_problems(child: subprocess.Popen[str]) -> list[list[str]]:
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 0, stderr
    problems: list[list[str]] = json.loads(stdout)
    return problems


# export ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("style", list(TOOL_FORMATS))
def test_every_format_keeps_a_closed_object_schema(style: str, gate: Any,
                                                   order_config: Any) -> None:
    for config in (gate.config, order_config):
        tools = tool_definitions(config, style)
        assert [_name(tool) for tool in tools] == sorted(config.contracts)
        for tool in tools:
            schema = _schema(tool)
            assert schema["type"] == "object"  # every provider requires it at the top
            assert not {"oneOf", "anyOf", "allOf"} & set(schema)
            assert schema["additionalProperties"] is False
            contract = config.contracts[_name(tool)]
            # strict mode: the same schema in the subset it accepts (tests/frameworks)
            assert schema == (openai_strict_schema(contract.arguments_schema)
                              if style.endswith("-strict") else contract.arguments_schema)
            assert _description(tool) == contract.document.description


def test_nested_objects_stay_closed_in_the_export(order_config: Any) -> None:
    (tool,) = tool_definitions(order_config, "openai")
    properties = tool["function"]["parameters"]["properties"]
    assert properties["customer"]["additionalProperties"] is False
    assert properties["lines"]["items"]["additionalProperties"] is False
    assert properties["delivery"]["enum"] == ["standard", "express"]


def test_the_export_is_a_copy_the_caller_may_change(order_config: Any) -> None:
    (tool,) = tool_definitions(order_config, "anthropic")
    tool["input_schema"]["properties"].clear()
    assert order_config.contracts["placeOrder"].arguments_schema["properties"]


def test_examples_go_to_anthropic_input_examples_and_nowhere_else(gate: Any) -> None:
    for tool in tool_definitions(gate.config, "anthropic"):
        contract = gate.config.contracts[tool["name"]]
        assert tool["input_examples"] == [dict(e.arguments) for e in contract.examples]
    for style in ("openai", "openai-responses", "mcp"):
        assert "example" not in json.dumps(tool_definitions(gate.config, style)).lower()


def test_strict_mode_is_sent_off_for_both_openai_apis(gate: Any) -> None:
    assert {t["function"]["strict"] for t in tool_definitions(gate.config, "openai")} == {False}
    assert {t["strict"] for t in tool_definitions(gate.config, "openai-responses")} == {False}


def test_mcp_hints_follow_the_effect(gate: Any) -> None:
    for tool in tool_definitions(gate.config, "mcp"):
        read = not gate.config.contracts[tool["name"]].is_write
        assert tool["annotations"] == {"readOnlyHint": read, "destructiveHint": not read,
                                       "idempotentHint": read}
        assert tool["title"] and "outputSchema" not in tool  # no reference contract has one


def test_a_name_openai_and_anthropic_reject_is_reported_with_its_file(tmp_path: Path) -> None:
    text = ORDER_CONTRACT.replace("name: placeOrder", "name: shop.placeOrder")
    path = _write(tmp_path / "contracts", "order.yaml", text)
    config = load([path])
    for style in ("openai", "openai-responses", "anthropic"):
        with pytest.raises(ToolDefinitionError, match=rf"^{path}:1:1: tool 'shop.placeOrder'"):
            tool_definitions(config, style)
    assert _name(tool_definitions(config, "mcp")[0]) == "shop.placeOrder"  # MCP allows dots

    result = CliRunner().invoke(main, ["export", "--format", "openai",
                                       str(tmp_path / "contracts")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"callgate: {path}:1:1: tool 'shop.placeOrder': OpenAI")
    assert "rename the tool" in result.stderr


def test_cli_export_prints_json_and_writes_a_file(gate: Any, ref: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_module, "load", lambda paths: gate.config)
    runner = CliRunner()
    result = runner.invoke(main, ["export", "--format", "mcp", str(ref.contracts)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == tool_definitions(gate.config, "mcp")

    output = tmp_path / "tools.json"
    result = runner.invoke(main, ["export", "--format", "anthropic", "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert json.loads(output.read_text()) == tool_definitions(gate.config, "anthropic")
    assert result.stdout == ""
    assert result.stderr == f"wrote {output}\n"


def test_cli_export_rejects_an_unknown_format() -> None:
    result = CliRunner().invoke(main, ["export", "--format", "gemini"])
    assert result.exit_code == 2
    assert "'gemini' is not one of 'openai', 'openai-responses', 'anthropic', 'mcp', " \
        "'openai-strict', 'openai-responses-strict'" in result.stderr


# catalog --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference_catalog(gate: Any) -> Any:
    return build_catalog(gate.config)


@pytest.mark.parametrize("render", [render_markdown, render_html])
def test_the_catalogue_describes_every_reference_tool(render: Any, gate: Any,
                                                      reference_catalog: Any) -> None:
    import html

    page = html.unescape(render(reference_catalog))  # Markdown escapes & and < too
    config = gate.config
    assert DECIDING_ORDER in page
    for name, contract in config.contracts.items():
        assert f"{name}</h2>" in page or f"## {name}\n" in page
        assert contract.document.owner in page
        assert contract.document.description in page
        for rule in contract.rules:
            assert rule.name in page
            assert rule.expression.source in page
            assert rule.message.text in page
            assert str(rule.route or config.routing.route_for(rule.error_class)) in page
        for lookup in contract.lookups:
            assert lookup.key.source in page
        for access_rule in config.policies.rules_for(name):
            assert access_rule.qualified_name in page
            assert access_rule.when.source in page
        example = json.dumps({"name": name, "arguments": contract.examples[0].arguments},
                             indent=2, ensure_ascii=False)
        assert example in page


def test_the_catalogue_lists_arguments_with_their_bounds(order_config: Any) -> None:
    markdown = render_markdown(build_catalog(order_config))
    assert "| `customer.id` | string | yes | the customer's ID | pattern `^C-[0-9]+$` |" in (
        markdown)
    assert "| `customer.tier` | string | no | — | one of `\"basic\", \"gold\"` |" in markdown
    assert "| `lines` | array of object | yes | — | items 1–20 |" in markdown
    assert "| `lines[].quantity` | integer | yes | — | ≥ 1; ≤ 99 |" in markdown
    assert ("| `delivery` | string | no | — | one of `\"standard\", \"express\"`; "
            "default `\"standard\"` |") in markdown
    assert "| `tags` | array of string | no | — | no duplicates |" in markdown
    assert "Any other argument is rejected (`unexpected_argument`)." in markdown


def test_the_catalogue_says_when_no_rule_allows_a_tool(order_config: Any) -> None:
    markdown = render_markdown(build_catalog(order_config))
    assert "**No allow rule names this tool: every call is denied.**" in markdown
    assert "| `shop-access/nobody-on-friday` | deny | every tool (`*`) |" in markdown
    assert "| No orders on Fridays. |" in markdown


def test_html_escapes_every_text_from_the_documents(order_dirs: tuple[Path, Path]) -> None:
    page = render_html(load_catalog(*order_dirs))
    assert "<script" not in page
    assert "Place an order &lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt; &amp; pay" in (
        page)
    assert "Express delivery takes at most 5 lines &lt;b&gt;per order&lt;/b&gt;." in page
    assert "Orders &lt;i&gt;wait&lt;/i&gt; for Monday." in page  # the rule's description
    assert not any(tag in page for tag in ("<link", "src=", "@import"))  # self-contained
    assert page.count("<style>") == 1


def test_markdown_cannot_turn_a_description_into_html(order_config: Any) -> None:
    markdown = render_markdown(build_catalog(order_config))
    assert "<script" not in markdown
    assert "Place an order &lt;script>alert(\"owned\")&lt;/script> &amp; pay later." in markdown


def test_cli_catalog_writes_markdown_and_html(order_dirs: tuple[Path, Path],
                                              tmp_path: Path) -> None:
    contracts, policies = (str(p) for p in order_dirs)
    runner = CliRunner()
    result = runner.invoke(main, ["catalog", contracts, policies])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Function catalogue\n")
    output = tmp_path / "catalog.html"
    result = runner.invoke(main, ["catalog", contracts, policies,
                                  "--format", "html", "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert output.read_text().startswith("<!DOCTYPE html>")


def test_cli_catalog_reports_broken_documents_in_one_line_each(tmp_path: Path) -> None:
    broken = _write(tmp_path / "contracts", "order.yaml",
                    ORDER_CONTRACT.replace("effect: write", "effect: sometimes"))
    result = CliRunner().invoke(main, ["catalog", str(broken.parent)])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith(f"{broken}:9:11: error schema")


# fmt ------------------------------------------------------------------------------------------

MESSY = """\
spec:
    rules:
    -   expression: "args.x > 0"   # must be positive
        name: positive


        message: x must be positive
        error_class: invalid_argument
    effect: read
    examples:
    - arguments: {x: 1}
    # the schema
    arguments:
        type: object
        properties:
            x: {type: integer}
metadata: {owner: me@example.com, name: t, version: "1", description: A test tool.}
kind: ToolContract
apiVersion: callgate/v1
"""

MESSY_FORMATTED = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: t, version: "1", owner: me@example.com, description: A test tool.}
spec:
  effect: read
  # the schema
  arguments:
    type: object
    properties:
      x: {type: integer}
  rules:
    - name: positive
      expression: args.x > 0  # must be positive
      error_class: invalid_argument

      message: x must be positive
  examples:
    - arguments: {x: 1}
"""


def test_a_messy_document_gets_the_canonical_layout() -> None:
    assert format_text(MESSY, "messy.yaml") == MESSY_FORMATTED
    assert format_text(MESSY_FORMATTED, "messy.yaml") == MESSY_FORMATTED


COMMENTED = """\
# Payments: owned by finance-ops.

apiVersion: callgate/v1
kind: AccessPolicy
metadata:
  name: p   # short on purpose
  description: d
  owner: o
  version: 1
spec:
  rules:
    # Reads are fine.
    - when: actor.role == "agent"  # agents only
      effect: allow
      name: read
      tools: [getInvoice]
  # The actor's fields.
  actor: {type: object}
# end of policy
"""

COMMENTED_FORMATTED = """\
# Payments: owned by finance-ops.

apiVersion: callgate/v1
kind: AccessPolicy
metadata:
  name: p  # short on purpose
  version: 1
  owner: o
  description: d
spec:
  # The actor's fields.
  actor: {type: object}
  rules:
    # Reads are fine.
    - name: read
      effect: allow
      tools: [getInvoice]
      when: actor.role == "agent"  # agents only
# end of policy
"""


def test_comments_move_with_the_key_or_item_they_describe() -> None:
    assert format_text(COMMENTED, "p.yaml") == COMMENTED_FORMATTED


def test_the_reference_documents_keep_data_and_comments_and_format_once(
        tmp_path: Path, ref: Any) -> None:
    import shutil

    shutil.copytree(ref.contracts, tmp_path / "contracts")
    (tmp_path / "policies").mkdir()
    for policy in ref.policies.glob("*.yaml"):  # the configuration, not its policy tests
        shutil.copy(policy, tmp_path / "policies")
    results = format_paths([tmp_path / "contracts", tmp_path / "policies"])
    assert {r.path.name for r in results if r.formatted is not None} >= {
        "createFollowUp.yaml", "sendEmail.yaml", "access.yaml", "routing.yaml"}
    for result in results:
        if result.formatted is None:
            continue
        before = list(yaml.safe_load_all(result.original))
        assert list(yaml.safe_load_all(result.formatted)) == before, result.path
        assert _comments(result.formatted) == _comments(result.original), result.path
        assert format_text(result.formatted, str(result.path)) == result.formatted
        long_lines = [line for line in result.formatted.splitlines()
                      if len(line) > WIDTH and _is_cel_line(line)]
        assert long_lines == [], result.path


def test_cel_is_plain_when_safe_otherwise_single_quoted_or_folded() -> None:
    assert type(cel_scalar('ticket.status != "closed"', "expression", 6)).__name__ == (
        "PlainScalarString")
    assert type(cel_scalar("!has(ticket.deleted_at)", "expression", 6)).__name__ == (
        "SingleQuotedScalarString")
    assert type(cel_scalar("a == 'x: y'", "when", 6)).__name__ == "SingleQuotedScalarString"
    long = " && ".join(f"args.field{n} == found.field{n}" for n in range(5))
    folded = cel_scalar(long, "match", 4)
    assert type(folded).__name__ == "FoldedScalarString"
    assert type(cel_scalar(long, "match", 4, in_flow=True)).__name__ == "PlainScalarString"


def test_long_cel_breaks_before_operators_and_outside_strings() -> None:
    text = 'a.b == "x && y z" && c.d == 1 || e.f.g.h.i == 2'
    positions = fold_positions(text, 20)
    lines = [text[start:end].strip() for start, end in
             zip([0, *positions], [*positions, len(text)], strict=True)]
    assert lines == ['a.b == "x && y z"', "&& c.d == 1", "|| e.f.g.h.i == 2"]


def test_cli_fmt_check_lists_files_and_writes_nothing(tmp_path: Path) -> None:
    messy = _write(tmp_path, "messy.yaml", MESSY)
    tidy = _write(tmp_path, "tidy.yaml", MESSY_FORMATTED)
    _write(tmp_path, "not-callgate.yaml", "name: a scenario\nsteps: []\n")
    runner = CliRunner()

    result = runner.invoke(main, ["fmt", "--check", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stdout == f"{messy}: would be reformatted\n"
    assert result.stderr == "1 file(s) would be reformatted, 1 already canonical\n"
    assert messy.read_text() == MESSY

    result = runner.invoke(main, ["fmt", str(tmp_path)])
    assert result.exit_code == 0
    assert result.stdout == f"{messy}: reformatted\n"
    assert messy.read_text() == MESSY_FORMATTED
    assert tidy.read_text() == MESSY_FORMATTED

    result = runner.invoke(main, ["fmt", "--check", str(tmp_path)])
    assert result.exit_code == 0
    assert result.stdout == ""


def test_cli_fmt_says_when_a_named_file_is_not_a_callgate_document(tmp_path: Path) -> None:
    scenario = _write(tmp_path, "scenario.yaml", "name: a scenario\nsteps: []\n")
    result = CliRunner().invoke(main, ["fmt", "--check", str(scenario)])
    assert result.exit_code == 0
    assert f"{scenario}: skipped, it holds no callgate document\n" in result.stderr


@pytest.mark.parametrize(("text", "message"), [
    ("apiVersion: callgate/v1\nkind: [ToolContract\n",
     "3:1: error YAML expected ',' or ']', but got '<stream end>'"),
    ("apiVersion: callgate/v1\nkind: a\nkind: b\n", "3:1: error YAML duplicate key 'kind'"),
])
def test_cli_fmt_reports_bad_yaml_in_one_line(text: str, message: str, tmp_path: Path) -> None:
    good = _write(tmp_path, "a.yaml", MESSY)
    bad = _write(tmp_path, "b.yaml", text)
    result = CliRunner().invoke(main, ["fmt", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == f"callgate: {bad}:{message}\n"
    assert good.read_text() == MESSY  # nothing is written when any file is bad


# The SDK answers (last, so the children had the whole module to import) -------------------


@pytest.mark.parametrize("sdk", list(_SDK_CHECKS))
def test_the_exports_validate_as_the_sdk_types(
        sdk: str, sdk_checks: Mapping[str, subprocess.Popen[str]]) -> None:
    styles, _ = _SDK_CHECKS[sdk]
    problems = _sdk_problems(sdk_checks[sdk])
    refused = sorted(style for style, name, _ in problems if name in (None, "noParameters",
                                                                      "noSchema"))
    assert refused == sorted(styles)  # each format refused its broken item...
    assert len(problems) == len(styles), problems  # ...and every real tool passed


# Helpers --------------------------------------------------------------------------------------


def _name(tool: Mapping[str, Any]) -> str:
    return str(tool["function"]["name"] if "function" in tool else tool["name"])


def _schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    if "function" in tool:
        return dict(tool["function"]["parameters"])
    return dict(tool.get("parameters") or tool.get("input_schema") or tool["inputSchema"])


def _description(tool: Mapping[str, Any]) -> str:
    return str(tool["function"]["description"] if "function" in tool else tool["description"])


def _comments(text: str) -> list[str]:
    return sorted(line.split("#", 1)[1].strip() for line in text.splitlines()
                  if line.lstrip().startswith("#"))


def _is_cel_line(line: str) -> bool:
    return line.lstrip().startswith(("expression:", "when:", "match:", "key:"))
