"""The example projects ``callgate init --example NAME`` writes, and where their files are.

Each file has one copy in the repository: the support desk is the repository's own
``contracts/``, ``policies/`` and ``examples/`` (the README, the tests and the benchmarks use
it there), the banking example is ``examples/banking/``, the README's quickstart
``examples/quickstart/``, and the refunds example is
``callgate init``'s project template (``authoring/templates/project``). Building the wheel
copies the first two into the package as ``callgate_rules/examples/NAME/`` (``setup.py``
loads this module by its path, so it imports nothing but the standard library); an
installation from the source tree (``pip install -e .``) reads them where they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Where the wheel holds the example sets copied from the repository, inside the package
PACKAGED_FOLDER = "examples"
# What is never part of an example: caches and the stores a run leaves behind
SKIPPED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".sqlite3", ".sqlite3-journal", ".sqlite3-wal")


@dataclass(frozen=True)
class ExampleSet:
    """One example project: its name, what it shows, and where its files come from.

    ``sources`` maps a folder of the written project to a folder of the repository
    (``""`` is the project's top); ``excluded`` names repository folders left out (another
    example set's). ``template`` is set for the example that is ``callgate init``'s own
    project template, which the wheel holds anyway.
    """

    name: str
    summary: str
    checks: tuple[str, ...]  # the commands that pass in the written project, in order
    sources: dict[str, str] = field(default_factory=dict)
    excluded: tuple[str, ...] = ()
    template: bool = False


EXAMPLE_SETS: tuple[ExampleSet, ...] = (
    ExampleSet(
        name="support-desk",
        summary="The support desk the documentation uses: tickets, follow-ups, invoices, "
                "e-mail and payments; six tools, rights by tenant and team, confirmations, "
                "provenance and labels, budgets, and the scenario suite.",
        checks=("callgate lint", "callgate test", "callgate simulate",
                "callgate eval examples/control_set.yaml"),
        sources={"contracts": "contracts", "policies": "policies", "examples": "examples"},
        excluded=("examples/banking", "examples/quickstart"),
    ),
    ExampleSet(
        name="quickstart",
        summary="The README's first example: one contract (a refund), one policy, its "
                "policy tests, and host.py, a host application of twenty lines that runs "
                "as written.",
        checks=("callgate lint", "callgate test", "python host.py"),
        sources={"": "examples/quickstart"},
    ),
    ExampleSet(
        name="banking",
        summary="A bank account an assistant may act on: payees, payments under per-payment "
                "and daily limits over the run's history, mail and chat that cannot steer "
                "a payment (the AgentDojo banking suite's tools).",
        checks=("callgate lint", "callgate test", "callgate simulate"),
        sources={"": "examples/banking"},
    ),
    ExampleSet(
        name="refunds",
        summary="The project `callgate init` writes: a refund (a write) and an order look-up "
                "(a read), rights, a routing table, policy tests at 100% coverage and a "
                "scenario.",
        checks=("callgate lint", "callgate test --coverage --fail-under 100",
                "callgate simulate"),
        template=True,
    ),
)


def example_set(name: str) -> ExampleSet | None:
    return next((example for example in EXAMPLE_SETS if example.name == name), None)


def skipped(path: Path) -> bool:
    return bool(SKIPPED_NAMES.intersection(path.parts)) or path.name.endswith(SKIPPED_SUFFIXES)


def source_files(example: ExampleSet, repository: Path) -> Iterator[tuple[Path, Path]]:
    """Each file of ``example`` in the repository at ``repository``: (its path in the
    written project, its path in the repository), sorted by the first."""
    excluded = [repository / folder for folder in example.excluded]
    found: list[tuple[Path, Path]] = []
    for target, source in example.sources.items():
        root = repository / source
        for path in root.rglob("*"):
            if not path.is_file() or skipped(path.relative_to(repository)):
                continue
            if any(path.is_relative_to(folder) for folder in excluded):
                continue
            found.append((Path(target) / path.relative_to(root), path))
    yield from sorted(found)
