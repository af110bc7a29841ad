"""What the commands that serve over the network share (``gateway``, ``serve``): the
``--http`` address they listen on and the documents they load by default."""

from __future__ import annotations

from pathlib import Path

from callgate_rules.errors import InputError


def http_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv6 host in brackets) as a host and a port number."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--http {text}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def documents_here() -> tuple[str, ...]:
    """``contracts`` and ``policies`` of the working directory, those that exist."""
    paths = tuple(p for p in ("contracts", "policies") if Path(p).exists())
    if not paths:
        raise InputError("no contracts/ or policies/ here; pass the paths of your documents")
    return paths
