"""MCP tool definitions: title, destructiveHint, and outputSchema where the contract
declares ``spec.result`` — in the export and in the gateway's tool list alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from callgate_rules import load
from callgate_rules.errors import ConfigError
from callgate_rules.integrations.formats import ToolDefinitionError, title_of, tool_definitions
from tests.frameworks.conftest import REPO

CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: placeOrder, version: "1", owner: shop@example.com, description: Place an order.}
spec:
  effect: write
  title: Place an order
  arguments:
    type: object
    required: [sku]
    properties: {sku: {type: string}}
  result: RESULT
  idempotency: key
  examples: [{arguments: {sku: A-1}}]
"""
RESULT = "{type: object, required: [orderId], properties: {orderId: {type: string}}}"


def _config(tmp_path: Path, result: str = RESULT) -> object:
    path = tmp_path / "order.yaml"
    path.write_text(CONTRACT.replace("RESULT", result))
    return load([path])


def test_a_declared_result_is_the_output_schema_and_the_title_is_the_contracts(
        tmp_path: Path) -> None:
    [tool] = tool_definitions(_config(tmp_path), "mcp")  # type: ignore[arg-type]
    assert tool["title"] == "Place an order"
    assert tool["outputSchema"] == {"type": "object", "required": ["orderId"],
                                    "properties": {"orderId": {"type": "string"}}}
    assert tool["annotations"]["destructiveHint"] is True


def test_the_reference_tools_have_titles_and_hints() -> None:
    config = load([REPO / "contracts"])
    tools = {tool["name"]: tool for tool in tool_definitions(config, "mcp")}
    assert tools["getTicketStatus"]["title"] == "Get ticket status"
    assert tools["getTicketStatus"]["annotations"]["destructiveHint"] is False
    assert tools["createFollowUp"]["annotations"]["destructiveHint"] is True
    assert title_of("send_email.v2") == "Send email v2"


def test_a_result_that_is_not_an_object_is_refused_for_mcp(tmp_path: Path) -> None:
    config = _config(tmp_path, "{type: array, items: {type: string}}")
    with pytest.raises(ToolDefinitionError, match=r"order\.yaml:1:1: tool 'placeOrder': MCP "
                                                  r"needs `type: object` at the top of "
                                                  r"spec.result"):
        tool_definitions(config, "mcp")  # type: ignore[arg-type]
    assert tool_definitions(config, "openai")  # type: ignore[arg-type]


def test_a_result_that_is_no_json_schema_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"spec.result is not a valid JSON Schema"):
        _config(tmp_path, "{type: 12}")


def test_the_gateway_offers_the_same_title_and_output_schema(tmp_path: Path) -> None:
    pytest.importorskip("mcp_types", reason="the gateway extra: pip install "
                                            "'callgate-rules[gateway]'")
    from callgate_rules.gateway.binding import tool
    config = _config(tmp_path)
    offered = tool(config.contracts["placeOrder"])  # type: ignore[attr-defined]
    assert offered.title == "Place an order"
    assert offered.output_schema == {"type": "object", "required": ["orderId"],
                                     "properties": {"orderId": {"type": "string"}}}
    assert offered.annotations is not None and offered.annotations.destructive_hint is True
