"""Kubernetes' URL values: ``url(text)`` parses as Go's ``url.ParseRequestURI`` does (an
absolute URI, or an absolute path), and the ``get*`` readers answer as Go's ``url.URL``
methods do (``Hostname``, ``Port``, ``EscapedPath``, ``Query``). The value is
``cel.values.URL``; its kind is ``kubernetes.URL``.

What is accepted, as Go has it: no control characters; a scheme (letters, digits, ``+``,
``-``, ``.``, starting with a letter; lower-cased) followed by ``//authority`` and a path,
or by an opaque rest (``mailto:a@b``); or, without a scheme, a path starting with ``/``.
A host holds letters, digits and ``-._~!$&'()*+,;=:[]<>"`` only, and an optional port of
digits after the last ``:`` (``[::1]:80`` for IPv6). Every ``%`` must start ``%XX``.
"""

from __future__ import annotations

import re
from functools import lru_cache

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.values import URL

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_HOST_CHARACTERS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:[]<>\"")
_UNRESERVED = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~")
_PATH_KEPT = frozenset(b"$&+,/:;=@")  # not escaped in a path (Go's shouldEscape)
_PATH_VALID = frozenset(b"!$&'()*+,;=:@[]/%")  # may stand unescaped in a written path
_HEX = frozenset("0123456789abcdefABCDEF")


class URLError(CelEvaluationError):
    """Text that is not a URL by Go's ``url.ParseRequestURI``."""


def _unescape(text: str, plus_is_space: bool = False) -> bytes:
    """``%XX`` decoded (and ``+`` as a space in a query), as bytes."""
    data = text.encode("utf-8", errors="surrogatepass")
    out = bytearray()
    position = 0
    while position < len(data):
        byte = data[position]
        if byte == ord("%"):
            digits = data[position + 1:position + 3].decode("latin-1")
            if len(digits) != 2 or not set(digits) <= _HEX:
                raise URLError(f"invalid URL escape {data[position:position + 3]!r}")
            out.append(int(digits, 16))
            position += 3
            continue
        out.append(ord(" ") if plus_is_space and byte == ord("+") else byte)
        position += 1
    return bytes(out)


def _escape_path(path: bytes) -> str:
    return "".join(chr(byte) if byte in _UNRESERVED or byte in _PATH_KEPT else f"%{byte:02X}"
                   for byte in path)


def _valid_port(colon_port: str) -> bool:
    return colon_port == "" or (colon_port.startswith(":") and colon_port[1:].isascii()
                                and (colon_port[1:].isdigit() or colon_port == ":"))


def _check_host(host: str) -> None:
    if host.startswith("["):
        closing = host.rfind("]")
        if closing < 0:
            raise URLError("missing ']' in host")
        if not _valid_port(host[closing + 1:]):
            raise URLError(f"invalid port {host[closing + 1:]!r} after host")
    else:
        colon = host.rfind(":")
        if colon >= 0 and not _valid_port(host[colon:]):
            raise URLError(f"invalid port {host[colon:]!r} after host")
    for character in host:
        if character.isascii() and character not in _HOST_CHARACTERS:
            raise URLError(f"invalid character {character!r} in host name")


@lru_cache(maxsize=256)
def parse(text: str) -> URL:
    """``text`` as a URL, or ``URLError`` saying what is wrong with it. Cached: a rule
    usually parses the same few texts (its literals) on every decision."""
    if any(ord(character) < 0x20 or ord(character) == 0x7F for character in text):
        raise URLError("invalid control character in URL")
    if text == "":
        raise URLError("empty url")
    scheme, rest = "", text
    found = _SCHEME.match(text)
    if found and text[found.end():found.end() + 1] == ":":
        scheme, rest = found.group().lower(), text[found.end() + 1:]
    elif text.startswith(":"):
        raise URLError("missing protocol scheme")
    rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:  # an opaque URI, mailto:someone@example.com
            return URL(text, scheme, "", "", query)
        raise URLError("invalid URI for request")
    host = ""
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        host = authority[authority.rfind("@") + 1:]
        _check_host(host)
    _unescape(rest)  # a malformed escape is an error
    return URL(text, scheme, host, rest, query)


def hostname(url: URL) -> str:
    host, _ = _split_host_port(url.host)
    return host


def port(url: URL) -> str:
    _, found = _split_host_port(url.host)
    return found


def _split_host_port(host: str) -> tuple[str, str]:
    colon = host.rfind(":")
    name, number = host, ""
    if colon >= 0 and _valid_port(host[colon:]) and "]" not in host[colon:]:
        name, number = host[:colon], host[colon + 1:]
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name, number


def escaped_path(url: URL) -> str:
    """The path as written when that is a valid escaped form, else escaped (Go's
    ``EscapedPath``)."""
    written = url.path.encode("utf-8", errors="surrogatepass")
    if all(byte in _UNRESERVED or byte in _PATH_VALID for byte in written):
        return url.path
    return _escape_path(_unescape(url.path))


def query(url: URL) -> dict[str, list[str]]:
    """The query's values by key, in order (Go's ``Query``: pairs split on ``&``; an empty
    pair, a pair with ``;`` or with a malformed escape is left out)."""
    values: dict[str, list[str]] = {}
    for pair in url.query.split("&") if url.query else ():
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        try:
            name = _unescape(key, plus_is_space=True).decode("utf-8", errors="replace")
            text = _unescape(value, plus_is_space=True).decode("utf-8", errors="replace")
        except URLError:
            continue
        values.setdefault(name, []).append(text)
    return values
