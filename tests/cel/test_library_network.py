"""IP addresses and CIDR ranges (callgate_rules.cel.library.network): the conformance file
network_ext.textproto's cases and Go's net/netip rules, called through the library's table."""

from __future__ import annotations

from typing import Any

import pytest

from callgate_rules.cel.compiler.runtime.kinds import kind
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library import FUNCTIONS
from callgate_rules.cel.values import CIDR, IP


def call(name: str, *arguments: Any) -> Any:
    return FUNCTIONS[name].implementation(*arguments)


def ip(text: str) -> IP:
    return call("ip", text)  # type: ignore[no-any-return]


def cidr(text: str) -> CIDR:
    return call("cidr", text)  # type: ignore[no-any-return]


def test_values_and_their_kinds() -> None:
    assert kind(ip("192.168.0.1")) == "net.IP" and str(ip("192.168.0.1")) == "192.168.0.1"
    assert str(ip("2001:DB8::68")) == "2001:db8::68"
    assert kind(cidr("10.0.0.0/8")) == "net.CIDR" and str(cidr("2001:db8::/32")) == "2001:db8::/32"
    assert ip("::ffff:c0a8:1") == ip("192.168.0.1")  # a mapped address equals its IPv4 one
    assert ip("::ffff:c0a8:1") != ip("192.168.10.1") and ip("::") != ip("::ffff")
    assert len({ip("::ffff:c0a8:1"), ip("192.168.0.1")}) == 1
    assert cidr("127.0.0.1/24") == cidr("127.0.0.1/24") != cidr("127.0.0.0/24")


@pytest.mark.parametrize(("name", "address", "expected"), [
    ("family", "192.168.0.1", 4), ("family", "2001:db8::68", 6),
    ("isUnspecified", "0.0.0.0", True), ("isUnspecified", "::", True),
    ("isUnspecified", "127.0.0.1", False),
    ("isLoopback", "127.0.0.1", True), ("isLoopback", "::1", True),
    ("isLoopback", "1.2.3.4", False),
    ("isGlobalUnicast", "192.168.0.1", True),  # Go counts private ranges as global unicast
    ("isGlobalUnicast", "2001:db8::abcd", True), ("isGlobalUnicast", "255.255.255.255", False),
    ("isGlobalUnicast", "ff00::1", False), ("isGlobalUnicast", "169.254.1.1", False),
    ("isLinkLocalMulticast", "224.0.0.1", True), ("isLinkLocalMulticast", "224.0.1.1", False),
    ("isLinkLocalMulticast", "ff02::1", True), ("isLinkLocalMulticast", "fd00::1", False),
    ("isLinkLocalUnicast", "169.254.169.254", True), ("isLinkLocalUnicast", "fe80::1", True),
    ("isLinkLocalUnicast", "192.168.0.1", False), ("isLinkLocalUnicast", "fd80::1", False),
])
def test_address_properties(name: str, address: str, expected: Any) -> None:
    assert call(name, ip(address)) == expected


@pytest.mark.parametrize(("range_", "other", "expected"), [
    ("192.168.0.0/24", "192.168.0.1", True), ("192.168.0.0/24", "192.168.1.1", False),
    ("2001:db8::/32", "192.168.1.1", False), ("192.168.1.1/32", "2001:db8::1", False),
    ("2001:db8::/32", "2001:db8::1", True), ("192.168.0.1/24", "192.168.0.200", True),
])
def test_contains_ip(range_: str, other: str, expected: bool) -> None:
    assert call("containsIP", cidr(range_), ip(other)) is expected
    assert call("containsIP", cidr(range_), other) is expected


@pytest.mark.parametrize(("range_", "other", "expected"), [
    ("192.168.0.0/24", "192.168.0.0/25", True), ("192.168.0.0/24", "192.168.0.1/32", True),
    ("192.168.0.0/24", "192.168.0.0/23", False), ("10.0.0.0/8", "10.0.0.0/8", True),
    ("2001:db8::/32", "2001:db8::/33", True), ("10.0.0.0/8", "2001:db8::/33", False),
])
def test_contains_cidr(range_: str, other: str, expected: bool) -> None:
    assert call("containsCIDR", cidr(range_), cidr(other)) is expected
    assert call("containsCIDR", cidr(range_), other) is expected


def test_range_readers() -> None:
    assert call("ip", cidr("192.168.0.1/24")) == ip("192.168.0.1")  # host bits kept
    assert call("masked", cidr("192.168.0.1/24")) == cidr("192.168.0.0/24")
    assert call("prefixLength", cidr("2001:db8::/32")) == 32


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1", True), ("2001:db8::68", True), ("2001:DB8::68", False), ("::FFFF:c0a8:1", False),
])
def test_is_canonical(text: str, expected: bool) -> None:
    assert call("ip.isCanonical", text) is expected


@pytest.mark.parametrize(("text", "message"), [
    ("192.168.0.1.0", "IP Address '192.168.0.1.0' parse error during conversion from string"),
    ("2001:db8:::68", "IP Address '2001:db8:::68' parse error"),
    ("192.168.01.1", "IP Address '192.168.01.1' parse error"),  # no leading zeros
    ("fe80::1%en0", "IP Address with zone value is not allowed"),
    ("::ffff:192.168.0.1", "IPv4-mapped IPv6 address is not allowed"),
    ("", "IP Address '' parse error"),
])
def test_bad_addresses(text: str, message: str) -> None:
    assert not call("isIP", text)
    with pytest.raises(CelEvaluationError) as raised:
        ip(text)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(("text", "message"), [
    ("192.168.0.0/", "network address parse error during conversion from string"),
    ("192.168.0.0/33", "network address parse error"),
    ("192.168.0.0/08", "network address parse error"),
    ("192.168.0.0", "network address parse error"),
    ("fe80::1%en0/24", "CIDR with zone value is not allowed"),
    ("::ffff:192.168.0.1/24", "IPv4-mapped IPv6 address is not allowed"),
])
def test_bad_ranges(text: str, message: str) -> None:
    assert not call("isCIDR", text)
    with pytest.raises(CelEvaluationError) as raised:
        cidr(text)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(("name", "arguments"), [
    ("isIP", (1,)), ("family", ("192.168.0.1",)), ("containsIP", (ip("1.2.3.4"), "1.2.3.4")),
    ("masked", (ip("1.2.3.4"),)), ("isCIDR", (b"10.0.0.0/8",)),
])
def test_wrong_kinds(name: str, arguments: tuple[Any, ...]) -> None:
    with pytest.raises(CelEvaluationError, match="no such overload"):
        call(name, *arguments)
