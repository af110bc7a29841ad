"""``callgate``: thin click commands over the library, so the two can never disagree.

Exit codes: 0 success, 1 the check found problems (lint errors, failed scenarios),
2 bad input (a file that cannot be read, a bad option) — always one clear line, never a
traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from .compiler import load
from .errors import CallgateError, ConfigError, InputError, StoreConfigError
from .gate import Gate
from .lint import lint as run_lint
from .source import read_data_file
from .world import WorldResolvers, check_world

F = TypeVar("F", bound=Callable[..., Any])


def clear_errors(command: F) -> F:
    """Turn callgate's own errors into one line on stderr and exit 2."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ConfigError as error:
            for finding in error.findings:
                click.echo(str(finding), err=True)
            click.echo(f"callgate: {len(error.findings)} error(s) in the documents; "
                       "run `callgate lint` for details", err=True)
            sys.exit(2)
        except (InputError, StoreConfigError) as error:
            click.echo(f"callgate: {error}", err=True)
            sys.exit(2)
        except CallgateError as error:
            click.echo(f"callgate: {error}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="callgate-rules")
def main() -> None:
    """callgate — a declarative gate between a model's proposed tool call and its action."""


# lint -------------------------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@clear_errors
def lint(paths: tuple[Path, ...], output_format: str) -> None:
    """Check documents for CI: schema, CEL, variables and fields, routes, examples.

    PATHS default to `contracts policies`. Prints `file:line:col: severity code message`,
    one finding a line; exits 1 when there is any error.
    """
    findings = run_lint(paths or _default_paths())
    errors = sum(1 for f in findings if f.severity == "error")
    if output_format == "json":
        click.echo(json.dumps([f.as_dict() for f in findings], indent=2))
    else:
        for finding in findings:
            click.echo(str(finding))
        warnings = len(findings) - errors
        click.echo(f"{errors} error(s), {warnings} warning(s)", err=True)
    sys.exit(1 if errors else 0)


def _default_paths() -> list[Path]:
    paths = [Path(p) for p in ("contracts", "policies") if Path(p).exists()]
    if not paths:
        raise InputError("no contracts/ or policies/ here; pass the paths of your documents")
    return paths


# check ------------------------------------------------------------------------------------


@main.command()
@click.option("--call", "call_file", required=True,
              help="The model's output: OpenAI, Anthropic or plain call JSON (- for stdin).")
@click.option("--actor", "actor_file", required=True, help="The actor, as the host knows them.")
@click.option("--world", "world_file", help="Records for the look-ups: collection → list.")
@click.option("--now", "now_text", help="The time of the decision, RFC 3339 (default: now).")
@click.option("--contracts", "contracts_dir", default="contracts", show_default=True)
@click.option("--policies", "policies_dir", default="policies", show_default=True)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--explain", is_flag=True, help="Show each step and each rule evaluated.")
@clear_errors
def check(
    call_file: str,
    actor_file: str,
    world_file: str | None,
    now_text: str | None,
    contracts_dir: str,
    policies_dir: str,
    output_format: str,
    explain: bool,
) -> None:
    """Decide about one proposed call (steps 1–4, nothing is executed)."""
    now = _parse_now(now_text)
    model_output = _read_call(call_file)
    actor = read_data_file(actor_file, "the actor")
    if not isinstance(actor, dict):
        raise InputError(f"{actor_file}: the actor must be a mapping such as "
                         "{id: U-7, tenant: acme, role: agent}")
    world = check_world(read_data_file(world_file, "the world"), world_file) if world_file \
        else {}
    config = load([p for p in (contracts_dir, policies_dir) if Path(p).exists()] or
                  [contracts_dir])
    gate = Gate(config, resolvers=WorldResolvers(world))
    decision = gate.check(model_output, actor=actor, now=now)
    if output_format == "json":
        payload = decision.as_dict()
        if not explain:
            payload.pop("trace")
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
        return
    click.echo(f"route:          {decision.route}")
    click.echo(f"error class:    {decision.error_class or '-'}")
    tool = f"{decision.tool} v{decision.contract_version}" if decision.tool else "-"
    click.echo(f"tool:           {tool}")
    click.echo(f"rule:           {decision.rule or '-'}")
    click.echo(f"agent message:  {decision.agent_message}")
    click.echo(f"user message:   {decision.user_message or '-'}")
    for candidate in decision.candidates:
        click.echo(f"candidate:      {json.dumps(candidate, ensure_ascii=False)}")
    for shadow in decision.warnings:
        click.echo(f"{shadow.mode}:          {shadow.rule} would give {shadow.error_class}: "
                   f"{shadow.message}")
    versions = ", ".join(f"{k} {v}" for k, v in decision.versions.items())
    click.echo(f"versions:       {versions}")
    if explain:
        click.echo("trace:")
        for entry in decision.trace:
            click.echo(f"  {entry}")


def _parse_now(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--now {text!r} is not an RFC 3339 time such as "
                         "2026-11-29T12:00:00Z") from None
    if value.tzinfo is None:
        raise InputError(f"--now {text!r} has no time zone; add Z or +00:00")
    return value


def _read_call(path: str) -> Any:
    """JSON is handed to the gate as text, so a malformed call is the gate's verdict."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read the call: {error}") from None
    if text.lstrip().startswith(("{", "[")) or path.endswith(".json") or path == "-":
        return text
    return read_data_file(path, "the call")


if __name__ == "__main__":
    main()
