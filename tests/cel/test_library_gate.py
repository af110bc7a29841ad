"""One rule per CEL library through a full ``Gate.check``: a call that satisfies the rule is
executed, one that does not is refused with the rule's message, so each library's functions
run where process owners write them (a ToolContract's rule)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.taxonomy import Route
from tests.conftest import NOW

CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {{name: probe, version: "1", owner: t@example.com, description: a rule under test}}
spec:
  effect: read
  arguments:
    type: object
    properties:
      text: {{type: string}}
      tags: {{type: array, items: {{type: string}}}}
      amounts: {{type: array, items: {{type: number}}}}
      delta: {{type: number}}
      data: {{type: string}}
      link: {{type: string}}
  rules:
    - name: library-rule
      expression: {expression}
      error_class: invalid_argument
      message: The rule refused the call.
  examples: [{{arguments: {example}}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {{name: probe-access, version: "1", owner: t@example.com, description: anyone}}
spec:
  rules:
    - name: anyone
      effect: allow
      tools: [probe]
      when: "true"
"""

# library → (rule, arguments it passes, arguments it refuses)
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "strings": (
        "args.text.trim().split(' ').size() == 2 && args.text.trim().lowerAscii()"
        ".startsWith('ada') && '%s!'.format([args.text.trim()]).endsWith('!')",
        {"text": "  Ada Lovelace "}, {"text": "Grace"}),
    "lists": (
        "args.tags.distinct().size() == args.tags.size() && "
        "args.tags.sort().first().orValue('') == 'a'",
        {"tags": ["c", "a", "b"]}, {"tags": ["a", "a"]}),
    "sets": ("sets.contains(['read', 'write'], args.tags)",
             {"tags": ["read"]}, {"tags": ["read", "admin"]}),
    "math": ("math.greatest(args.amounts) <= 50 && math.abs(args.delta) < 10",
             {"amounts": [5, 12.5, 50], "delta": -3}, {"amounts": [5, 51.5], "delta": 1}),
    "regex": ("regex.extract(args.text, 'id=([0-9]+)').orValue('') == '42'",
              {"text": "order id=42"}, {"text": "order id=7"}),
    "encoders": ("base64.decode(args.data) == b'hello'",
                 {"data": "aGVsbG8="}, {"data": "aGk="}),
    "optionals": ("optional.ofNonZeroValue(args.text).hasValue()",
                  {"text": "x"}, {"text": ""}),
    "network": ("cidr('10.0.0.0/8').containsIP(args.text) && ip(args.text).isGlobalUnicast()",
                {"text": "10.1.2.3"}, {"text": "192.168.0.1"}),
    "kubernetes": ("isURL(args.link) && url(args.link).getHostname() == 'example.com' && "
                   "args.amounts.sum() <= 10 && args.amounts.isSorted()",
                   {"link": "https://example.com:8443/a", "amounts": [1, 2.5, 3]},
                   {"link": "https://example.org/", "amounts": [1]}),
}


@pytest.mark.parametrize("library", sorted(CASES))
def test_a_rule_of_each_library_decides_a_call(library: str, tmp_path: Path, ref: Any,
                                               compile_gate: Any) -> None:
    expression, passing, refused = CASES[library]
    ref.write(tmp_path / "probe.yaml", CONTRACT.format(
        expression=f'"{expression}"', example=json.dumps(passing)))
    gate = compile_gate(tmp_path)
    allowed = gate.check({"name": "probe", "arguments": passing}, actor={"id": "U-1"}, now=NOW)
    assert allowed.route == Route.EXECUTE, allowed.agent_message
    denied = gate.check({"name": "probe", "arguments": refused}, actor={"id": "U-1"}, now=NOW)
    assert denied.route != Route.EXECUTE
    assert "The rule refused the call." in denied.agent_message
