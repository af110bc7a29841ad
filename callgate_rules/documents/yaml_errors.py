"""YAML mistakes said in plain words, with what to do about them.

PyYAML names its own machinery ("expected <block end>, but found '<block mapping
start>'", "found character '\\t' that cannot start any token"); a process owner editing a
policy needs to hear which line is wrong, why, and how to fix it. ``explain`` turns a
``MarkedYAMLError`` into that sentence (the caller adds ``file:line:column``), and
``boolean_hint`` tells why a schema saw ``false`` where a text was expected: YAML 1.1 reads
an unquoted ``no``, ``yes``, ``on`` or ``off`` as a boolean.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import yaml

# what PyYAML's YAML 1.1 resolver reads as a boolean when unquoted
YAML11_BOOLEANS = frozenset({"yes", "no", "on", "off", "true", "false"})
_WORD = re.compile(r"[A-Za-z]+")


def _line(mark: yaml.Mark | None) -> int:
    return mark.line + 1 if mark is not None else 0


def _text_of(lines: Sequence[str], number: int) -> str:
    return lines[number - 1] if 0 < number <= len(lines) else ""


def place(error: yaml.MarkedYAMLError) -> yaml.Mark | None:
    """Where to point for ``error``: where the mistake is written, which for a key without
    its ':' or a quote never closed is where it began, not where PyYAML gave up."""
    if error.context_mark is not None and (
            error.problem == "could not find expected ':'" or
            (error.problem == "found unexpected end of stream"
             and "quoted scalar" in (error.context or ""))):
        return error.context_mark
    return error.problem_mark or error.context_mark


def explain(error: yaml.MarkedYAMLError, lines: Sequence[str]) -> str:
    """``error`` in plain words and a hint; PyYAML's own wording for what is not listed."""
    problem = error.problem or error.context or str(error)
    context = error.context or ""
    at = error.problem_mark
    line = _line(at)
    started = _line(error.context_mark)
    if "cannot start any token" in problem and "\\t" in problem:
        text = _text_of(lines, line)
        column = at.column if at is not None else 0
        if not text[:column].strip():
            return (f"line {line} is indented with a tab; YAML indents with spaces: replace "
                    "the tab with spaces (as many as the lines around it use)")
        return (f"line {line} has a tab where YAML expects a value; use spaces, or put "
                "the value in quotes")
    if problem.startswith("expected <block end>, but found"):
        found = problem.split("but found", 1)[1].strip()
        if found == "'-'":
            return (f"line {line} starts a list item ('- ') among the keys of the mapping "
                    f"that starts at line {started}: a mapping holds keys, not items. Give "
                    "the list a key of its own (items:, then the '- ' lines indented under "
                    "it), or indent the item under the key it belongs to")
        return (f"line {line} is not in line with the keys before it (the mapping that "
                f"starts at line {started}): the keys of one mapping start in the same "
                "column. Indent it like the key it follows, with spaces, or, if it belongs "
                "to the key above, indent it further and end that key with ':'")
    if problem == "mapping values are not allowed here":
        return (f"line {line} has a ':' followed by a space inside a value (or is "
                "indented further than the key it follows). Put the value in quotes "
                "(\"a: b\") if the colon is part of the text, or indent the line like the "
                "key above it")
    if problem == "could not find expected ':'":
        return (f"line {started or line} holds a key without a ':' (or a text that runs "
                "onto a line of its own). Write 'key: value', or put a text of several "
                "lines in quotes or after '>-'")
    if problem.startswith("did not find expected key"):
        return (f"line {line} does not continue the mapping that starts at line {started}: "
                "check that it is indented with spaces to the column of the keys above, "
                "and quote a value that begins with one of * & ! | > % @ ` [ {")
    if problem.startswith("did not find expected '-' indicator"):
        return (f"line {line} does not continue the list that starts at line {started}: "
                "each item starts with '- ' in the same column")
    if problem == "found unexpected end of stream" and "quoted scalar" in context:
        return (f"the quoted value that opens at line {started} is never closed: add the "
                "closing quote")
    if problem.startswith("found undefined alias"):
        name = problem.rsplit(" ", 1)[-1].strip("'")
        return (f"*{name} refers to no anchor: an alias (*name) needs an anchor (&name) "
                "before it, or quote the text if the '*' is part of it")
    return problem


def boolean_hint(value: object, written: str | None) -> str:
    """Why a boolean arrived where a text was expected, and how to keep the text: the hint
    for a value YAML read as ``true``/``false`` from an unquoted word; ``""`` otherwise."""
    if not isinstance(value, bool):
        return ""
    if written is not None and written.lower() not in YAML11_BOOLEANS:
        return ""
    words = written or ("yes (or on)" if value else "no (or off)")
    example = written or ("yes" if value else "no")
    return (f". YAML reads an unquoted {words} as the boolean {str(value).lower()}: to mean "
            f"the text, write it in quotes (\"{example}\")")


def written_word(line: str, column: int) -> str | None:
    """The plain word written at ``column`` (1-based) of ``line``, if one starts there."""
    found = _WORD.match(line, max(column - 1, 0))
    return found.group(0) if found else None
