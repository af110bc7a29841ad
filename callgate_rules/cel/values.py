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
