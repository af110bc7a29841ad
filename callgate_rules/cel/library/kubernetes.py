"""Kubernetes' CEL libraries as ValidatingAdmissionPolicy authors use them
(k8s.io/apiserver/pkg/cel/library): lists (``isSorted``, ``sum``, ``min``, ``max``,
``indexOf``, ``lastIndexOf``), regex (``find``, ``findAll``) and URLs (``url``, ``isURL``,
``getScheme``, ``getHost``, ``getHostname``, ``getPort``, ``getEscapedPath``,
``getQuery``; the value is ``cel.values.URL``, see ``urls``).

``indexOf`` and ``lastIndexOf`` exist on strings too (cel-go's strings library): the one
``Function`` here carries both libraries' overloads and dispatches on the receiver.
Elements compare by CEL's equality and ordering; ``find``/``findAll`` use RE2 as the regex
library does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from callgate_rules.cel.compiler.runtime.arithmetic import add
from callgate_rules.cel.compiler.runtime.compare import equals, less
from callgate_rules.cel.compiler.runtime.kinds import kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library import regex, strings, urls
from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.signatures import Function, global_, member
from callgate_rules.cel.values import URL

LIBRARY = "kubernetes"
_COMPARABLE = ("int", "uint", "double", "bool", "string", "bytes", "duration", "timestamp")
_SUMMABLE = ("int", "uint", "double", "duration")


def _list(function: str, value: Any, *others: Any) -> Sequence[Any]:
    if kind(value) != "list":
        raise no_overload(function, value, *others)
    return value  # type: ignore[no-any-return]


def _ordered(function: str, left: Any, right: Any) -> bool:
    try:
        return less(left, right)
    except CelEvaluationError:
        raise no_overload(function, left, right) from None


def is_sorted(items: Any) -> bool:
    """Whether the list is in ascending order."""
    values = _list("isSorted", items)
    return not any(_ordered("isSorted", after, before)
                   for before, after in zip(values, values[1:], strict=False))


def total(items: Any) -> Any:
    """The sum of a list of ints, uints, doubles or durations; 0 for an empty list.

    callgate's one departure from Kubernetes: a list mixing ints and doubles, as JSON
    numbers arrive (``[1, 2.5]``), sums as doubles, so it decides as ``[1.0, 2.5]`` does;
    Kubernetes (and CEL's ``+``) refuse int plus double."""
    values = _list("sum", items)
    if not values:
        return 0
    kinds = {kind(value) for value in values}
    if "double" in kinds and kinds <= {"int", "uint", "double"}:
        values = [float(value) for value in values]
    result = values[0]
    if kind(result) not in _SUMMABLE:
        raise no_overload("sum", items)
    for value in values[1:]:
        result = add(result, value)
    return result


def _extreme(function: str, items: Any, better: Any) -> Any:
    values = _list(function, items)
    if not values:
        raise CelEvaluationError(f"{function} called on empty list")
    chosen = values[0]
    for value in values[1:]:
        if better(function, value, chosen):
            chosen = value
    return chosen


def minimum(items: Any) -> Any:
    """The least element (an error for an empty list)."""
    return _extreme("min", items, _ordered)


def maximum(items: Any) -> Any:
    """The greatest element (an error for an empty list)."""
    return _extreme("max", items, lambda function, a, b: _ordered(function, b, a))


def _same(left: Any, right: Any) -> bool:
    try:
        return equals(left, right)
    except CelEvaluationError:
        return False


def index_of(receiver: Any, wanted: Any, *offset: Any) -> int:
    """On a list: the first index of an element equal to ``wanted``, or -1. On a string:
    cel-go's ``indexOf``."""
    if kind(receiver) == "string":
        return strings.index_of(receiver, wanted, *offset)
    if offset:
        raise no_overload("indexOf", receiver, wanted, *offset)
    values = _list("indexOf", receiver, wanted)
    return next((position for position, value in enumerate(values) if _same(value, wanted)),
                -1)


def last_index_of(receiver: Any, wanted: Any, *offset: Any) -> int:
    """On a list: the last index of an element equal to ``wanted``, or -1. On a string:
    cel-go's ``lastIndexOf``."""
    if kind(receiver) == "string":
        return strings.last_index_of(receiver, wanted, *offset)
    if offset:
        raise no_overload("lastIndexOf", receiver, wanted, *offset)
    values = _list("lastIndexOf", receiver, wanted)
    return next((position for position in range(len(values) - 1, -1, -1)
                 if _same(values[position], wanted)), -1)


def find(text: Any, pattern: Any) -> str:
    """The first RE2 match in the string, or ``''``."""
    value, source = typed("find", (text, pattern), ("string", "string"))
    found = regex.compiled(source).search(regex.subject(value))
    return "" if found is None else str(found.group(0))


def find_all(text: Any, pattern: Any, limit: Any = None) -> list[str]:
    """Every RE2 match (at most ``limit``; all when negative)."""
    if limit is None:
        value, source = typed("findAll", (text, pattern), ("string", "string"))
        most = -1
    else:
        value, source, most = typed("findAll", (text, pattern, limit),
                                    ("string", "string", "int"))
    found: list[str] = []
    if most == 0:
        return found
    for match in regex.matches(regex.compiled(source), regex.subject(value)):
        found.append(str(match.group(0)))
        if len(found) == most:
            break
    return found


def to_url(text: Any) -> URL:
    (value,) = typed("url", (text,), ("string",))
    try:
        return urls.parse(value)
    except urls.URLError as error:
        raise CelEvaluationError(
            f"URL parse error during conversion from string: {error}") from None


def is_url(text: Any) -> bool:
    (value,) = typed("isURL", (text,), ("string",))
    try:
        urls.parse(value)
    except urls.URLError:
        return False
    return True


def _url(function: str, value: Any) -> URL:
    if kind(value) != "kubernetes.URL":
        raise no_overload(function, value)
    return value  # type: ignore[no-any-return]


def get_scheme(url: Any) -> str:
    return _url("getScheme", url).scheme


def get_host(url: Any) -> str:
    return _url("getHost", url).host


def get_hostname(url: Any) -> str:
    return urls.hostname(_url("getHostname", url))


def get_port(url: Any) -> str:
    return urls.port(_url("getPort", url))


def get_escaped_path(url: Any) -> str:
    return urls.escaped_path(_url("getEscapedPath", url))


def get_query(url: Any) -> dict[str, list[str]]:
    return urls.query(_url("getQuery", url))


def _url_reader(name: str, overload_id: str, result: str, implementation: Any, doc: str
                ) -> Function:
    return Function(name, LIBRARY, (member(overload_id, "kubernetes.URL", result),),
                    implementation, doc)


FUNCTIONS: tuple[Function, ...] = (
    Function("isSorted", LIBRARY, (member("list_is_sorted", "list(T)", "bool"),), is_sorted,
             "whether a list is in ascending order"),
    Function("sum", LIBRARY, tuple(member(f"list_{t}_sum", f"list({t})", t)
                                   for t in _SUMMABLE), total,
             "the sum of a list of numbers or durations (0 when empty)"),
    Function("min", LIBRARY, tuple(member(f"list_{t}_min", f"list({t})", t)
                                   for t in _COMPARABLE), minimum,
             "the least element of a list"),
    Function("max", LIBRARY, tuple(member(f"list_{t}_max", f"list({t})", t)
                                   for t in _COMPARABLE), maximum,
             "the greatest element of a list"),
    Function("indexOf", LIBRARY, (
        *strings.INDEX_OF.overloads,
        member("list_index_of", "list(T)", "T", "int"),
    ), index_of, "first index of a substring (strings) or of an element (lists), or -1"),
    Function("lastIndexOf", LIBRARY, (
        *strings.LAST_INDEX_OF.overloads,
        member("list_last_index_of", "list(T)", "T", "int"),
    ), last_index_of, "last index of a substring (strings) or of an element (lists), or -1"),
    Function("find", LIBRARY, (member("string_find_string", "string", "string", "string"),),
             find, "the first RE2 match in a string, or ''"),
    Function("findAll", LIBRARY, (
        member("string_find_all_string", "string", "string", "list(string)"),
        member("string_find_all_string_int", "string", "string", "int", "list(string)"),
    ), find_all, "every RE2 match in a string (at most n)"),
    Function("url", LIBRARY, (global_("string_to_url", "string", "kubernetes.URL"),), to_url,
             "a URL from an absolute URI or absolute path"),
    Function("isURL", LIBRARY, (global_("is_url_string", "string", "bool"),), is_url,
             "whether url() accepts the text"),
    _url_reader("getScheme", "url_get_scheme", "string", get_scheme,
                "the scheme, lower-cased ('' for a path)"),
    _url_reader("getHost", "url_get_host", "string", get_host,
                "the host with its port ('[::1]:80')"),
    _url_reader("getHostname", "url_get_hostname", "string", get_hostname,
                "the host without port or IPv6 brackets"),
    _url_reader("getPort", "url_get_port", "string", get_port, "the port, '' when none"),
    _url_reader("getEscapedPath", "url_get_escaped_path", "string", get_escaped_path,
                "the path, escaped ('/a%20b')"),
    _url_reader("getQuery", "url_get_query", "map(string, list(string))", get_query,
                "the query's values by key"),
)
