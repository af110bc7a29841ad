"""IP addresses and CIDR ranges: cel-go's network extension, which Kubernetes' ip and cidr
libraries match: ``ip``, ``isIP``, ``ip.isCanonical``, ``cidr``, ``isCIDR``, and on an IP
``family``, ``isUnspecified``, ``isLoopback``, ``isGlobalUnicast``,
``isLinkLocalMulticast``, ``isLinkLocalUnicast``; on a CIDR ``containsIP``,
``containsCIDR``, ``ip``, ``masked``, ``prefixLength``. Values are ``cel.values.IP``
(``net.IP``) and ``cel.values.CIDR`` (``net.CIDR``).

Semantics and messages are those of the conformance file ``network_ext.textproto`` and Go's
``net/netip``, which both libraries use: no zones (``fe80::1%en0``), no IPv4-mapped IPv6
address written with a dotted quad (``::ffff:192.168.0.1``; the hexadecimal form parses and
equals its IPv4 address), no leading zeros in IPv4; ``isGlobalUnicast`` is Go's (private
ranges count, only unspecified, loopback, multicast, link-local and broadcast do not).
"""

from __future__ import annotations

from functools import lru_cache
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Any

from callgate_rules.cel.compiler.runtime.kinds import kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.signatures import Function, global_, member
from callgate_rules.cel.values import CIDR, IP

LIBRARY = "network"
_Address = IPv4Address | IPv6Address


@lru_cache(maxsize=256)
def _address(text: str, what: str) -> _Address:
    if "%" in text:
        raise CelEvaluationError(f"{what} with zone value is not allowed")
    try:
        address = ip_address(text)
    except ValueError:
        raise CelEvaluationError(
            f"IP Address '{text}' parse error during conversion from string") from None
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None and "." in text:
        raise CelEvaluationError("IPv4-mapped IPv6 address is not allowed")
    return address


def parse_ip(text: Any) -> IP:
    (value,) = typed("ip", (text,), ("string",))
    return IP(_address(value, "IP Address"))


def is_ip(text: Any) -> bool:
    (value,) = typed("isIP", (text,), ("string",))
    try:
        _address(value, "IP Address")
    except CelEvaluationError:
        return False
    return True


def is_canonical(text: Any) -> bool:
    """Whether the text is the address as it is written back (``'2001:DB8::68'`` is not)."""
    (value,) = typed("ip.isCanonical", (text,), ("string",))
    return bool(str(_address(value, "IP Address")) == value)


def parse_cidr(text: Any) -> CIDR:
    (value,) = typed("cidr", (text,), ("string",))
    return _parsed_cidr(value)


@lru_cache(maxsize=256)
def _parsed_cidr(value: str) -> CIDR:
    """Cached, as ``_address``: a rule's literal ranges are read once, not per decision."""
    address_text, slash, length = value.partition("/")
    if "%" in address_text:
        raise CelEvaluationError("CIDR with zone value is not allowed")
    failure = CelEvaluationError(
        f"network address parse error during conversion from string: {value!r}")
    if not slash or not (length.isascii() and length.isdigit()) or length != str(int(length)):
        raise failure
    try:
        address = _address(address_text, "CIDR")
    except CelEvaluationError as error:
        if "not allowed" in str(error):
            raise
        raise failure from None
    prefix = int(length)
    if prefix > address.max_prefixlen:
        raise failure
    return CIDR(address, prefix)


def is_cidr(text: Any) -> bool:
    try:
        parse_cidr(text)
    except CelEvaluationError as error:
        if "no such overload" in str(error):
            raise
        return False
    return True


def _ip(function: str, value: Any) -> _Address:
    if kind(value) != "net.IP":
        raise no_overload(function, value)
    address: _Address = value.address
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def family(value: Any) -> int:
    if kind(value) != "net.IP":
        raise no_overload("family", value)
    return 4 if isinstance(value.address, IPv4Address) else 6


def is_unspecified(value: Any) -> bool:
    return _ip("isUnspecified", value).is_unspecified


def is_loopback(value: Any) -> bool:
    return _ip("isLoopback", value).is_loopback


def is_link_local_unicast(value: Any) -> bool:
    return _ip("isLinkLocalUnicast", value).is_link_local


_LINK_LOCAL_MULTICAST = (IPv4Network("224.0.0.0/24"), IPv6Network("ff02::/16"))


def is_link_local_multicast(value: Any) -> bool:
    address = _ip("isLinkLocalMulticast", value)
    return any(address in network for network in _LINK_LOCAL_MULTICAST
               if network.version == address.version)


def is_global_unicast(value: Any) -> bool:
    """Go's ``IsGlobalUnicast``: every address but unspecified, loopback, multicast,
    link-local unicast and the IPv4 broadcast address (private ranges included)."""
    address = _ip("isGlobalUnicast", value)
    return not (address.is_unspecified or address.is_loopback or address.is_multicast
                or address.is_link_local or address == IPv4Address("255.255.255.255"))


def _cidr(function: str, value: Any, *others: Any) -> CIDR:
    if kind(value) != "net.CIDR":
        raise no_overload(function, value, *others)
    return value  # type: ignore[no-any-return]


@lru_cache(maxsize=256)
def _network(value: CIDR) -> IPv4Network | IPv6Network:
    return ip_network(f"{value.address}/{value.prefix}", strict=False)


def contains_ip(range_: Any, address: Any) -> bool:
    network = _network(_cidr("containsIP", range_, address))
    if kind(address) == "string":
        address = parse_ip(address)
    found = _ip("containsIP", address)
    return found.version == network.version and found in network


def contains_cidr(range_: Any, other: Any) -> bool:
    network = _network(_cidr("containsCIDR", range_, other))
    if kind(other) == "string":
        other = parse_cidr(other)
    inner = _network(_cidr("containsCIDR", other))
    return inner.version == network.version and inner.subnet_of(network)  # type: ignore[arg-type]


def cidr_ip(range_: Any) -> IP:
    return IP(_cidr("ip", range_).address)


def masked(range_: Any) -> CIDR:
    network = _network(_cidr("masked", range_))
    return CIDR(network.network_address, network.prefixlen)


def prefix_length(range_: Any) -> int:
    return _cidr("prefixLength", range_).prefix


def _reader(name: str, overload_id: str, receiver: str, result: str, implementation: Any,
            doc: str) -> Function:
    return Function(name, LIBRARY, (member(overload_id, receiver, result),), implementation,
                    doc)


FUNCTIONS: tuple[Function, ...] = (
    Function("ip", LIBRARY, (global_("string_to_ip", "string", "net.IP"),
                             member("cidr_ip", "net.CIDR", "net.IP")),
             lambda value: cidr_ip(value) if kind(value) == "net.CIDR" else parse_ip(value),
             "an IP address from text; on a CIDR, its address"),
    Function("isIP", LIBRARY, (global_("is_ip_string", "string", "bool"),), is_ip,
             "whether ip() accepts the text"),
    Function("ip.isCanonical", LIBRARY, (global_("ip_is_canonical_string", "string", "bool"),),
             is_canonical, "whether the text is the address's canonical spelling"),
    Function("cidr", LIBRARY, (global_("string_to_cidr", "string", "net.CIDR"),), parse_cidr,
             "an address range from text such as '10.0.0.0/8'"),
    Function("isCIDR", LIBRARY, (global_("is_cidr_string", "string", "bool"),), is_cidr,
             "whether cidr() accepts the text"),
    _reader("family", "ip_family", "net.IP", "int", family, "4 or 6"),
    _reader("isUnspecified", "ip_is_unspecified", "net.IP", "bool", is_unspecified,
            "0.0.0.0 or ::"),
    _reader("isLoopback", "ip_is_loopback", "net.IP", "bool", is_loopback,
            "127.0.0.0/8 or ::1"),
    _reader("isGlobalUnicast", "ip_is_global_unicast", "net.IP", "bool", is_global_unicast,
            "neither unspecified, loopback, multicast, link-local nor broadcast"),
    _reader("isLinkLocalMulticast", "ip_is_link_local_multicast", "net.IP", "bool",
            is_link_local_multicast, "224.0.0.0/24 or ff02::/16"),
    _reader("isLinkLocalUnicast", "ip_is_link_local_unicast", "net.IP", "bool",
            is_link_local_unicast, "169.254.0.0/16 or fe80::/10"),
    Function("containsIP", LIBRARY, (
        member("cidr_contains_ip_ip", "net.CIDR", "net.IP", "bool"),
        member("cidr_contains_ip_string", "net.CIDR", "string", "bool"),
    ), contains_ip, "whether the range holds the address"),
    Function("containsCIDR", LIBRARY, (
        member("cidr_contains_cidr_cidr", "net.CIDR", "net.CIDR", "bool"),
        member("cidr_contains_cidr_string", "net.CIDR", "string", "bool"),
    ), contains_cidr, "whether the range holds the whole other range"),
    _reader("masked", "cidr_masked", "net.CIDR", "net.CIDR", masked,
            "the range with its host bits cleared"),
    _reader("prefixLength", "cidr_prefix_length", "net.CIDR", "int", prefix_length,
            "the prefix length"),
)
