"""``callgate``: thin click commands over the library, so the two can never disagree.

Exit codes: 0 success, 1 the check found problems (lint errors, failed scenarios),
2 bad input (a file that cannot be read, a bad option) — always one clear line, never a
traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from callgate_rules.authoring.lint import FORMATS, render
from callgate_rules.authoring.lint import lint as run_lint
from callgate_rules.documents.compiler import load
from callgate_rules.documents.source import read_data_file
from callgate_rules.errors import CallgateError, ConfigError, InputError, StoreConfigError
from callgate_rules.harness.scenarios import load_config_for
from callgate_rules.harness.world import WorldResolvers, check_world
from callgate_rules.pipeline.gate import Gate

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
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text",
              show_default=True,
              help="text: file:line:col lines; json; github: Actions annotations; "
                   "sarif: a SARIF 2.1.0 log for code scanning.")
@click.option("--since", metavar="GIT_REF",
              help="Also check that every document changed since GIT_REF raised its "
                   "metadata.version, and that no tool was removed or narrowed unannounced.")
@click.option("--allow-removed", "allow_removed", multiple=True, metavar="NAME",
              help="With --since: a tool whose removal is intended (repeatable).")
@clear_errors
def lint(paths: tuple[Path, ...], output_format: str, since: str | None,
         allow_removed: tuple[str, ...]) -> None:
    """Check documents for CI: schema, CEL, variables and fields, routes, examples, rules
    that cannot fire, and (with --since) version bumps.

    PATHS default to `contracts policies`. Prints `file:line:col: severity code message`,
    one finding a line; exits 1 when there is any error.
    """
    if allow_removed and since is None:
        raise InputError("--allow-removed only applies with --since GIT_REF")
    findings = run_lint(paths or _default_paths(), since=since, allow_removed=allow_removed)
    errors = sum(1 for f in findings if f.severity == "error")
    report = render(findings, output_format)
    if report:
        click.echo(report)
    if output_format in ("text", "github"):
        click.echo(f"{errors} error(s), {len(findings) - errors} warning(s)", err=True)
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
@click.option("--session", "session_file", help="Facts about the session (YAML or JSON).")
@click.option("--conversation", "conversation_file",
              help="The messages that led to the call (OpenAI or Anthropic format), to work "
                   "out where each argument value came from.")
@click.option("--contracts", "contracts_dir", default="contracts", show_default=True)
@click.option("--policies", "policies_dir", default="policies", show_default=True)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--explain", is_flag=True,
              help="Show each step and each rule evaluated, and each argument's sources.")
@clear_errors
def check(
    call_file: str,
    actor_file: str,
    world_file: str | None,
    now_text: str | None,
    session_file: str | None,
    conversation_file: str | None,
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
    config = load_config_for(contracts_dir, policies_dir)
    session = read_data_file(session_file, "the session") if session_file else None
    if session is not None and not isinstance(session, dict):
        raise InputError(f"{session_file}: the session must be a mapping such as "
                         "{authenticated: true}")
    conversation = read_data_file(conversation_file, "the conversation") \
        if conversation_file else None
    gate = Gate(config, resolvers=WorldResolvers(world))
    try:
        decision = gate.check(model_output, actor=actor, now=now, session=session,
                              conversation=conversation)
    except ValueError as error:  # a conversation in no known format
        raise InputError(f"{conversation_file}: {error}") from None
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
    for shadow in decision.log.get("shadow", ()):
        click.echo(f"{shadow['mode'] + ':':<15} {shadow['rule']} would give "
                   f"{shadow['error_class']}: {shadow['message']}")
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


# simulate ---------------------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--contracts", "contracts_dir", default="contracts", show_default=True)
@click.option("--policies", "policies_dir", default="policies", show_default=True)
@click.option("--store", "store_url", default=None,
              help="Receipt store URL shared by all scenarios (default: a fresh SQLite file "
                   "per scenario in a temporary directory).")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@clear_errors
def simulate(paths: tuple[Path, ...], contracts_dir: str, policies_dir: str,
             store_url: str | None, output_format: str) -> None:
    """Run scenario suites against the simulator (default: examples/scenarios).

    Each scenario scripts the model's outputs, injects the destination's faults and
    expects routes, error classes, messages and the number of writes. Exits 1 if any
    expectation fails.
    """
    from callgate_rules.harness.scenarios import load_config_for, load_scenarios, run_scenarios

    config = load_config_for(contracts_dir, policies_dir)
    scenarios = load_scenarios(paths or [Path("examples/scenarios")])
    if not scenarios:
        raise InputError("no scenarios found; pass scenario files or directories")
    results = run_scenarios(scenarios, config, store_url)
    failed = [r for r in results if not r.passed]
    if output_format == "json":
        click.echo(json.dumps([r.as_dict() for r in results], indent=2, ensure_ascii=False,
                              default=str))
    else:
        width = max(len(r.name) for r in results)
        click.echo(f"{'SCENARIO':<{width}}  {'ROUTE':<18} {'ERROR CLASS':<22} WRITES  RESULT")
        for r in results:
            last = r.last
            route = str(last.route) if last else "-"
            error_class = str(last.error_class) if last and last.error_class else "-"
            verdict = "pass" if r.passed else "FAIL"
            click.echo(f"{r.name:<{width}}  {route:<18} {error_class:<22} {r.writes:>6}  "
                       f"{verdict}")
        for r in failed:
            click.echo(f"\n{r.location}: {r.name}")
            for failure in r.failures:
                click.echo(f"  {failure}")
        click.echo(f"\n{len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


# test ---------------------------------------------------------------------------------------


@main.command("test")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--contracts", "contracts_dir", default="contracts", show_default=True)
@click.option("--policies", "policies_dir", default="policies", show_default=True)
@click.option("--coverage", "show_coverage", is_flag=True,
              help="Report the rules, routes and error classes no case exercised.")
@click.option("--fail-under", "fail_under", type=click.FloatRange(0, 100), default=None,
              help="Exit 1 when coverage is below this percentage (implies --coverage).")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="List passing cases too.")
@clear_errors
def test_command(paths: tuple[Path, ...], contracts_dir: str, policies_dir: str,
                 show_coverage: bool, fail_under: float | None, output_format: str,
                 verbose: bool) -> None:
    """Run PolicyTest cases (default: those under the policies directory).

    Prints every failing case with its file:line and expected against actual, field by
    field, then `N passed, N failed`; exits 1 on any failure.
    """
    from callgate_rules.harness.policytest import coverage, load_tests
    from callgate_rules.harness.scenarios import load_config_for, run_scenarios

    config = load_config_for(contracts_dir, policies_dir)
    cases = load_tests(paths or [Path(policies_dir)])
    if not cases:
        raise InputError("no PolicyTest cases found; see `callgate test --help` and the README")
    results = run_scenarios(cases, config)
    failed = [r for r in results if not r.passed]
    report = coverage(config, results) if show_coverage or fail_under is not None else None
    if output_format == "json":
        click.echo(json.dumps({"passed": len(results) - len(failed), "failed": len(failed),
                               "cases": [r.as_dict() for r in results],
                               "coverage": report.as_dict() if report else None},
                              indent=2, ensure_ascii=False, default=str))
    else:
        for result in results:
            shadows = [shadow for step in result.steps
                       for shadow in step.decision.log.get("shadow", ())]
            if result.passed and not verbose and not shadows:
                continue
            click.echo(f"{'PASS' if result.passed else 'FAIL'} {result.location}: "
                       f"{result.name}")
            for failure in result.failures:
                click.echo(f"  {failure}")
            for shadow in shadows:  # what a rule in audit or warn mode would have done
                click.echo(f"  {shadow['mode']}: {shadow['rule']} would give "
                           f"{shadow['error_class']}: {shadow['message']}")
        if report is not None:
            _print_coverage(report)
        click.echo(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    below = report is not None and fail_under is not None and report.percent < fail_under
    if below and output_format == "text":
        click.echo(f"coverage {report.percent:.1f}% is below --fail-under {fail_under:g}%"
                   if report else "", err=True)
    sys.exit(1 if failed or below else 0)


def _print_coverage(report: Any) -> None:
    click.echo("coverage:")
    for document, rules in report.rules.items():
        missing = sorted(name for name, hit in rules.items() if not hit)
        line = f"  {document}: {len(rules) - len(missing)}/{len(rules)} rules fired"
        click.echo(line + (f"; never fired: {', '.join(missing)}" if missing else ""))
    for label, items in (("routes", report.routes), ("error classes", report.error_classes)):
        missing = sorted(name for name, hit in items.items() if not hit)
        line = (f"  {report.routing_document}: {len(items) - len(missing)}/{len(items)} "
                f"{label} produced")
        click.echo(line + (f"; never produced: {', '.join(missing)}" if missing else ""))
    click.echo(f"  total: {report.percent:.1f}% ({report.covered}/{report.total})")


# receipts and review ---------------------------------------------------------------------

STORE_OPTION = click.option(
    "--store", "store_url", envvar="CALLGATE_STORE", default="sqlite:///callgate.sqlite3",
    show_default=True, help="Receipt store URL (sqlite:///path or postgresql://...); "
                            "also read from CALLGATE_STORE.")


@main.group()
def receipts() -> None:
    """The receipt store: purge old receipts, run migrations."""


@receipts.command("purge")
@STORE_OPTION
@click.option("--older-than", "older_than", default=None,
              help="A duration such as 720h or 30d (default: the RoutingTable's retention).")
@click.option("--policies", "policies_dir", default="policies", show_default=True)
@clear_errors
def receipts_purge(store_url: str, older_than: str | None, policies_dir: str) -> None:
    """Delete finished receipts and resolved reviews older than the retention."""
    from callgate_rules.documents.compiler import build_routing, compile_paths, parse_duration
    from callgate_rules.store import open_store

    if older_than is None:
        compilation = compile_paths([policies_dir]) if Path(policies_dir).exists() else None
        routing = compilation.config.routing if compilation and compilation.config \
            else build_routing({}, None)
        seconds = routing.retention_seconds
    else:
        text = older_than[:-1] + "h" if older_than.endswith("d") else older_than
        try:
            seconds = parse_duration(text) * (24 if older_than.endswith("d") else 1)
        except ValueError as error:
            raise InputError(f"--older-than: {error}") from None
    store = open_store(store_url)
    try:
        removed = store.purge(older_than=_utc_now() - timedelta(seconds=seconds))
    finally:
        store.close()
    click.echo(f"purged {removed} record(s) older than {seconds / 3600:g}h from "
               f"{store.url}")


@receipts.command("migrate")
@STORE_OPTION
@clear_errors
def receipts_migrate(store_url: str) -> None:
    """Create or upgrade the store's schema (stores also do this when they open)."""
    from callgate_rules.store import open_store

    store = open_store(store_url)
    migrate = getattr(store, "migrate", None)
    if callable(migrate):
        migrate()
    store.close()
    click.echo(f"{store.url}: schema is up to date")


@main.group()
def review() -> None:
    """The review queue: outcomes handed over to a person."""


@review.command("list")
@STORE_OPTION
@click.option("--all", "show_all", is_flag=True, help="Include resolved items.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@clear_errors
def review_list(store_url: str, show_all: bool, output_format: str) -> None:
    """List open (and taken) review items, oldest first."""
    from callgate_rules.store import ReviewStatus, open_store

    store = open_store(store_url)
    try:
        items = [i for i in store.list_reviews()
                 if show_all or i.status != ReviewStatus.RESOLVED]
    finally:
        store.close()
    if output_format == "json":
        click.echo(json.dumps([_review_dict(i) for i in items], indent=2, default=str))
        return
    if not items:
        click.echo("the review queue is empty")
        return
    for item in items:
        resolved = f" -> {item.resolution} by {item.resolved_by}" if item.resolution else ""
        click.echo(f"{item.review_id}  {item.status:<8} {item.reason:<18} "
                   f"{item.created_at:%Y-%m-%d %H:%M}  {item.summary}{resolved}")


@review.command("take")
@click.option("--by", "by", envvar="USER", default="reviewer", show_default=True)
@STORE_OPTION
@clear_errors
def review_take(by: str, store_url: str) -> None:
    """Take the oldest open item for yourself; two reviewers never get the same one."""
    from callgate_rules.store import open_store

    store = open_store(store_url)
    try:
        item = store.take_review(reviewer=by, now=_utc_now())
    finally:
        store.close()
    if item is None:
        click.echo("no open review item")
        return
    click.echo(f"{item.review_id} taken by {item.taken_by}: {item.reason}: {item.summary}")
    if item.payload:
        click.echo(json.dumps(dict(item.payload), indent=2, ensure_ascii=False, default=str))


@review.command("resolve")
@click.argument("review_id")
@click.option("--as", "resolution", type=click.Choice(["succeeded", "failed"]), required=True)
@click.option("--note", required=True, help="What the person found, for the record.")
@click.option("--by", "by", envvar="USER", default="reviewer", show_default=True)
@STORE_OPTION
@clear_errors
def review_resolve(review_id: str, resolution: str, note: str, by: str, store_url: str) -> None:
    """Close a review item; its receipt takes the state you give."""
    from callgate_rules.store import open_store

    store = open_store(store_url)
    try:
        item = store.resolve_review(review_id, resolution=resolution, note=note, by=by,
                                    now=_utc_now())
    finally:
        store.close()
    click.echo(f"{item.review_id} resolved as {item.resolution} by {item.resolved_by}")


def _review_dict(item: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return {k: (str(v) if isinstance(v, datetime) else v) for k, v in asdict(item).items()}


def _utc_now() -> datetime:
    from datetime import UTC

    return datetime.now(UTC)


# eval ---------------------------------------------------------------------------------------


@main.command("eval")
@click.argument("control_set", type=click.Path(path_type=Path))
@click.option("--contracts", "contracts_dir", default="contracts", show_default=True)
@click.option("--policies", "policies_dir", default="policies", show_default=True)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--fail-under", "fail_under", type=click.FloatRange(0, 100), default=None,
              help="Exit 1 when the share of correct actions is below this percentage.")
@clear_errors
def eval_command(control_set: Path, contracts_dir: str, policies_dir: str, output_format: str,
                 fail_under: float | None) -> None:
    """Score recorded model outputs against a control set's expected outcomes.

    Function choice, arguments and the gate's outcome are scored separately; wrong calls
    are counted by reason. Nothing is executed. Exits 0 whatever the figures (it is a
    measurement) unless --fail-under is given and the share of correct actions is below it.
    """
    from callgate_rules.harness.evaluation import evaluate, load_control_set, report_lines
    from callgate_rules.harness.scenarios import load_config_for

    requests = load_control_set(control_set)
    evaluation = evaluate(requests, load_config_for(contracts_dir, policies_dir))
    if output_format == "json":
        click.echo(json.dumps(evaluation.as_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        for line in report_lines(evaluation):
            click.echo(line)
    if fail_under is not None and evaluation.below(fail_under):
        click.echo(f"callgate: {evaluation.totals.correct_actions.percent:.1f}% correct "
                   f"actions is below --fail-under {fail_under:g}", err=True)
        sys.exit(1)


# export, catalog, fmt -----------------------------------------------------------------------


def _tool_format_names() -> list[str]:
    from callgate_rules.integrations.formats import TOOL_FORMATS

    return list(TOOL_FORMATS)


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


@main.command("export")
@click.option("--format", "tool_format", type=click.Choice(_tool_format_names()), required=True,
              help="The API whose tool definitions to write.")
@click.option("--contracts", "contracts_dir", default="contracts", show_default=True)
@click.option("--output", "output_file", type=click.Path(path_type=Path),
              help="Write the JSON to this file instead of stdout.")
@clear_errors
def export_command(tool_format: str, contracts_dir: str, output_file: Path | None) -> None:
    """Write the contracts as an API's tool list (JSON), so the two never drift apart.

    openai: Chat Completions tools; openai-responses: Responses API function tools;
    anthropic: Messages API tools, examples as input_examples; mcp: MCP Tool objects.
    A tool name or schema the API would reject is reported with its file (exit 2).
    """
    from callgate_rules.integrations.formats import tool_definitions

    config = load([contracts_dir])
    if not config.contracts:
        raise InputError(f"{contracts_dir}: no ToolContract documents to export")
    tools = tool_definitions(config, tool_format)
    _write_output(json.dumps(tools, indent=2, ensure_ascii=False) + "\n", output_file)


@main.command("catalog")
@click.option("--contracts", "contracts_dir", default="contracts", show_default=True)
@click.option("--policies", "policies_dir", default="policies", show_default=True)
@click.option("--format", "output_format", type=click.Choice(["markdown", "html"]),
              default="markdown", show_default=True)
@click.option("--output", "output_file", type=click.Path(path_type=Path),
              help="Write the catalogue to this file instead of stdout.")
@clear_errors
def catalog_command(contracts_dir: str, policies_dir: str, output_format: str,
                    output_file: Path | None) -> None:
    """Write the function catalogue for process owners (Markdown or one HTML page).

    Each tool with its owner, version, effect, confirmation, idempotency, timeout,
    arguments, look-ups, rules and their messages, the rights that apply, and an example.
    """
    from callgate_rules.authoring.catalog import RENDERERS, load_catalog

    catalog = load_catalog(contracts_dir, policies_dir)
    _write_output(RENDERERS[output_format](catalog), output_file)


@main.command("fmt")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--check", is_flag=True,
              help="Write nothing; list the files that would change and exit 1 if any would.")
@clear_errors
def fmt_command(paths: tuple[Path, ...], check: bool) -> None:
    """Lay out documents canonically: key order, indentation, CEL quoting; comments kept.

    PATHS default to `contracts policies`. Rewrites files in place and prints
    `path: reformatted` for each; with --check prints `path: would be reformatted` and
    writes nothing. Files without a callgate document are left alone.
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


if __name__ == "__main__":
    main()
