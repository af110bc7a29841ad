"""``callgate lint``: everything the compiler rejects, plus what it cannot see on its own.

Each check is one small function that yields findings, driven by the ``CHECKS`` table
(like jsonschema's keyword table): adding a check is adding a function and a row. The
checks live by what they look at:

- ``expressions``: what the CEL reads (variables, fields, placeholders);
- ``rules``: rules that can never decide anything;
- ``disclosure``: what a refusal may reveal;
- ``declarations``: routes, examples and idempotency as the documents declare them;

``report`` renders the findings (text, JSON, GitHub annotations, SARIF) and ``places``
finds where in a source a compiled rule's field is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

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
    check_fields,
    check_message_fields,
    check_variables,
)
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
from callgate_rules.authoring.versioning import version_findings
from callgate_rules.documents.compiler import Compilation, Finding, compile_paths

__all__ = [
    "CHECKS", "CODE_DESCRIPTIONS", "FORMATS", "constant_value", "github_annotation", "lint",
    "normalized_cel", "render", "sarif_log",
]


CHECKS: tuple[Callable[[Compilation], Iterable[Finding]], ...] = (
    check_variables,
    check_fields,
    check_routes,
    check_examples,
    check_disclosure,
    check_access_coverage,
    check_message_fields,
    check_constant_rules,
    check_shadowed_rules,
    check_allows_always_denied,
    check_unknown_outcomes,
    check_forbidden_routes,
    check_unnarrowed_lookups,
)


def lint(
    paths: Iterable[str | Path],
    *,
    since: str | None = None,
    allow_removed: Iterable[str] = (),
) -> list[Finding]:
    """Every finding for the documents under ``paths``; with ``since`` (a git revision), also
    the documents that changed since then without raising ``metadata.version``."""
    paths = list(paths)
    compilation = compile_paths(paths)
    findings = list(compilation.findings)
    for check in CHECKS:
        findings.extend(check(compilation))
    if since is not None:
        findings.extend(version_findings(paths, since, allow_removed=allow_removed,
                                         current=compilation.sources))
    return sorted(set(findings), key=lambda f: (f.location.path, f.location.line,
                                                 f.location.column, f.code))
