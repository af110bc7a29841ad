"""The commands that run the gate and execute nothing for real: ``check`` one call,
``simulate`` scenario suites, ``test`` PolicyTest cases, ``eval`` a control set.

Each command reads its inputs, calls the library once and prints what came back; the
printing is in the ``_print_*`` functions below each command.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from callgate_rules.cli.paths import default_scenarios, document_paths, sort_paths
from callgate_rules.cli.progress import progress
from callgate_rules.decision_log import open_decision_log
from callgate_rules.documents.source import read_data_file, read_text
from callgate_rules.errors import InputError
from callgate_rules.harness.world import WorldResolvers, check_world
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.gate import Gate

if TYPE_CHECKING:
    from callgate_rules.harness.policytest import Coverage
    from callgate_rules.harness.scenarios import ScenarioResult

TEXT_OR_JSON_OPTION = click.option("--format", "output_format",
                                   type=click.Choice(["text", "json"]), default="text",
                                   show_default=True)


# check ------------------------------------------------------------------------------------


INPUT_FILE = click.Path(exists=True, dir_okay=False, allow_dash=True)
NOT_EXECUTED = 1  # `callgate check`: the gate would not execute the call


@click.command()
@document_paths
@click.option("--call", "call_file", required=True, type=INPUT_FILE,
              help="The model's output: OpenAI, Anthropic or plain call JSON (- for stdin).")
@click.option("--actor", "actor_file", required=True, type=INPUT_FILE,
              help="The actor, as the host knows them (YAML or JSON).")
@click.option("--world", "world_file", type=INPUT_FILE,
              help="Records for the look-ups: collection → list.")
@click.option("--now", "now_text", help="The time of the decision, RFC 3339 (default: now).")
@click.option("--session", "session_file", type=INPUT_FILE,
              help="Facts about the session (YAML or JSON).")
@click.option("--conversation", "conversation_file", type=INPUT_FILE,
              help="The messages that led to the call (OpenAI or Anthropic format), to work "
                   "out where each argument value came from.")
@TEXT_OR_JSON_OPTION
@click.option("--explain", is_flag=True,
              help="Show each step and each rule evaluated, the records each look-up found "
                   "and which of them it kept, and each argument's sources.")
def check(
    paths: tuple[Path, ...],
    contracts_dir: Path | None,
    policies_dir: Path | None,
    call_file: str,
    actor_file: str,
    world_file: str | None,
    now_text: str | None,
    session_file: str | None,
    conversation_file: str | None,
    output_format: str,
    explain: bool,
) -> None:
    """Decide about one proposed call (steps 1–4; nothing is executed).

    PATHS are folders or files of documents (default: contracts policies). Prints the
    route, the error class, the rule and the messages; --explain adds the trace.

    \b
    Exit codes:
      0 the gate would execute the call (route execute)
      1 it would not: refused, sent back to the model, to the user, or to a person for
        confirmation or review (the route printed says which)
      2 bad input: a file that cannot be read, documents with errors, a bad option
    """
    from callgate_rules.documents.compiler import load

    documents = sort_paths("check", paths, contracts_dir, policies_dir).documents
    now = _parse_now(now_text)
    model_output = _read_call(call_file)
    actor = _read_mapping(actor_file, "the actor", "{id: U-7, tenant: acme, role: agent}")
    world = (check_world(read_data_file(world_file, "the world"), world_file) if world_file
        else {})
    config = load(documents)
    session = (_read_mapping(session_file, "the session", "{authenticated: true}")
        if session_file else None)
    conversation = (read_data_file(conversation_file, "the conversation")
        if conversation_file else None)
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
    else:
        _print_decision(decision, explain)
    sys.exit(0 if decision.route == "execute" else NOT_EXECUTED)


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
        text = sys.stdin.read() if path == "-" else read_text(Path(path), "the call")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read the call: {error}") from None
    if text.lstrip().startswith(("{", "[")) or path.endswith(".json") or path == "-":
        return text
    return read_data_file(path, "the call")


def _read_mapping(path: str, what: str, example: str) -> dict[str, Any]:
    value = read_data_file(path, what)
    if not isinstance(value, dict):
        raise InputError(f"{path}: {what} must be a mapping such as {example}")
    return value


def _print_decision(decision: Decision, explain: bool) -> None:
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


# simulate ---------------------------------------------------------------------------------


@click.command()
@document_paths
@click.option("--scenarios", "scenario_paths", multiple=True,
              type=click.Path(exists=True, path_type=Path),
              help="A scenario file or folder (repeatable), besides those among the PATHS "
                   "[default: examples/scenarios, else scenarios].")
@click.option("--store", "store_url", default=None,
              help="Receipt store URL shared by all scenarios (default: a fresh SQLite file "
                   "per scenario in a temporary directory).")
@click.option("--decision-log", "decision_log_path", type=click.Path(path_type=Path),
              default=None, help="Write every decision's log line to this file (JSON lines, "
                                 "appended), e.g. for `callgate replay`.")
@TEXT_OR_JSON_OPTION
def simulate(paths: tuple[Path, ...], contracts_dir: Path | None, policies_dir: Path | None,
             scenario_paths: tuple[Path, ...], store_url: str | None,
             decision_log_path: Path | None, output_format: str) -> None:
    """Run scenario suites against the simulator.

    PATHS are folders or files (default: contracts policies); the YAML files among them
    without a `kind` are scenarios, so `callgate simulate examples/banking` runs a folder
    that holds documents and scenarios. Scenarios also come from --scenarios, and when
    neither names any, from examples/scenarios (else scenarios/). Each scenario scripts the
    model's outputs, injects the destination's faults and expects routes, error classes,
    messages and the number of writes.

    \b
    Exit codes:
      0 every expectation held
      1 an expectation failed
      2 bad input: a file that cannot be read, documents with errors, a bad option
    """
    from callgate_rules.documents.compiler import load
    from callgate_rules.harness.scenarios import load_scenarios, run_scenarios

    inputs = sort_paths("simulate", paths, contracts_dir, policies_dir, scenarios=True)
    config = load(inputs.documents)
    named = [*inputs.scenarios, *scenario_paths]
    scenarios = load_scenarios(named or default_scenarios())
    if not scenarios:
        raise InputError("no scenarios found; pass scenario files or directories")
    log = open_decision_log(decision_log_path)
    try:
        with progress(len(scenarios), "simulating", output_format) as advanced:
            results = run_scenarios(scenarios, config, store_url, decision_log=log,
                                    advanced=advanced)
    finally:
        if log is not None:
            log.close()
    if output_format == "json":
        click.echo(json.dumps([r.as_dict() for r in results], indent=2, ensure_ascii=False,
                              default=str))
    else:
        _print_scenarios(results)
    sys.exit(0 if all(r.passed for r in results) else 1)


def _print_scenarios(results: list[ScenarioResult]) -> None:
    width = max(len(r.name) for r in results)
    click.echo(f"{'SCENARIO':<{width}}  {'ROUTE':<18} {'ERROR CLASS':<22} WRITES  RESULT")
    for r in results:
        last = r.last
        route = str(last.route) if last else "-"
        error_class = str(last.error_class) if last and last.error_class else "-"
        verdict = "pass" if r.passed else "FAIL"
        click.echo(f"{r.name:<{width}}  {route:<18} {error_class:<22} {r.writes:>6}  "
                   f"{verdict}")
    failed = [r for r in results if not r.passed]
    for r in failed:
        click.echo(f"\n{r.location}: {r.name}")
        for failure in r.failures:
            click.echo(f"  {failure}")
    click.echo(f"\n{len(results) - len(failed)} passed, {len(failed)} failed")


# test ---------------------------------------------------------------------------------------


@click.command("test")
@document_paths
@click.option("--coverage", "show_coverage", is_flag=True,
              help="Report the rules, routes and error classes no case exercised.")
@click.option("--fail-under", "fail_under", type=click.FloatRange(0, 100), default=None,
              help="Exit 1 when coverage is below this percentage (implies --coverage).")
@TEXT_OR_JSON_OPTION
@click.option("-v", "--verbose", is_flag=True, help="List passing cases too.")
def test_command(paths: tuple[Path, ...], contracts_dir: Path | None,
                 policies_dir: Path | None, show_coverage: bool, fail_under: float | None,
                 output_format: str, verbose: bool) -> None:
    """Run PolicyTest cases against the documents.

    PATHS are folders or files (default: contracts policies). PolicyTest documents live
    beside the others (policies/tests/) and are found there; PATHS that name only test
    files run those against contracts/ and policies/. Prints every failing case with its
    file:line and expected against actual, field by field, then `N passed, N failed`.

    \b
    Exit codes:
      0 every case passed (and coverage is at least --fail-under)
      1 a case failed, or coverage is below --fail-under
      2 bad input: a file that cannot be read, documents with errors, a bad option
    """
    from callgate_rules.documents.compiler import load
    from callgate_rules.harness.policytest import coverage, load_tests
    from callgate_rules.harness.scenarios import run_scenarios

    inputs = sort_paths("test", paths, contracts_dir, policies_dir)
    config = load(inputs.documents)
    cases = load_tests(inputs.tests if inputs.named_tests else inputs.documents)
    if not cases:
        raise InputError("no PolicyTest cases found; see `callgate test --help` and the README")
    with progress(len(cases), "testing", output_format) as advanced:
        results = run_scenarios(cases, config, advanced=advanced)
    failed = [r for r in results if not r.passed]
    report = coverage(config, results) if show_coverage or fail_under is not None else None
    if output_format == "json":
        click.echo(json.dumps({"passed": len(results) - len(failed), "failed": len(failed),
                               "cases": [r.as_dict() for r in results],
                               "coverage": report.as_dict() if report else None},
                              indent=2, ensure_ascii=False, default=str))
    else:
        _print_cases(results, verbose)
        if report is not None:
            _print_coverage(report)
        click.echo(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    below = report is not None and fail_under is not None and report.percent < fail_under
    if below and output_format == "text":
        click.echo(f"coverage {report.percent:.1f}% is below --fail-under {fail_under:g}%"
                   if report else "", err=True)
    sys.exit(1 if failed or below else 0)


def _print_cases(results: list[ScenarioResult], verbose: bool) -> None:
    """Each failing case, and each case a rule in audit or warn mode would have refused."""
    for result in results:
        shadows = [shadow for step in result.steps
                   for shadow in step.decision.log.get("shadow", ())]
        if result.passed and not verbose and not shadows:
            continue
        click.echo(f"{'PASS' if result.passed else 'FAIL'} {result.location}: "
                   f"{result.name}")
        for failure in result.failures:
            click.echo(f"  {failure}")
        for shadow in shadows:
            click.echo(f"  {shadow['mode']}: {shadow['rule']} would give "
                       f"{shadow['error_class']}: {shadow['message']}")


def _print_coverage(report: Coverage) -> None:
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
    if report.left_out:
        click.echo("  not counted, no case can produce them with these documents:")
        for item, why in sorted(report.left_out.items()):
            click.echo(f"    {item}: {why}")
    click.echo(f"  total: {report.percent:.1f}% ({report.covered}/{report.total})")


# eval ---------------------------------------------------------------------------------------


@click.command("eval")
@click.argument("control_set", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@document_paths
@TEXT_OR_JSON_OPTION
@click.option("--fail-under", "fail_under", type=click.FloatRange(0, 100), default=None,
              help="Exit 1 when the share of correct actions is below this percentage.")
def eval_command(control_set: Path, paths: tuple[Path, ...], contracts_dir: Path | None,
                 policies_dir: Path | None, output_format: str,
                 fail_under: float | None) -> None:
    """Score a control set's recorded model outputs against its expected outcomes.

    CONTROL_SET is the file of requests; PATHS are folders or files of documents
    (default: contracts policies). Function choice, arguments and the gate's outcome are
    scored separately; wrong calls are counted by reason. Nothing is executed.

    \b
    Exit codes:
      0 scored (whatever the figures: it is a measurement)
      1 the share of correct actions is below --fail-under
      2 bad input: a file that cannot be read, documents with errors, a bad option
    """
    from callgate_rules.documents.compiler import load
    from callgate_rules.harness.control_set import load_control_set
    from callgate_rules.harness.evaluation import evaluate, report_lines

    requests = load_control_set(control_set)
    config = load(sort_paths("eval", paths, contracts_dir, policies_dir).documents)
    with progress(len(requests.requests), "evaluating", output_format) as advanced:
        evaluation = evaluate(requests, config, advanced=advanced)
    if output_format == "json":
        click.echo(json.dumps(evaluation.as_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        for line in report_lines(evaluation):
            click.echo(line)
    if fail_under is not None and evaluation.below(fail_under):
        click.echo(f"callgate: {evaluation.totals.correct_actions.percent:.1f}% correct "
                   f"actions is below --fail-under {fail_under:g}", err=True)
        sys.exit(1)


COMMANDS = (check, simulate, test_command, eval_command)
