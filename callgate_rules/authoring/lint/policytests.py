"""PolicyTest documents that name a file that is not there: an actor, a world, a session or
a conversation (``spec`` and each case), relative to the test file as ``callgate test``
reads them. The compiler skips PolicyTests (they are not part of the gate), so without
this a typo in a path passes lint and stops ``callgate test`` instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.source import NodePath, SourceDocument

# The fields of a PolicyTest (its spec's defaults, and each case) that may name a file
FILE_FIELDS = ("actor", "world", "session", "conversation")
FILE_SUFFIXES = (".yaml", ".yml", ".json")


def check_test_files(compilation: Compilation) -> Iterator[Finding]:
    for source in compilation.sources:
        data = source.data
        if not isinstance(data, Mapping) or data.get("kind") != "PolicyTest":
            continue
        spec = data.get("spec")
        if not isinstance(spec, Mapping):
            continue
        yield from _missing_files(source, spec, ("spec",))
        cases = spec.get("cases")
        for index, case in enumerate(cases if isinstance(cases, list) else ()):
            if isinstance(case, Mapping):
                yield from _missing_files(source, case, ("spec", "cases", index))


def _missing_files(source: SourceDocument, holder: Mapping[str, object],
                   at: NodePath) -> Iterator[Finding]:
    folder = Path(source.path).parent
    for field in FILE_FIELDS:
        value = holder.get(field)
        if not isinstance(value, str) or not value.endswith(FILE_SUFFIXES):
            continue
        target = folder / value
        if target.is_file():
            continue
        why = "is a folder" if target.is_dir() else "is not there"
        yield Finding(source.locate((*at, field)), "error", "missing-test-file",
                      f"PolicyTest {field}: the file {value} {why} (looked for "
                      f"{os.path.normpath(target)}; a "
                      f"path is relative to the test file's folder, {folder})")
