"""CEL values that plain Python has no exact type for.

The rest of CEL's values cross callgate's border as plain Python (see ``expression``):
``int`` (int64), ``float`` (double), ``bool``, ``str``, ``bytes``, ``None``, ``list``,
mappings, aware ``datetime`` (timestamp) and ``timedelta`` (duration). These three are the
exceptions: an unsigned integer must not be mistaken for an int (``1u == 1`` is true, but
``1u + 1`` is an error and ``type(1u)`` is ``uint``), a type is a value (``type(x) == int``),
and an optional (cel-go's optionals library) is either a value or none.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from typing import Any

UINT64_MAX = 2**64 - 1


class UInt(int):
    """A CEL ``uint``: an ``int`` subclass so that arithmetic on the fast path stays cheap;
    the runtime checks its range (0 to 2**64 - 1) after every operation."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


@dataclass(frozen=True, slots=True)
class CelType:
    """A type as a value: ``int``, ``string``, ``list``, ``map``, ``null_type``, ``type``,
    ``google.protobuf.Timestamp``... (what ``type(x)`` returns and type names denote)."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Optional:
    """An optional value: ``optional.of(x)`` is ``Optional(x, True)``; ``optional.none()``
    is ``NONE``."""

    value: Any = None
    present: bool = False

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = Optional()


@dataclass(frozen=True, slots=True)
class URL:
    """A Kubernetes URL value (``url('https://example.com:80/a?b=c')``): the text and its
    parts as Go's ``url.ParseRequestURI`` splits them (``cel.library.kubernetes`` parses and
    reads them). ``host`` keeps the port and an IPv6 address's brackets; ``path`` and
    ``query`` are as written (escaped)."""

    text: str
    scheme: str
    host: str
    path: str
    query: str

    def __repr__(self) -> str:
        return f"url({self.text!r})"


@dataclass(frozen=True, slots=True, eq=False)
class IP:
    """An IP address (``ip('192.168.0.1')``, cel-go's network library, type ``net.IP``).
    An IPv4-mapped IPv6 address equals its IPv4 address, as in cel-go."""

    address: IPv4Address | IPv6Address

    def _unmapped(self) -> IPv4Address | IPv6Address:
        if isinstance(self.address, IPv6Address) and self.address.ipv4_mapped is not None:
            return self.address.ipv4_mapped
        return self.address

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and self._unmapped() == other._unmapped()

    def __hash__(self) -> int:
        return hash(self._unmapped())

    def __str__(self) -> str:
        return str(self.address)

    def __repr__(self) -> str:
        return f"ip({str(self.address)!r})"


@dataclass(frozen=True, slots=True)
class CIDR:
    """An IP address with a prefix length (``cidr('192.168.0.0/24')``, type ``net.CIDR``);
    the address keeps its host bits, as written (``masked()`` clears them)."""

    address: IPv4Address | IPv6Address
    prefix: int

    def __str__(self) -> str:
        return f"{self.address}/{self.prefix}"

    def __repr__(self) -> str:
        return f"cidr({str(self)!r})"
