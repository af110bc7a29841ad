"""The MCP command ``gateway`` (callgate in front of an MCP server); ``init --from-mcp``
is in ``init.py``. Both need the ``gateway`` extra, imported only when one of them runs
(``require_gateway_extra``), so the other commands start without the MCP SDK.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from callgate_rules.cli import served
from callgate_rules.cli.extras import require_gateway_extra
from callgate_rules.cli.store import STORE_OPTION


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--upstream-command", metavar='"CMD ARGS"',
              help="Start the upstream MCP server with this command line, over stdio.")
@click.option("--upstream-url", metavar="URL",
              help="Reach the upstream MCP server over streamable HTTP at this URL.")
@click.option("--http", "http_address", metavar="HOST:PORT",
              help="Serve streamable HTTP at HOST:PORT (path /mcp) instead of stdio.")
@STORE_OPTION
@click.option("--actor", "actor_file", type=click.Path(path_type=Path),
              help="stdio: the actor the gate decides for (YAML or JSON).")
@click.option("--session", "session_file", type=click.Path(path_type=Path),
              help="stdio: the session facts (YAML or JSON).")
@click.option("--auth", "auth_file", type=click.Path(path_type=Path),
              help="--http: how bearer tokens are verified and mapped to the actor (YAML).")
@click.option("--confirmation-timeout", default=300.0, show_default=True, type=float,
              help="Seconds an elicitation waits for a person before the write is refused.")
def gateway(paths: tuple[Path, ...], upstream_command: str | None, upstream_url: str | None,
            http_address: str | None, store_url: str, actor_file: Path | None,
            session_file: Path | None, auth_file: Path | None,
            confirmation_timeout: float) -> None:
    """Serve MCP to clients in front of one upstream MCP server, every call through the gate.

    PATHS are the contracts and policies (default `contracts policies`). Only upstream tools
    with a contract are offered. Over stdio (the default) a desktop client launches this in
    place of the server; --http serves streamable HTTP with bearer tokens. Bad configuration
    stops it at start with one line per problem.
    """
    require_gateway_extra()
    from callgate_rules.gateway import GatewayConfigError, Settings, UpstreamSpec, run
    from callgate_rules.integrations.identity import identity_from_files, load_auth

    settings = Settings(
        upstream=UpstreamSpec(command=upstream_command, url=upstream_url),
        paths=tuple(str(p) for p in paths) or served.documents_here(), store=store_url,
        identity=identity_from_files(actor_file, session_file) if actor_file else None,
        verifier=load_auth(auth_file) if auth_file else None,
        http=served.http_address(http_address) if http_address else None,
        confirmation_timeout=confirmation_timeout,
        secret=os.environ["CALLGATE_SECRET"].encode() if os.environ.get("CALLGATE_SECRET")
        else None)
    try:
        run(settings)
    except GatewayConfigError as error:
        for problem in error.problems:
            click.echo(f"callgate gateway: {problem}", err=True)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        pass


COMMANDS = (gateway,)
