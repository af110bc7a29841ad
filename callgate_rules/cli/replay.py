"""``callgate replay DECISION_LOG [PATH...]``: what a changed configuration would have
decided about the logged calls (``harness.replay``). Nothing is executed."""

from __future__ import annotations

import json
from pathlib import Path

import click

from callgate_rules.cli.bundle import bundle_options
from callgate_rules.cli.progress import progress
from callgate_rules.documents.compiler import load
from callgate_rules.errors import InputError
from callgate_rules.harness.replay import read_log, replay


@click.command("replay")
@click.argument("decision_log", type=click.Path(path_type=Path))
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@bundle_options(uses="Replay against", unsigned="its files still checked against its "
                "manifest")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]),
              default="text", show_default=True)
def replay_command(decision_log: Path, paths: tuple[Path, ...], bundle_location: str | None,
                   public_key_file: Path | None, allow_unsigned_bundle: bool,
                   output_format: str) -> None:
    """Decide every call of DECISION_LOG again against the documents under PATH...
    (default: contracts and policies), or of --bundle, with the inputs recorded at the time.

    Prints the decisions that would change, grouped by route before → after with the rule
    responsible, the lines it cannot decide again (and why), and totals; --format json
    prints them as a list. Against a --bundle, the lines whose decision another bundle
    made (their `bundle` digest differs) are named too, and decided again all the same.
    The same log and documents give byte-identical output.

    \b
    Exit codes:
      0 replayed (whatever would change: it is a report)
      2 bad input: a log or folder that is not there, documents with errors, a bundle
        that is unsigned, tampered or signed by another key
    """
    from callgate_rules.cli.bundle import verified_bundle

    bundle = verified_bundle(bundle_location, public_key_file, allow_unsigned_bundle, None,
                             paths)
    documents = () if bundle else paths or (Path("contracts"), Path("policies"))
    for path in documents:
        if not path.exists():
            raise InputError(f"{path}: no such file or directory; pass the documents to "
                             "replay against, e.g. callgate replay decisions.jsonl contracts "
                             "policies")
    if not decision_log.is_file():
        raise InputError(f"{decision_log}: no such decision log (a file of JSON lines, "
                         "written by DecisionLog)")
    config = bundle.compile() if bundle else load(documents)
    with decision_log.open(encoding="utf-8") as stream:
        length = sum(1 for text in stream if text.strip())
    with progress(length, "replaying", output_format) as advanced:
        found = replay(read_log(decision_log), config, advanced=advanced,
                       bundle=bundle.digest if bundle else None)
    if output_format == "json":
        click.echo(json.dumps(found.as_list(), indent=2, ensure_ascii=False, sort_keys=True))
    else:
        for line in found.lines_of_text():
            click.echo(line)


COMMANDS = (replay_command,)
