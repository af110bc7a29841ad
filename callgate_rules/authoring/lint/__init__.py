"""``callgate lint``: everything the compiler rejects, plus what it cannot see on its own.

Each check is one small function that yields findings, driven by the ``CHECKS`` table
(like jsonschema's keyword table): adding a check is adding a function and a row. The
checks live by what they look at:

- ``expressions``: what the CEL reads (variables, optional fields, placeholders);
- ``typecheck``: every expression type-checked (``cel.checker``) against what each
  variable holds where it runs;
- ``cost``: every expression's worst-case cost (``cel.cost``) held to the limit;
- ``rules``: rules that can never decide anything;
- ``disclosure``: what a refusal may reveal;
- ``declarations``: routes, examples and idempotency as the documents declare them;
- ``strict``: YAML that parses into something the author did not mean, variables whose
  fields no schema declares;
- ``cascade``: what a document that did not compile may have defined, so the checks do not
  report its consequences in healthy files;
- ``assertions``: PolicyAssertion documents ``callgate analyze`` could not read;

``report`` renders the findings (text, JSON, GitHub annotations, SARIF) and ``places``
finds where in a source a compiled rule's field is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from callgate_rules.authoring.lint.assertions import check_assertion_documents
from callgate_rules.authoring.lint.cascade import broken
from callgate_rules.authoring.lint.cost import check_cost
from callgate_rules.authoring.lint.declarations import (
    check_examples,
    check_routes,
    check_unknown_outcomes,
)
from callgate_rules.authoring.lint.disclosure import (
    check_disclosure,
    check_forbidden_routes,
    check_unnarrowed_lookups,
)
from callgate_rules.authoring.lint.expressions import (
    check_message_fields,
    check_variables,
)
from callgate_rules.authoring.lint.placeholders import check_placeholder_fields
from callgate_rules.authoring.lint.policytests import check_test_files
from callgate_rules.authoring.lint.report import (
    CODE_DESCRIPTIONS,
    FORMATS,
    github_annotation,
    render,
    sarif_log,
)
from callgate_rules.authoring.lint.rules import (
    check_access_coverage,
    check_allows_always_denied,
    check_constant_rules,
    check_shadowed_rules,
    constant_value,
    normalized_cel,
)
from callgate_rules.authoring.lint.sequences import check_sequences
from callgate_rules.authoring.lint.strict import (
    check_undeclared_schemas,
    check_yaml_traps,
    explained_by_traps,
)
from callgate_rules.authoring.lint.typecheck import check_types
from callgate_rules.authoring.versioning import version_findings
from callgate_rules.documents.compiler import Compilation, Finding, compile_paths
from callgate_rules.documents.snapshot import (
    LINT_FINDINGS,
    read_configuration,
    remember_findings,
    remembered_findings,
)

__all__ = [
    "CHECKS", "CODE_DESCRIPTIONS", "FORMATS", "constant_value", "github_annotation", "lint",
    "normalized_cel", "render", "sarif_log",
]


CHECKS: tuple[Callable[[Compilation], Iterable[Finding]], ...] = (
    check_yaml_traps,
    check_variables,
    check_types,
    check_cost,
    check_routes,
    check_examples,
    check_disclosure,
    check_access_coverage,
    check_message_fields,
    check_placeholder_fields,
    check_test_files,
    check_assertion_documents,
    check_constant_rules,
    check_shadowed_rules,
    check_allows_always_denied,
    check_unknown_outcomes,
    check_forbidden_routes,
    check_unnarrowed_lookups,
    check_undeclared_schemas,
    check_sequences,
)


def lint(
    paths: Iterable[str | Path],
    *,
    since: str | None = None,
    allow_removed: Iterable[str] = (),
    notes: bool = False,
    advanced: Callable[[int], None] | None = None,
) -> list[Finding]:
    """Every finding for the documents under ``paths``; with ``since`` (a git revision), also
    the documents that changed since then without raising ``metadata.version``. Severities:
    ``error`` (fails on every call it reaches, or the documents do not load), ``warning``
    (almost surely not what was meant) and, with ``notes``, ``note`` (a suggestion, such as
    declaring a schema). ``advanced(1)`` is called after each file is compiled and after
    each check (a progress bar of ``len(files) + len(CHECKS)``)."""
    paths = list(paths)
    # The findings are a function of the files and of callgate's code, both in the key:
    # unchanged files are not compiled or checked again (``documents.snapshot``).
    configuration = read_configuration(Path(path) for path in paths)
    key = configuration.key(LINT_FINDINGS)
    findings = remembered_findings(key)
    if findings is not None and since is None:
        if advanced is not None:
            advanced(len(configuration.files) + len(CHECKS))
    else:
        compilation = compile_paths(paths, advanced=advanced)
        if findings is None:
            findings = _checked(compilation, advanced)
            remember_findings(key, findings)
        elif advanced is not None:
            advanced(len(CHECKS))
        if since is not None:
            findings.extend(version_findings(paths, since, allow_removed=allow_removed,
                                             current=compilation.sources))
    if not notes:
        findings = [f for f in findings if f.severity != "note"]
    return sorted(set(findings), key=lambda f: (f.location.path, f.location.line,
                                                 f.location.column, f.code))


def _checked(compilation: Compilation, advanced: Callable[[int], None] | None) -> list[Finding]:
    """Every check's findings, and the compiler's that no broken document explains."""
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(compilation))
        if advanced is not None:
            advanced(1)
    cascade = broken(compilation)
    findings += explained_by_traps(
        [f for f in compilation.findings if not cascade.explains(f)], findings)
    return findings
