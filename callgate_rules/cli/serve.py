"""``callgate serve``: the decision service under uvicorn; ``callgate hash-password``: a
password hash for the review page's users file. Both need the ``server`` extra, imported
only when one of them runs."""

from __future__ import annotations

import getpass
import importlib.util
import ipaddress
import logging
import os
import sys
from pathlib import Path

import click

from callgate_rules.cli.served import documents_here, http_address
from callgate_rules.cli.store import STORE_OPTION
from callgate_rules.errors import InputError

EXTRA_HINT = "pip install 'callgate-rules[server]'"


EXTRA_MODULES = {"fastapi": "fastapi", "jinja2": "jinja2", "jwt": "PyJWT",
                 "python_multipart": "python-multipart", "prometheus_client":
                 "prometheus-client", "uvicorn": "uvicorn"}


def _require_extra() -> None:
    for module, package in EXTRA_MODULES.items():
        if importlib.util.find_spec(module) is None:
            raise InputError(f"this command needs the server extra ({package} is missing): "
                             f"{EXTRA_HINT}")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--http", "http", default="127.0.0.1:8787", show_default=True,
              metavar="HOST:PORT", help="Where to listen.")
@STORE_OPTION
@click.option("--auth", "auth_file", type=click.Path(path_type=Path),
              help="How hosts' bearer tokens are verified (the gateway's --auth format).")
@click.option("--no-auth", is_flag=True,
              help="Accept /v1 calls without a token: only on a loopback address.")
@click.option("--users", "users_file", type=click.Path(path_type=Path),
              help="Who may sign in to the review page (YAML; see `callgate hash-password`).")
@click.option("--review-auth", "review_auth_file", type=click.Path(path_type=Path),
              help="Let people sign in to the review page with a bearer token verified "
                   "as this file says (the --auth format; the principal is the approver).")
@click.option("--world", "world_file", help="Records for the look-ups: collection → list.")
@click.option("--resolver-url", metavar="URL",
              help="Ask this endpoint for the look-ups' records: POST {collection, field, "
                   "value} → a JSON list of records (bearer token from "
                   "CALLGATE_RESOLVER_TOKEN, if set).")
@click.option("--resolver-timeout", default=5.0, show_default=True, type=float,
              help="Seconds the resolver endpoint may take per look-up.")
@click.option("--decision-log", "decision_log", type=click.Path(path_type=Path),
              help="Append every decision's log line to this file (JSON lines, masked), "
                   "e.g. for `callgate replay`.")
@click.option("--max-body", default=256 * 1024, show_default=True, type=int,
              help="The largest request body, in bytes.")
@click.option("--timeout", "request_timeout", default=30.0, show_default=True, type=float,
              help="Seconds a request may take before it is answered 503.")
@click.option("--concurrency", default=16, show_default=True, type=int,
              help="Gate calls running at once in this instance.")
@click.option("--otel", type=click.Choice(["console", "otlp"]),
              help="Export a span per decision (needs opentelemetry-sdk; otlp its exporter).")
@click.option("--secure-cookies", is_flag=True, help="Review-page cookies over HTTPS only.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def serve(paths: tuple[Path, ...], http: str, store_url: str, auth_file: Path | None,
          no_auth: bool, users_file: Path | None, review_auth_file: Path | None,
          world_file: str | None, resolver_url: str | None, resolver_timeout: float,
          decision_log: Path | None, max_body: int,
          request_timeout: float, concurrency: int, otel: str | None, secure_cookies: bool,
          log_level: str) -> None:
    """Serve the decision API (/v1), the review page (/review), /metrics, /healthz and
    /readyz over HTTP, with the OpenAPI document at /openapi.json.

    PATHS are the contracts and policies (default `contracts policies`). Hosts authenticate
    with bearer tokens (--auth); several instances may share one PostgreSQL store. Set
    CALLGATE_SECRET (the same in every instance) so confirmation tokens and page sessions
    hold across instances and restarts.
    """
    _require_extra()
    import uvicorn

    from callgate_rules.integrations.identity import load_auth
    from callgate_rules.server import ServiceSettings, create_app
    from callgate_rules.server.users import load_users

    address = http_address(http)
    if auth_file is None and not no_auth:
        raise InputError("callgate serve needs --auth FILE (bearer tokens for hosts), or "
                         "--no-auth on a loopback address")
    if no_auth and not _loopback(address[0]):
        raise InputError(f"--no-auth only on a loopback address, not {address[0]}")
    secret = os.environ.get("CALLGATE_SECRET")
    settings = ServiceSettings(
        paths=tuple(str(p) for p in paths) or documents_here(), store=store_url,
        verifier=load_auth(auth_file) if auth_file else None,
        users=load_users(users_file) if users_file else None,
        review_verifier=load_auth(review_auth_file) if review_auth_file else None,
        secret=secret.encode() if secret else None, world=world_file,
        decision_log=str(decision_log) if decision_log else None,
        resolver_url=resolver_url, resolver_timeout=resolver_timeout,
        resolver_token=os.environ.get("CALLGATE_RESOLVER_TOKEN") or None,
        max_body_bytes=max_body, request_timeout=request_timeout, concurrency=concurrency,
        otel=otel, secure_cookies=secure_cookies)
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=address[0], port=address[1], log_level=log_level,
                access_log=log_level == "debug", timeout_graceful_shutdown=5)


@click.command("hash-password")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin.")
def hash_password(password_stdin: bool) -> None:
    """Print a PBKDF2 hash of a password for the review page's users file."""
    from callgate_rules.server.users import hash_password as make_hash

    password = sys.stdin.readline().rstrip("\n") if password_stdin \
        else getpass.getpass("password: ")
    if not password:
        raise InputError("an empty password cannot sign in")
    click.echo(make_hash(password))


COMMANDS = (serve, hash_password)
