"""The one way every command names its documents: positional ``PATHS``, folders or files.

``lint``, ``fmt``, ``serve``, ``gateway`` and ``replay`` always took them so; ``check``,
``test``, ``simulate``, ``eval``, ``catalog`` and ``export`` took ``--contracts`` and
``--policies``, which stay for one release as hidden options that say so on stderr. What
else a command reads is found among the PATHS by what the files hold: PolicyTest documents
(``test``), and, for ``simulate``, YAML files without a ``kind`` (scenarios) — so
``callgate simulate examples/banking`` runs the banking documents against the banking
scenarios. Without PATHS the documents are ``contracts/`` and ``policies/`` here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from callgate_rules.documents.source import YAML_SUFFIXES, iter_yaml_files, read_text
from callgate_rules.errors import InputError

DEFAULT_DOCUMENTS = ("contracts", "policies")
# Where `callgate simulate` looks for scenarios when no PATHS or --scenarios name any: the
# layout `callgate init` writes, then the one an example with scenarios/ beside its
# documents has (`callgate init --example banking`).
DEFAULT_SCENARIOS = ("examples/scenarios", "scenarios")
# A document's kind at the start of a line (block style, as fmt writes every document)
_KIND = re.compile(r"^kind\s*:\s*[\"']?([A-Za-z]+)", re.MULTILINE)

F = TypeVar("F", bound=Callable[..., Any])


def document_paths(function: F) -> F:
    """PATHS (existing folders or files) and the hidden --contracts/--policies of old."""
    function = click.option("--policies", "policies_dir", default=None, hidden=True,
                            type=click.Path(path_type=Path))(function)
    function = click.option("--contracts", "contracts_dir", default=None, hidden=True,
                            type=click.Path(path_type=Path))(function)
    return click.argument("paths", nargs=-1,
                          type=click.Path(exists=True, path_type=Path))(function)


@dataclass
class Inputs:
    """What a command's PATHS (and old options) name, sorted by what the files hold."""

    documents: list[Path] = field(default_factory=list)  # what the compiler reads
    tests: list[Path] = field(default_factory=list)  # where PolicyTest documents are
    scenarios: list[Path] = field(default_factory=list)  # YAML files without a kind
    named_tests: bool = False  # PATHS named test files or folders


def sort_paths(command: str, paths: Sequence[Path], contracts: Path | None,
               policies: Path | None, *, scenarios: bool = False,
               defaults: Sequence[str] = DEFAULT_DOCUMENTS) -> Inputs:
    """The documents, tests and (with ``scenarios``) scenario files among ``paths``; the
    documents default to ``defaults`` when ``paths`` name none. A YAML file without a
    ``kind`` is a scenario for ``simulate``; for the other commands it is left out of a
    folder (an actor, a world) and, named on its own, handed to the compiler, which says
    what is wrong with it."""
    inputs = Inputs()
    if contracts is not None or policies is not None:
        _deprecated(command, contracts, policies)
        for option, given, default in (("--contracts", contracts, "contracts"),
                                       ("--policies", policies, "policies")):
            if given is not None and not given.exists():
                raise InputError(f"{option} {given}: no such file or directory")
            path = given if given is not None else Path(default)
            if path.exists():
                inputs.documents.append(path)
    for path in paths:
        files = [path] if path.is_file() else list(iter_yaml_files([path]))
        kinds = {file: _kinds(file) for file in files}
        # without a kind: a scenario for simulate; in a folder, for the other commands, data
        # beside the documents (actors, a world); named alone, the compiler says what it is
        unkinded = [file for file in files if not kinds[file]]
        if scenarios:
            inputs.scenarios.extend(unkinded)
        elif path.is_file():
            unkinded = []
        documents = [file for file in files if file not in unkinded
                     and kinds[file] != {"PolicyTest"}]
        tests = [file for file in files if "PolicyTest" in kinds[file]]
        # a folder that holds only documents and tests is handed on whole, as given
        whole = path.is_dir() and not unkinded
        if documents:
            inputs.documents.extend([path] if whole else documents)
        if tests:
            inputs.tests.extend([path] if whole else tests)
            inputs.named_tests = True
    if not inputs.documents:
        inputs.documents = [Path(name) for name in defaults if Path(name).exists()]
        if not inputs.documents:
            raise InputError(f"no {'/ or '.join(defaults)}/ here; pass the folders or files of "
                             f"your documents: callgate {command} PATH...")
    return inputs


def default_scenarios() -> list[Path]:
    for name in DEFAULT_SCENARIOS:
        if Path(name).is_dir():
            return [Path(name)]
    raise InputError(f"no scenarios found: none among the PATHS and no "
                     f"{' or '.join(DEFAULT_SCENARIOS)} here; pass scenario files or folders "
                     "with --scenarios")


def _kinds(file: Path) -> set[str]:
    if file.suffix not in YAML_SUFFIXES:
        return set()
    return set(_KIND.findall(read_text(file)))


def _deprecated(command: str, contracts: Path | None, policies: Path | None) -> None:
    given = " ".join(f"{option} {path}" for option, path in (("--contracts", contracts),
                                                             ("--policies", policies)) if path)
    paths = " ".join(str(path if path is not None else default) for path, default in
                     ((contracts, "contracts"), (policies, "policies")))
    click.echo(f"callgate: {given} is deprecated and goes in the next release; name the "
               f"documents as PATHS: callgate {command} {paths}", err=True)
