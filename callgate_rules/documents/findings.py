"""What the compiler tells an author: findings at an exact place, in the author's words.

A ``Finding`` is one thing to fix (error) or look at (warning) at a file, line and column;
``lint`` and ``ConfigError`` print it as ``file:line:column: severity code message``. The
JSON Schema errors of a document are said here as a person reads the YAML: the dotted path
of the field, the unknown key and the keys allowed there, the value and the values allowed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import ValidationError

from callgate_rules.documents.source import NodePath
from callgate_rules.documents.yaml_errors import boolean_hint
from callgate_rules.errors import Location


@dataclass(frozen=True)
class Finding:
    """One thing a person should fix (error) or look at (warning), at an exact place."""

    location: Location
    severity: str  # "error" or "warning"
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.severity} {self.code} {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.location.path,
            "line": self.location.line,
            "column": self.location.column,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }


def schema_error_messages(error: ValidationError,
                          written: Callable[[NodePath], str | None] | None = None
                          ) -> Iterator[tuple[NodePath, str]]:
    """Where in the document, and what to say, for one JSON Schema error: an unknown field
    once per key, at the key; a disallowed value with the values allowed; of alternatives,
    the one closest to what was written; a boolean where a text was expected with why
    (``written``: the word as written at a path, e.g. an unquoted ``no``)."""
    path: NodePath = tuple(error.absolute_path)
    where = dotted(path) or "document"
    expected = error.validator_value
    if error.validator == "type" and isinstance(error.instance, bool) and (
            expected == "string" or isinstance(expected, list) and "string" in expected):
        word = written(path) if written is not None else None
        yield path, f"{where}: {error.message}{boolean_hint(error.instance, word)}"
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        allowed = set(schema.get("properties", {}))
        for key in sorted(set(error.instance) - allowed):
            known = ", ".join(sorted(allowed))
            yield ((*path, key, "<key>"),
                   f"{dotted((*path, key))}: unknown field {key!r}; allowed here: {known}")
    elif error.validator == "enum":
        allowed_values = error.validator_value
        options = (", ".join(map(str, allowed_values))
            if isinstance(allowed_values, list) else str(allowed_values))
        yield path, f"{where}: {error.instance!r} is not allowed; use one of: {options}"
    elif error.validator in ("oneOf", "anyOf") and error.context:
        best = min(error.context, key=lambda e: len(e.message))
        yield path, f"{where}: {best.message}"
    else:
        yield path, f"{where}: {error.message}"


def finding_from_input_error(text: str, path: str) -> Finding:
    """A YAML reading error (``InputError``'s text) as a finding at its line and column."""
    match = re.match(r"^(.*?):(\d+):(\d+): error YAML (.*)$", text)
    if match:
        return Finding(
            Location(match[1], int(match[2]), int(match[3])), "error", "yaml", match[4]
        )
    return Finding(Location(path), "error", "yaml", text.split(": ", 1)[-1])


def dotted(path: Iterable[str | int]) -> str:
    """("spec", "rules", 2, "when") → ``spec.rules[2].when``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part != "<key>":
            text += f".{part}" if text else str(part)
    return text
