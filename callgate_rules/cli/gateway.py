"""The MCP command ``gateway`` (callgate in front of an MCP server); ``init --from-mcp``
is in ``init.py``. Both need the ``gateway`` extra, imported only when one of them runs
(``require_gateway_extra``), so the other commands start without the MCP SDK.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from callgate_rules.cli import served
from callgate_rules.cli.bundle import bundle_options, decision_log_options
from callgate_rules.cli.extras import require_gateway_extra
from callgate_rules.cli.store import STORE_OPTION
from callgate_rules.errors import InputError


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--upstream-command", metavar='"CMD ARGS"',
              help="Start the upstream MCP server with this command line, over stdio.")
@click.option("--upstream", "upstreams", multiple=True, metavar='NAME="CMD ARGS"|NAME=URL',
              help="One of several upstreams (repeat for each): started with the command, "
                   "or reached at the http(s) URL. Its tools are offered as NAME__tool. "
                   "Instead of --upstream-command/--upstream-url.")
@click.option("--upstream-env", "upstream_env", multiple=True, metavar="NAME",
              help="Pass only this environment variable to the upstream started with "
                   "--upstream-command (repeat for more; HOME, PATH, SHELL and TERM always "
                   "pass). Without it the upstream inherits the gateway's whole "
                   "environment.")
@click.option("--pass-resource", "pass_resources", multiple=True, metavar="PATTERN",
              help="Pass the upstream's resources whose URI matches PATTERN (shell-style, "
                   "e.g. 'notes://*'; repeat for more) through, read-only and logged. "
                   "Default: none.")
@click.option("--pass-prompt", "pass_prompts", multiple=True, metavar="PATTERN",
              help="Pass the upstream's prompts whose name matches PATTERN through, "
                   "logged (repeat for more). Default: none.")
@click.option("--upstream-url", metavar="URL",
              help="Reach the upstream MCP server over streamable HTTP at this URL.")
@click.option("--http", "http_address", metavar="HOST:PORT",
              help="Serve streamable HTTP at HOST:PORT (path /mcp) instead of stdio.")
@bundle_options(uses="Load", unsigned="over stdio or on a loopback --http only",
                swaps="verifies, compiles and fits the upstream")
@decision_log_options
@STORE_OPTION
@click.option("--actor", "actor_file", type=click.Path(path_type=Path),
              help="stdio: the actor the gate decides for (YAML or JSON).")
@click.option("--session", "session_file", type=click.Path(path_type=Path),
              help="stdio: the session facts (YAML or JSON).")
@click.option("--auth", "auth_file", type=click.Path(path_type=Path),
              help="--http: how bearer tokens are verified and mapped to the actor (YAML).")
@click.option("--confirmation-timeout", default=300.0, show_default=True, type=float,
              help="Seconds an elicitation waits for a person before the write is refused.")
@click.option("--upstream-answer-limit", default=8 * 1024 * 1024, show_default=True,
              type=click.IntRange(min=1024), metavar="BYTES",
              help="Bytes the gateway reads from one upstream answer; a larger one is "
                   "refused unread (not counted against the run's failure budget).")
@click.option("--upstream-call-deadline", default=60.0, show_default=True,
              type=click.FloatRange(min=0.001), metavar="SECONDS",
              help="No upstream call waits longer than this (the contract's timeout, if "
                   "shorter, wins).")
@click.option("--upstream-restarts", default=5, show_default=True,
              type=click.IntRange(min=0),
              help="Restarts of a stopped upstream allowed within --upstream-restart-window; "
                   "one more and the gateway exits with code 3.")
@click.option("--upstream-restart-window", default=60.0, show_default=True,
              type=click.FloatRange(min=0.0), metavar="SECONDS",
              help="The window --upstream-restarts is counted in.")
@click.option("--upstream-restart-backoff", default=0.5, show_default=True,
              type=click.FloatRange(min=0.0), metavar="SECONDS",
              help="Wait before the first restart; it doubles each time, up to 8 s.")
def gateway(paths: tuple[Path, ...], upstream_command: str | None,
            upstreams: tuple[str, ...], upstream_env: tuple[str, ...],
            pass_resources: tuple[str, ...], pass_prompts: tuple[str, ...],
            upstream_url: str | None,
            http_address: str | None, bundle_location: str | None,
            public_key_file: Path | None, allow_unsigned_bundle: bool,
            bundle_poll: float, decision_log: Path | None, decision_log_key: Path | None,
            checkpoint_every: int, store_url: str, actor_file: Path | None,
            session_file: Path | None, auth_file: Path | None,
            confirmation_timeout: float, upstream_answer_limit: int,
            upstream_call_deadline: float, upstream_restarts: int,
            upstream_restart_window: float, upstream_restart_backoff: float) -> None:
    """Serve MCP to clients in front of one upstream MCP server, every call through the gate.

    PATHS are the contracts and policies (default `contracts policies`), or --bundle a
    signed bundle, looked at for a new one every --bundle-poll seconds and swapped in once
    it verifies, compiles and fits the upstream. Only upstream tools with a contract are
    offered. Over stdio (the default) a desktop client launches this in
    place of the server; --http serves streamable HTTP with bearer tokens. Bad configuration
    stops it at start with one line per problem.

    \b
    Exit codes:
      0 stopped: the client closed stdio, or Ctrl-C / SIGTERM over HTTP
      2 bad input: documents with errors, a bad option, a missing extra, an upstream
        server that cannot be started or reached
      3 the upstream kept stopping: more than --upstream-restarts restarts within
        --upstream-restart-window (a stopped upstream is started again until then)
    """
    require_gateway_extra()
    from callgate_rules.cli.bundle import verified_bundle
    from callgate_rules.gateway import GatewayConfigError, Settings, UpstreamSpec, run
    from callgate_rules.gateway.passthrough import PassThrough
    from callgate_rules.gateway.upstream import UpstreamLimits
    from callgate_rules.integrations.identity import identity_from_files, load_auth

    address = served.http_address(http_address) if http_address else None
    bundle = verified_bundle(bundle_location, public_key_file, allow_unsigned_bundle,
                             address[0] if address else None, paths)
    if decision_log_key is not None and decision_log is None:
        raise InputError("--decision-log-key signs the checkpoints of --decision-log FILE; "
                         "pass that too")
    settings = Settings(
        upstream=UpstreamSpec(command=upstream_command, url=upstream_url,
                              env_names=upstream_env or None)
        if upstream_command is not None or upstream_url is not None or not upstreams
        else None,
        upstreams=tuple(_named_upstream(value, upstream_env) for value in upstreams),
        paths=() if bundle else tuple(str(p) for p in paths) or served.documents_here(),
        bundle=bundle, bundle_location=bundle_location,
        bundle_public_key=str(public_key_file) if public_key_file else None,
        allow_unsigned_bundle=allow_unsigned_bundle, bundle_poll=bundle_poll,
        decision_log=str(decision_log) if decision_log else None,
        decision_log_key=str(decision_log_key) if decision_log_key else None,
        checkpoint_every=checkpoint_every, store=store_url,
        identity=identity_from_files(actor_file, session_file) if actor_file else None,
        verifier=load_auth(auth_file) if auth_file else None,
        http=address,
        passthrough=PassThrough(resources=pass_resources, prompts=pass_prompts),
        confirmation_timeout=confirmation_timeout,
        limits=UpstreamLimits(answer_bytes=upstream_answer_limit,
                              call_deadline=upstream_call_deadline,
                              restarts=upstream_restarts,
                              restart_window=upstream_restart_window,
                              restart_backoff=upstream_restart_backoff),
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


def _named_upstream(value: str, env_names: tuple[str, ...]) -> tuple[str, Any]:
    """``NAME=CMD ARGS`` or ``NAME=URL`` as (name, UpstreamSpec)."""
    from callgate_rules.gateway import UpstreamSpec

    name, equals, where = value.partition("=")
    if not equals or not name or not where.strip():
        raise click.BadParameter(f"{value!r}: give NAME=\"CMD ARGS\" or NAME=URL",
                                 param_hint="--upstream")
    if where.startswith(("http://", "https://")):
        return name, UpstreamSpec(url=where)
    return name, UpstreamSpec(command=where, env_names=env_names or None)


COMMANDS = (gateway,)
