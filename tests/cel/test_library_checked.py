"""The library's signatures as ``callgate lint`` reads them (callgate_rules.cel.checker):
every library's documented calls type-check with no finding, and a misuse of each is an
error naming the overloads there are."""

from __future__ import annotations

import pytest

from callgate_rules.cel import checker
from callgate_rules.cel import types as cel_types
from callgate_rules.cel.parser import parse

ARGUMENTS = {"type": "object", "required": ["text", "tags", "amounts", "delta"], "properties": {
    "text": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
    "amounts": {"type": "array", "items": {"type": "number"}}, "delta": {"type": "number"},
}}
ENVIRONMENT = checker.Environment({"args": cel_types.from_schema(ARGUMENTS)})

WELL_TYPED = [
    # strings
    "'a'.charAt(0) == 'a'", "'abc'.indexOf('b', 1) == 1", "'a,b'.split(',', 2).join('-')",
    "'%s %d'.format(['a', 1])", "strings.quote('x')", "'ab'.reverse()",
    "args.text.trim().lowerAscii().replace('a', 'b', 1).substring(0, 1)",
    # lists and sets
    "[1, 2].reverse()", "[[1], [2]].flatten()", "[1, 2, 3].slice(0, 2)",
    "lists.range(3).distinct().sort()", "[1].first().hasValue()", "[1].last().orValue(0) == 1",
    "sets.contains(['read', 'write'], args.tags)", "sets.intersects([1], [1.0])",
    # math
    "math.greatest(1, 2.5, 3u) > 0", "math.least([1, 2]) == 1", "math.bitShiftLeft(1, 2) == 4",
    "math.bitAnd(1u, 3u) == 1u", "math.round(1.5) == 2.0", "math.greatest(args.amounts) < 10",
    # regex, encoders, optionals
    "regex.replace('a', 'a', 'b', 1)", "regex.extractAll('a1', '[0-9]').size() == 1",
    "regex.extract('a1', '[0-9]').orValue('') == '1'", "base64.decode('eA==') == b'x'",
    "optional.of(1).or(optional.none()).value() == 1", "optional.unwrap([optional.of(1)])",
    # kubernetes
    "[1, 2].isSorted()", "args.amounts.sum() <= 10", "[1, 2].indexOf(2) == 1",
    "'a1'.find('[0-9]') == '1'", "'a1b2'.findAll('[0-9]', 1)",
    "url('https://a').getQuery()['k'][0] == 'v'", "isURL(args.text)",
    "url(args.text).getHostname() == 'example.com'",
    # network
    "cidr('10.0.0.0/8').containsIP(args.text)", "ip(args.text).family() == 4",
    "cidr('10.0.0.0/8').masked().prefixLength() == 8", "isCIDR(args.text)",
    # core
    "uint(1) == 1u", "type(1) == int", "dyn(1) == 1", "size('ab') == 2",
    "timestamp('2020-01-01T00:00:00Z').getHours('UTC') == 0", "duration('1h').getMinutes() > 1",
]


@pytest.mark.parametrize("source", WELL_TYPED)
def test_documented_calls_type_check(source: str) -> None:
    assert checker.check(parse(source), ENVIRONMENT).findings == ()


@pytest.mark.parametrize(("source", "code"), [
    ("'a'.split(1)", "no-overload"),
    ("math.abs('x')", "no-overload"),
    ("[1].join()", "no-overload"),
    ("url(1)", "no-overload"),
    ("'a'.getHost()", "no-overload"),
    ("base64.encode('x')", "no-overload"),
    ("regex.extract('a', 'b').size()", "no-overload"),  # an optional, not a string
    ("math.bitAnd(1, 1u)", "no-overload"),
    ("sets.contains(1, [1])", "no-overload"),
    ("lists.range(1.5)", "no-overload"),
    ("ip('1.2.3.4').containsIP('1.2.3.4')", "no-overload"),
    ("args.text.splt(' ')", "unknown-function"),
    ("math.greates(1, 2)", "unknown-function"),
])
def test_misuse_is_an_error(source: str, code: str) -> None:
    findings = checker.check(parse(source), ENVIRONMENT).findings
    assert [finding.code for finding in findings if finding.severity == "error"] == [code]
