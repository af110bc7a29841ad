"""A tool's plan in words: the comment above each step of its generated code, and the lines
of ``ToolPlan.outline()``, with the CEL text of each look-up and rule as it is written.

Each step is worded once, here; ``plan._Writer.note`` puts the words above the step's code
and into the outline, so the two cannot tell different stories.
"""
from __future__ import annotations

import textwrap

from callgate_rules.documents.model import AccessRule, InputLimits, Lookup, OnError, Rule


def described(heading: str, cel: str | None, width: int, joint: str = ": ") -> list[str]:
    """``heading`` and the CEL text ``cel`` as lines of at most ``width`` characters (but a
    longer word): on one line when they fit, else the CEL text below, indented and wrapped
    as it is written. A character that would end or break a line is escaped, so that each
    line can be a comment of the generated code."""
    wrap = textwrap.TextWrapper(width, subsequent_indent="    ", break_long_words=False,
                                break_on_hyphens=False)
    lines = wrap.wrap(_printable(heading)) or [""]
    if cel is None:
        return lines
    text = [_printable(line) for line in textwrap.dedent(cel.expandtabs(4)).splitlines()
            if line.strip()]
    if len(text) == 1 and len(lines) == 1 and len(lines[0] + joint + text[0]) <= width:
        return [lines[0] + joint + text[0]]
    wrap.initial_indent = "    "
    return [*lines[:-1], lines[-1] + joint.rstrip(),
            *(part for line in text for part in wrap.wrap(line))]


def _printable(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def parse_bounds(limits: InputLimits) -> str:
    """What a call passed in step 2, before its tool's plan is asked."""
    several = "the first taken" if limits.multiple_calls == "first" else "rejected"
    return (f"one call (several: {several}), at most {limits.max_bytes:,} bytes, "
            f"{limits.max_depth} levels deep, strings of at most "
            f"{limits.max_string_length:,} characters, no undeclared field")


def lookup_heading(lookup: Lookup) -> str:
    """A look-up's name, what it binds and from where, followed by its key's CEL text."""
    what = ("one record" if lookup.many != "list" else "the records"
        if lookup.max_records is None else f"at most {lookup.max_records} records")
    return (f"look-up {lookup.name}: {what} of {lookup.collection} whose "
           f"{' or '.join(lookup.fields)} is")


def access_heading(rule: AccessRule, otherwise: bool) -> str:
    """An access rule's effect, name and mode (``otherwise``: after an allow rule)."""
    return f"{'else ' if otherwise else ''}{rule.effect} {rule.qualified_name} ({_how(rule)})"


def rule_heading(rule: Rule) -> str:
    """A business rule's name, mode and error class, and what a person's approval covers."""
    covers = ", ".join(".".join(("args", *path)) for path in rule.approval_covers)
    return (f"rule {rule.name} ({_how(rule)}, {rule.error_class}"
           f"{'; approval covers ' if covers else ''}{covers})")


def _how(rule: AccessRule | Rule) -> str:
    """A rule's mode, and what an error counts as when not the default (fail closed)."""
    return f"{rule.mode}, on error: ignore" if rule.on_error == OnError.IGNORE else rule.mode
