"""The MCP gateway: callgate in front of any MCP server (``callgate gateway``).

Clients see exactly the upstream tools that have a contract; every ``tools/call`` goes
through the seven steps, a write runs once under its operation ID (sent to the upstream in
``_meta["callgate/operation_id"]``), an unknown outcome is reconciled through the
contract's ``reconcile.tool``, a write that needs a person is confirmed through MCP
elicitation, and over HTTP the caller is who a verified bearer token says.

    from callgate_rules.gateway import Settings, UpstreamSpec, identity_from_files, run

    run(Settings(upstream=UpstreamSpec(command="python notes_server.py"),
                 identity=identity_from_files("actor.yaml")))

Needs the ``gateway`` extra (``pip install 'callgate-rules[gateway]'``): the ``mcp`` SDK,
and PyJWT with ``cryptography`` for bearer tokens. Modules: ``upstream`` (the upstream
session; its bounded stdio transport in ``bounded_stdio``), ``binding`` (executors, finder
and resolvers over it; the offered tools; the start-up checks), ``results`` (decisions as
MCP results; the ``_meta`` keys), ``confirm`` (elicitation and confirmation references),
``identity`` (bearer tokens and claim mapping), ``server`` (the MCP server), ``contracts``
(``callgate init --from-mcp``), ``passthrough`` (resources and prompts under an allow-list),
``combined`` (several upstreams, tools namespaced ``NAME__tool``), ``reload`` (the policy
serving, and a new ``--bundle`` swapped in whole).
"""

from __future__ import annotations

import anyio

from callgate_rules.gateway.server import Gateway, GatewayConfigError, Settings, serve
from callgate_rules.gateway.upstream import (
    UpstreamGone,
    UpstreamLimits,
    UpstreamSpec,
    UpstreamStartError,
)
from callgate_rules.integrations.identity import (
    Identity,
    TokenVerifier,
    identity_from_files,
    load_auth,
)

__all__ = [
    "Gateway", "GatewayConfigError", "Identity", "Settings", "TokenVerifier", "UpstreamGone",
    "UpstreamLimits", "UpstreamSpec", "UpstreamStartError", "identity_from_files", "load_auth",
    "run", "serve",
]


def run(settings: Settings) -> None:
    """``serve`` on a new event loop, until the client goes away or it is stopped."""
    anyio.run(serve, settings)
