"""Kubernetes' CEL libraries (callgate_rules.cel.library.kubernetes, urls): lists, regex
and URLs as Kubernetes documents them; URL parsing as Go's url.ParseRequestURI."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from callgate_rules.cel.compiler.runtime.kinds import kind
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library import FUNCTIONS
from callgate_rules.cel.values import URL, UInt


def call(name: str, *arguments: Any) -> Any:
    return FUNCTIONS[name].implementation(*arguments)


@pytest.mark.parametrize(("name", "arguments", "expected"), [
    ("isSorted", ([1, 2, 3],), True),
    ("isSorted", ([1, 1.5, UInt(2), 2],), True),
    ("isSorted", (["a", "c", "b"],), False),
    ("isSorted", ([],), True),
    ("sum", ([1, 2, 3],), 6),
    ("sum", ([1.5, 2.5],), 4.0),
    ("sum", ([timedelta(seconds=1), timedelta(seconds=2)],), timedelta(seconds=3)),
    ("sum", ([],), 0),
    ("sum", ([1, 2.5, UInt(3)],), 6.5),  # JSON numbers: mixed ints and doubles sum as doubles
    ("min", ([3, 1, 2],), 1),
    ("max", (["a", "c", "b"],), "c"),
    ("min", ([2, 1.5],), 1.5),
])
def test_lists(name: str, arguments: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *arguments) == expected


@pytest.mark.parametrize(("receiver", "argument", "first", "last"), [
    ([1, 2, 2, 3], 2, 1, 2),
    ([1, 2, 3], 2.0, 1, 1),  # CEL equality across numeric types
    ([[1], [2]], [2], 1, 1),
    ([1, "a"], "b", -1, -1),
    ("hello mellow", "ello", 1, 7),  # the strings library's overloads, same Function
])
def test_index_of_on_lists_and_strings(receiver: Any, argument: Any, first: int,
                                       last: int) -> None:
    assert call("indexOf", receiver, argument) == first
    assert call("lastIndexOf", receiver, argument) == last


def test_index_of_carries_both_libraries_overloads() -> None:
    ids = {overload.overload_id for overload in FUNCTIONS["indexOf"].overloads}
    assert {"string_index_of_string", "string_index_of_string_int", "list_index_of"} <= ids
    assert call("indexOf", "hello mellow", "ello", 2) == 7


@pytest.mark.parametrize(("name", "arguments", "expected"), [
    ("find", ("abc 123", "[0-9]+"), "123"),
    ("find", ("abc", "[0-9]+"), ""),
    ("findAll", ("123 abc 456", "[0-9]+"), ["123", "456"]),
    ("findAll", ("123 abc 456", "[0-9]+", 1), ["123"]),
    ("findAll", ("123 abc 456", "[0-9]+", 0), []),
    ("findAll", ("123 abc 456", "[0-9]+", -1), ["123", "456"]),
])
def test_regex(name: str, arguments: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *arguments) == expected


@pytest.mark.parametrize(("text", "scheme", "host", "hostname", "port", "path"), [
    ("https://user:pass@example.com:80/path?query=val#fragment",
     "https", "example.com:80", "example.com", "80", "/path"),
    ("https://example.com/path with spaces/", "https", "example.com", "example.com", "",
     "/path%20with%20spaces/"),
    ("https://[::1]:80/", "https", "[::1]:80", "::1", "80", "/"),
    ("https://[::1]/", "https", "[::1]", "::1", "", "/"),
    ("HTTP://Example.com/a%2Fb", "http", "Example.com", "Example.com", "", "/a%2Fb"),
    ("/absolute-path", "", "", "", "", "/absolute-path"),
    ("/a/ü", "", "", "", "", "/a/%C3%BC"),
    ("mailto:someone@example.com", "mailto", "", "", "", ""),
])
def test_url_parts(text: str, scheme: str, host: str, hostname: str, port: str,
                   path: str) -> None:
    url = call("url", text)
    assert kind(url) == "kubernetes.URL" and isinstance(url, URL)
    assert call("getScheme", url) == scheme
    assert call("getHost", url) == host
    assert call("getHostname", url) == hostname
    assert call("getPort", url) == port
    assert call("getEscapedPath", url) == path
    assert call("isURL", text)


def test_url_query() -> None:
    url = call("url", "https://example.com/path?k1=a&k2=b&k2=c+d&e=%41&bad=%zz&;x=1&=v&&")
    assert call("getQuery", url) == {"k1": ["a"], "k2": ["b", "c d"], "e": ["A"], "": ["v"]}


@pytest.mark.parametrize("text", [
    "", "relative-path", "https://exa mple.com/", "https://example.com:8a/",
    "https://[::1/", "/a%zz", "https://example.com/\n", ":no-scheme",
])
def test_not_urls(text: str) -> None:
    assert not call("isURL", text)
    with pytest.raises(CelEvaluationError, match="URL parse error during conversion"):
        call("url", text)


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("min", ([],), "min called on empty list"),
    ("max", ([],), "max called on empty list"),
    ("sum", (["a", "b"],), "no such overload"),
    ("min", ([1, "a"],), "no such overload"),
    ("isSorted", ([1, "a"],), "no such overload"),
    ("getHost", ("https://example.com",), "no such overload"),
    ("find", ("a", "("), "given regex is invalid"),
    ("indexOf", ([1], 1, 0), "no such overload"),
])
def test_errors(name: str, arguments: tuple[Any, ...], message: str) -> None:
    with pytest.raises(CelEvaluationError) as raised:
        call(name, *arguments)
    assert str(raised.value).startswith(message)
