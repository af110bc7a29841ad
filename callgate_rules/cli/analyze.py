"""``callgate analyze diff OLD NEW`` and ``callgate analyze check [DIR]``: what a
configuration can and cannot let execute, proved with z3 (``callgate_rules.analysis``).
OLD, NEW and DIR are directories or git refs (``analysis.sources``)."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from callgate_rules.errors import InputError

if TYPE_CHECKING:
    from callgate_rules.analysis.sources import ConfigurationSource

TIMEOUT_HELP = "time limit of each question to the solver, in milliseconds"
FORMATS = ["text", "json", "sarif"]
FORMAT_HELP = "text, JSON, or SARIF 2.1.0 (CI annotations)"
SOURCE_HELP = """\b
A configuration is a directory holding contracts/ and policies/, or a git ref of the
repository the command runs in: REF (HEAD~1, main) is the ref's copy of the current
directory, REF:PATH git's own path inside the ref (./PATH from the current directory).
A directory wins over a ref of the same name."""


def _require_z3() -> None:
    try:
        import z3  # noqa: F401
    except ImportError:
        raise InputError("callgate analyze needs the z3 SMT solver: pip install "
                         "'callgate-rules[analyze]' (the z3-solver package)") from None


def _sarif_paths(sources: Sequence[ConfigurationSource]) -> Callable[[str], str]:
    """A place's path in the working tree, relative to the current directory."""
    from callgate_rules.authoring.lint.report import relative_path

    def path_of(path: str) -> str:
        for source in sources:
            path = source.working_path(path)
        return relative_path(path)
    return path_of


def _shown(text: str, sources: Sequence[ConfigurationSource]) -> str:
    for source in sources:
        text = source.shown_text(text)
    return text


@click.group("analyze")
def analyze_group() -> None:
    """Prove what a configuration can and cannot let execute, with the z3 SMT solver.

    \b
    Exit codes:
      0 equivalent (diff) or no findings (check)
      1 a difference, an unanswered question (diff), a finding or an assertion not
        proved (check)
      2 bad input: neither a folder nor a git ref, documents with errors, no z3
    """


@analyze_group.command("diff", epilog=SOURCE_HELP)
@click.argument("old")
@click.argument("new")
@click.option("--tool", "tools", multiple=True, help="analyse only this tool (repeatable)")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text",
              show_default=True, help=FORMAT_HELP)
@click.option("--timeout-ms", default=10_000, show_default=True, help=TIMEOUT_HELP)
def diff_command(old: str, new: str, tools: tuple[str, ...], output_format: str,
                 timeout_ms: int) -> None:
    """For each tool, calls that OLD and NEW route differently (execute,
    await_confirmation, refused), each with the rules that decide it and as a PolicyTest
    case; or "equivalent".

    \b
    Exit codes:
      0 every tool is equivalent
      1 a difference, or a question the solver could not answer in time
      2 bad input
    """
    _require_z3()
    from callgate_rules.analysis import questions, report, sarif
    from callgate_rules.analysis.sources import resolve
    from callgate_rules.documents.compiler import load

    with tempfile.TemporaryDirectory(prefix="callgate-analyze-") as scratch:
        sources = [resolve(old, Path(scratch)), resolve(new, Path(scratch))]
        before, after = (load(source.parts) for source in sources)
        found = questions.diff(before, after, timeout_ms=timeout_ms, tools=tools or None)
        if output_format == "sarif":
            log = sarif.sarif_log(sarif.diff_results(found, before, after),
                                  _sarif_paths(sources), lambda text: _shown(text, sources))
            click.echo(json.dumps(log, indent=2))
        else:
            shown = (report.diff_json(found) if output_format == "json"
                     else report.diff_text(found))
            click.echo(_shown(shown, sources))
    if any(t.status != "equivalent" for t in found):
        sys.exit(1)


@analyze_group.command("check", epilog=SOURCE_HELP)
@click.argument("directory", required=False, default=".")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text",
              show_default=True, help=FORMAT_HELP)
@click.option("--timeout-ms", default=10_000, show_default=True, help=TIMEOUT_HELP)
def check_command(directory: str, output_format: str, timeout_ms: int) -> None:
    """Rules that can never fail or never hold, allow rules a deny always shadows, tools
    no call can execute, fields a rule should read and does not, and every
    PolicyAssertion, in the configuration DIRECTORY (default: the current one).

    \b
    Exit codes:
      0 no findings, every assertion holds
      1 a finding, or an assertion broken, not proved or not answered in time
      2 bad input
    """
    _require_z3()
    from callgate_rules.analysis import assertions, questions, report, sarif, unread
    from callgate_rules.analysis.sources import resolve
    from callgate_rules.documents.compiler import compile_paths, load

    with tempfile.TemporaryDirectory(prefix="callgate-analyze-") as scratch:
        source = resolve(directory, Path(scratch))
        config = load(source.parts)
        declared = assertions.read_assertions(compile_paths(source.parts), config)
        found = questions.check(config, timeout_ms=timeout_ms)
        unread_found, unread_unknown = unread.unread_fields(config, timeout_ms=timeout_ms)
        found.findings.extend(unread_found)
        found.unknown.extend(unread_unknown)
        checked = assertions.check_assertions(config, declared, timeout_ms=timeout_ms)
        if output_format == "sarif":
            log = sarif.sarif_log(sarif.check_results(found, checked, config),
                                  _sarif_paths([source]),
                                  lambda text: _shown(text, [source]))
            click.echo(json.dumps(log, indent=2))
        else:
            shown = (report.check_json(found, checked) if output_format == "json"
                     else report.check_text(found, checked))
            click.echo(_shown(shown, [source]))
    if found.findings or any(result.status != "holds" for result in checked):
        sys.exit(1)


COMMANDS = (analyze_group,)
