"""The commands for the people who write the documents: ``lint`` and ``fmt`` them, ``export``
the contracts as an API's tool list, write the function ``catalog``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from callgate_rules.authoring.lint import CHECKS, FORMATS, render
from callgate_rules.authoring.lint import lint as run_lint
from callgate_rules.cli.paths import document_paths, sort_paths
from callgate_rules.cli.progress import progress
from callgate_rules.documents.compiler import load
from callgate_rules.documents.source import iter_yaml_files
from callgate_rules.errors import InputError
from callgate_rules.integrations.formats import TOOL_FORMATS


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text",
              show_default=True,
              help="text: file:line:col lines; json; github: Actions annotations; "
                   "sarif: a SARIF 2.1.0 log for code scanning.")
@click.option("--since", metavar="GIT_REF",
              help="Also check that every document changed since GIT_REF raised its "
                   "metadata.version, and that no tool was removed or narrowed unannounced.")
@click.option("--allow-removed", "allow_removed", multiple=True, metavar="NAME",
              help="With --since: a tool whose removal is intended (repeatable).")
@click.option("--notes", is_flag=True,
              help="Also show notes: suggestions such as declaring the schema of a record "
                   "whose fields the rules read.")
def lint(paths: tuple[Path, ...], output_format: str, since: str | None,
         allow_removed: tuple[str, ...], notes: bool = False) -> None:
    """Check documents for CI: schema, CEL, variables and fields, routes, examples, rules
    that cannot fire, and (with --since) version bumps.

    PATHS default to `contracts policies`. Prints `file:line:col: severity code message`,
    one finding a line.

    \b
    Exit codes:
      0 no error (warnings and notes may be printed)
      1 an error in the documents
      2 bad input: a path that is not there, a bad option
    """
    if allow_removed and since is None:
        raise InputError("--allow-removed only applies with --since GIT_REF")
    documents = list(paths or _default_paths())
    files = sum(1 for _ in iter_yaml_files(documents))
    with progress(files + len(CHECKS), "linting",
                  "json" if output_format in ("json", "sarif") else "text") as advanced:
        findings = run_lint(documents, since=since, allow_removed=allow_removed, notes=notes,
                            advanced=advanced)
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = sum(1 for f in findings if f.severity == "warning")
    report = render(findings, output_format)
    if report:
        click.echo(report)
    if output_format in ("text", "github"):
        summary = f"{errors} error(s), {warnings} warning(s)"
        click.echo(summary + (f", {len(findings) - errors - warnings} note(s)" if notes
                              else ""), err=True)
    sys.exit(1 if errors else 0)


def _default_paths() -> list[Path]:
    paths = [Path(p) for p in ("contracts", "policies") if Path(p).exists()]
    if not paths:
        raise InputError("no contracts/ or policies/ here; pass the paths of your documents")
    return paths


@click.command("fmt")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--check", is_flag=True,
              help="Write nothing; list the files that would change and exit 1 if any would.")
def fmt_command(paths: tuple[Path, ...], check: bool) -> None:
    """Lay out documents canonically: key order, indentation, CEL quoting; comments kept.

    PATHS default to `contracts policies`. Rewrites files in place and prints
    `path: reformatted` for each; with --check prints `path: would be reformatted` and
    writes nothing. Files without a callgate document are left alone.

    \b
    Exit codes:
      0 formatted (or, with --check, every file already canonical)
      1 with --check: a file would be reformatted
      2 bad input: a path that is not there, a file that cannot be parsed
    """
    from callgate_rules.authoring.fmt import format_paths, write_formatted

    results = format_paths(paths or _default_paths())
    changed = [result for result in results if result.changed]
    if not check:
        write_formatted(changed)
    verdict = "would be reformatted" if check else "reformatted"
    for result in changed:
        click.echo(f"{result.path}: {verdict}")
    named = set(paths)
    for result in results:
        if result.formatted is None and result.path in named:
            click.echo(f"{result.path}: skipped, it holds no callgate document", err=True)
    canonical = sum(1 for result in results if result.formatted is not None
                    and not result.changed)
    click.echo(f"{len(changed)} file(s) {verdict}, {canonical} already canonical", err=True)
    sys.exit(1 if check and changed else 0)


@click.command("export")
@document_paths
@click.option("--format", "tool_format", type=click.Choice(list(TOOL_FORMATS)), required=True,
              help="The API whose tool definitions to write.")
@click.option("--output", "output_file",
              type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Write the JSON to this file instead of stdout.")
def export_command(paths: tuple[Path, ...], contracts_dir: Path | None,
                   policies_dir: Path | None, tool_format: str,
                   output_file: Path | None) -> None:
    """Write the contracts as an API's tool list (JSON), so the two never drift apart.

    PATHS are folders or files of documents (default: contracts). openai: Chat Completions
    tools; openai-responses: Responses API function tools; anthropic: Messages API tools,
    examples as input_examples; mcp: MCP Tool objects.

    \b
    Exit codes:
      0 written
      2 bad input: documents with errors, no contract, a tool name or schema the API would
        reject (named with its file), a file that cannot be written
    """
    from callgate_rules.integrations.formats import tool_definitions

    documents = sort_paths("export", paths, contracts_dir, policies_dir,
                           defaults=("contracts",)).documents
    config = load(documents)
    if not config.contracts:
        raise InputError(f"{' '.join(map(str, documents))}: no ToolContract documents to "
                         "export")
    tools = tool_definitions(config, tool_format)
    _write_output(json.dumps(tools, indent=2, ensure_ascii=False) + "\n", output_file)


@click.command("catalog")
@document_paths
@click.option("--format", "output_format", type=click.Choice(["markdown", "html"]),
              default="markdown", show_default=True)
@click.option("--output", "output_file",
              type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Write the catalogue to this file instead of stdout.")
def catalog_command(paths: tuple[Path, ...], contracts_dir: Path | None,
                    policies_dir: Path | None, output_format: str,
                    output_file: Path | None) -> None:
    """Write the function catalogue for process owners (Markdown or one HTML page).

    PATHS are folders or files of documents (default: contracts policies). Each tool with
    its owner, version, effect, confirmation, idempotency, timeout, arguments, look-ups,
    rules and their messages, the rights that apply, and an example.

    \b
    Exit codes:
      0 written
      2 bad input: documents with errors, a file that cannot be written
    """
    from callgate_rules.authoring.catalog import RENDERERS, load_catalog

    catalog = load_catalog(*sort_paths("catalog", paths, contracts_dir, policies_dir).documents)
    _write_output(RENDERERS[output_format](catalog), output_file)


def _write_output(text: str, output_file: Path | None) -> None:
    """``text`` to ``--output`` when given (saying so on stderr), otherwise to stdout."""
    if output_file is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    try:
        output_file.write_text(text, encoding="utf-8")
    except OSError as error:
        raise InputError(f"{output_file}: cannot write: {error}") from None
    click.echo(f"wrote {output_file}", err=True)


COMMANDS = (lint, fmt_command, export_command, catalog_command)
