"""The optional extras a command needs, checked when it runs, with the line that installs
them; the other commands start without them."""

from __future__ import annotations

from callgate_rules.errors import InputError

GATEWAY_HINT = "pip install 'callgate-rules[gateway]'"


def require_gateway_extra() -> None:
    """The MCP SDK and PyJWT, for ``gateway`` and ``init --from-mcp``."""
    try:
        import jwt  # noqa: F401
        import mcp  # noqa: F401
    except ImportError as error:
        raise InputError(f"this command needs the gateway extra ({error.name} is missing): "
                         f"{GATEWAY_HINT}") from None
