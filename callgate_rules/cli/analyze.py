"""``callgate analyze diff OLD NEW`` and ``callgate analyze check [PATH...]``: what a
configuration can and cannot let execute, proved with z3 (``callgate_rules.analysis``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.errors import InputError

TIMEOUT_HELP = "time limit of each question to the solver, in milliseconds"


def _require_z3() -> None:
    try:
        import z3  # noqa: F401
    except ImportError:
        raise InputError("callgate analyze needs the z3 SMT solver: pip install "
                         "'callgate-rules[analyze]' (the z3-solver package)") from None


def _configuration(directory: Path) -> GateConfig:
    parts = [directory / "contracts", directory / "policies"]
    missing = [str(p) for p in parts if not p.is_dir()]
    if missing:
        raise InputError(f"{directory}: not a configuration directory; it must hold "
                         f"contracts/ and policies/ ({', '.join(missing)} missing)")
    return load(parts)


@click.group("analyze")
def analyze_group() -> None:
    """Prove what a configuration can and cannot let execute, with the z3 SMT solver.

    \b
    Exit codes:
      0 equivalent (diff) or no findings (check)
      1 a difference, an unanswered question (diff), or a finding (check)
      2 bad input: a folder that is not there, documents with errors, no z3
    """


@analyze_group.command("diff")
@click.argument("old", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("new", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--tool", "tools", multiple=True, help="analyse only this tool (repeatable)")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]),
              default="text", show_default=True)
@click.option("--timeout-ms", default=10_000, show_default=True, help=TIMEOUT_HELP)
def diff_command(old: Path, new: Path, tools: tuple[str, ...], output_format: str,
                 timeout_ms: int) -> None:
    """For each tool, calls that OLD and NEW route differently (execute,
    await_confirmation, refused), each with the rules that decide it and as a PolicyTest
    case; or "equivalent". OLD and NEW are configuration directories holding contracts/
    and policies/.

    \b
    Exit codes:
      0 every tool is equivalent
      1 a difference, or a question the solver could not answer in time
      2 bad input
    """
    _require_z3()
    from callgate_rules.analysis import questions, report

    found = questions.diff(_configuration(old), _configuration(new), timeout_ms=timeout_ms,
                           tools=tools or None)
    click.echo(report.diff_json(found) if output_format == "json" else report.diff_text(found))
    if any(t.status != "equivalent" for t in found):
        sys.exit(1)


@analyze_group.command("check")
@click.argument("directory", required=False, default=".",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["text", "json"]),
              default="text", show_default=True)
@click.option("--timeout-ms", default=10_000, show_default=True, help=TIMEOUT_HELP)
def check_command(directory: Path, output_format: str, timeout_ms: int) -> None:
    """Rules that can never fail or never hold, allow rules a deny always shadows, tools
    no call can execute, in the configuration DIRECTORY (default: the current one).

    \b
    Exit codes:
      0 no findings
      1 findings
      2 bad input
    """
    _require_z3()
    from callgate_rules.analysis import questions, report

    found = questions.check(_configuration(directory), timeout_ms=timeout_ms)
    click.echo(report.check_json(found) if output_format == "json"
               else report.check_text(found))
    if found.findings:
        sys.exit(1)


COMMANDS = (analyze_group,)
