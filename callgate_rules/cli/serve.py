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

from callgate_rules.cli.bundle import bundle_options, decision_log_options
from callgate_rules.cli.served import documents_here, http_address
from callgate_rules.cli.store import STORE_OPTION
from callgate_rules.errors import InputError

EXTRA_HINT = "pip install 'callgate-rules[server]'"
LOGGER = logging.getLogger("callgate.server")


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


def cookie_security(host: str, given: bool | None) -> bool:
    """Whether the page's cookies carry ``Secure``: as ``--secure-cookies`` says, else on
    except on a loopback address (a browser on the same machine over plain http). Turned
    off on any other address, it is said at start: a session cookie then crosses the
    network in clear text."""
    secure = not _loopback(host) if given is None else given
    if not secure and not _loopback(host):
        LOGGER.warning("--no-secure-cookies on %s: review-page session cookies will be sent "
                       "over plain http; serve the page over HTTPS (a TLS proxy in front) "
                       "and drop the option", host)
    return secure


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
              help="Seconds a look-up at the resolver endpoint may take in all (connect, "
                   "headers and body); a contract's shorter timeout wins.")
@decision_log_options
@bundle_options(uses="Serve", unsigned="only on a loopback address, for development",
                swaps="verifies and compiles")
@click.option("--max-body", default=256 * 1024, show_default=True, type=int,
              help="The largest request body, in bytes.")
@click.option("--timeout", "request_timeout", default=30.0, show_default=True, type=float,
              help="Seconds a request may take before it is answered 503.")
@click.option("--concurrency", default=16, show_default=True, type=int,
              help="Gate calls running at once in this instance.")
@click.option("--header-timeout", default=10.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True),
              help="Seconds a request's headers may take to arrive (408 past it).")
@click.option("--body-timeout", default=10.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True),
              help="Seconds a request's whole body may take to arrive (408 past it).")
@click.option("--client-concurrency", default=32, show_default=True,
              type=click.IntRange(min=1),
              help="Unfinished requests one client address may have (429 past it).")
@click.option("--readiness-timeout", default=2.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True),
              help="Seconds /readyz waits for the receipt store before answering 503.")
@click.option("--otel", type=click.Choice(["console", "otlp"]),
              help="Export a span per decision (needs opentelemetry-sdk; otlp its exporter).")
@click.option("--secure-cookies/--no-secure-cookies", default=None,
              help="Review-page cookies over HTTPS only (the Secure attribute). Default: on, "
                   "except on a loopback --http address (plain http://127.0.0.1).")
@click.option("--forwarded-allow-ips", metavar="IPS",
              help="Trust X-Forwarded-For / X-Forwarded-Proto from these proxy addresses "
                   "(comma-separated IPs or networks, or '*'): the client address the "
                   "sign-in throttle and --client-concurrency count is then the header's. "
                   "Default: trust no one; the peer's address counts.")
@click.option("--unscoped", type=click.Choice(["none", "all"]), default="none",
              show_default=True,
              help="What a caller with no scope sees: a host token that pins no actor "
                   "field, a reviewer without `scope:` in the users file.")
@click.option("--session-idle", default=1800.0, show_default=True,
              type=click.FloatRange(min=1), help="Seconds a review-page session may go unused.")
@click.option("--session-lifetime", default=8 * 3600.0, show_default=True,
              type=click.FloatRange(min=1), help="Seconds a review-page session lasts at most.")
@click.option("--login-attempts", default=20, show_default=True, type=click.IntRange(min=1),
              help="Sign-in attempts one source address may make per --login-window.")
@click.option("--login-failures", default=10, show_default=True, type=click.IntRange(min=1),
              help="Failed sign-ins one login name may have per --login-window.")
@click.option("--login-window", default=300.0, show_default=True,
              type=click.FloatRange(min=1), help="Seconds the sign-in limits count over.")
@click.option("--login-concurrency", default=2, show_default=True, type=click.IntRange(min=1),
              help="Passwords checked at once (their own budget, never the decision API's).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def serve(paths: tuple[Path, ...], http: str, store_url: str, auth_file: Path | None,
          no_auth: bool, users_file: Path | None, review_auth_file: Path | None,
          world_file: str | None, resolver_url: str | None, resolver_timeout: float,
          decision_log: Path | None, decision_log_key: Path | None, checkpoint_every: int,
          bundle_location: str | None, public_key_file: Path | None,
          allow_unsigned_bundle: bool, bundle_poll: float, max_body: int,
          request_timeout: float, concurrency: int, header_timeout: float,
          body_timeout: float, client_concurrency: int, readiness_timeout: float,
          otel: str | None, secure_cookies: bool | None, forwarded_allow_ips: str | None,
          unscoped: str, session_idle: float,
          session_lifetime: float, login_attempts: int, login_failures: int,
          login_window: float, login_concurrency: int, log_level: str) -> None:
    """Serve the decision API (/v1), the review page (/review), /metrics, /healthz and
    /readyz over HTTP, with the OpenAPI document at /openapi.json.

    PATHS are the contracts and policies (default `contracts policies`). Hosts authenticate
    with bearer tokens (--auth); several instances may share one PostgreSQL store. Set
    CALLGATE_SECRET (the same in every instance) so confirmation tokens and page sessions
    hold across instances and restarts.

    \b
    Exit codes:
      0 stopped (Ctrl-C or SIGTERM) after finishing the requests under way
      2 bad input: documents with errors, a bad option, a missing extra, a store that
        cannot be opened
    """
    _require_extra()
    import uvicorn

    from callgate_rules.integrations.identity import load_auth
    from callgate_rules.server import ServiceSettings, create_app
    from callgate_rules.server.users import LoginLimits, load_users

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    address = http_address(http)
    if auth_file is None and not no_auth:
        raise InputError("callgate serve needs --auth FILE (bearer tokens for hosts), or "
                         "--no-auth on a loopback address")
    if no_auth and not _loopback(address[0]):
        raise InputError(f"--no-auth only on a loopback address, not {address[0]}")
    from callgate_rules.cli.bundle import verified_bundle

    bundle = verified_bundle(bundle_location, public_key_file, allow_unsigned_bundle,
                                    address[0], paths)
    if decision_log_key is not None and decision_log is None:
        raise InputError("--decision-log-key signs the checkpoints of --decision-log FILE; "
                         "pass that too")
    secret = os.environ.get("CALLGATE_SECRET")
    settings = ServiceSettings(
        paths=tuple(str(p) for p in paths) or (() if bundle else documents_here()),
        store=store_url,
        verifier=load_auth(auth_file) if auth_file else None,
        users=load_users(users_file) if users_file else None,
        review_verifier=load_auth(review_auth_file) if review_auth_file else None,
        secret=secret.encode() if secret else None, world=world_file,
        decision_log=str(decision_log) if decision_log else None,
        decision_log_key=str(decision_log_key) if decision_log_key else None,
        checkpoint_every=checkpoint_every, bundle=bundle, bundle_location=bundle_location,
        bundle_public_key=str(public_key_file) if public_key_file else None,
        allow_unsigned_bundle=allow_unsigned_bundle, bundle_poll=bundle_poll,
        resolver_url=resolver_url, resolver_timeout=resolver_timeout,
        resolver_token=os.environ.get("CALLGATE_RESOLVER_TOKEN") or None,
        max_body_bytes=max_body, request_timeout=request_timeout, concurrency=concurrency,
        header_timeout=header_timeout, body_timeout=body_timeout,
        client_concurrency=client_concurrency, readiness_timeout=readiness_timeout,
        otel=otel, secure_cookies=cookie_security(address[0], secure_cookies),
        unscoped=unscoped,
        session_idle=session_idle, session_lifetime=session_lifetime,
        login_limits=LoginLimits(login_attempts, login_failures, login_window),
        login_concurrency=login_concurrency)
    app = create_app(settings)
    from callgate_rules.server.connections import header_deadline_protocol

    # uvicorn trusts X-Forwarded-For from 127.0.0.1 unless told otherwise: any loopback
    # client could then name its own address and slip the per-address limits
    uvicorn.run(app, host=address[0], port=address[1], log_level=log_level,
                access_log=log_level == "debug", timeout_graceful_shutdown=5,
                http=header_deadline_protocol(header_timeout),
                proxy_headers=forwarded_allow_ips is not None,
                forwarded_allow_ips=forwarded_allow_ips or "")


@click.command("hash-password")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin.")
def hash_password(password_stdin: bool) -> None:
    """Print a PBKDF2 hash of a password for the review page's users file.

    \b
    Exit codes:
      0 printed
      2 bad input: an empty password, or two that do not match
    """
    from callgate_rules.server.users import hash_password as make_hash

    password = (sys.stdin.readline().rstrip("\n") if password_stdin
        else getpass.getpass("password: "))
    if not password:
        raise InputError("an empty password cannot sign in")
    click.echo(make_hash(password))


COMMANDS = (serve, hash_password)
