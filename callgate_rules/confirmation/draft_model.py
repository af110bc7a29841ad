"""The draft a person confirms, as data: its rows, warnings and evidence, how it is stored
with the held receipt (``Draft.stored``) and its plain-text rendering (``text_lines``).

``confirmation.drafts`` builds it (see its docstring for what a draft shows and why).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from callgate_rules.visible_text import CLOSE_MARK, NEWLINE_MARK, OPEN_MARK

STORED_FORMAT = "callgate/draft@1"  # the key a stored draft is told apart by

# Warning kinds a draft adds after the kinds of character marked (``visible_text``).
LONG, ORIGIN = "long", "origin"


@dataclass(frozen=True)
class DraftWarning:
    """One thing a person must check about an argument: its ``kind`` and what to check."""

    kind: str
    text: str


@dataclass(frozen=True)
class Read:
    """A read an argument's value appears in: the tool, its call's arguments, which tool
    result of the run it is, and the read's text around the value (masked, bounded)."""

    tool: str
    call: str  # the call's arguments as the model sent them (made visible, bounded)
    position: int  # 1 = the run's first tool result
    # the excerpt, made visible, "…" where it was cut: before the value, the value as the
    # read writes it, after it (the value empty when the read does not hold it as written:
    # then the excerpt is the read's start)
    before: str
    match: str
    after: str

    @property
    def found(self) -> bool:
        return bool(self.match)

    @property
    def excerpt(self) -> str:
        return self.before + self.match + self.after


@dataclass(frozen=True)
class DraftRow:
    """One argument: its path, its value as shown, its type, what to check, where from."""

    name: str
    shown: str
    kind: str  # text, number, boolean, null, list, object
    value: str  # the canonical JSON of the value
    warnings: tuple[DraftWarning, ...] = ()
    reads: tuple[Read, ...] = ()

    @property
    def needs_evidence(self) -> bool:
        return any(w.kind == ORIGIN for w in self.warnings)


@dataclass(frozen=True)
class HeldBy:
    """The rule that held the write for a person, and its message for people."""

    rule: str
    message: str


@dataclass(frozen=True)
class Draft:
    """A held write as a person reads it (see the module's docstring)."""

    tool: str
    summary: str
    rows: tuple[DraftRow, ...]
    held_by: HeldBy | None = None
    requests: tuple[str, ...] = ()  # the user's own requests in the run (latest last)
    requests_left_out: int = 0  # earlier requests not shown
    summary_warnings: tuple[DraftWarning, ...] = ()
    notes: tuple[str, ...] = field(default=())  # warnings tied to no single argument

    @property
    def warning_count(self) -> int:
        return (sum(len(row.warnings) for row in self.rows) + len(self.summary_warnings) +
            len(self.notes))

    @staticmethod
    def pieces(shown_text: str) -> list[tuple[bool, str]]:
        """A shown text as (is it a mark, text) pieces, so a page can set the marks apart
        (``↵``, ``⟨U+…⟩``) from the characters shown as they are."""
        found: list[tuple[bool, str]] = []
        plain: list[str] = []
        at = 0
        while at < len(shown_text):
            character = shown_text[at]
            end = at + 1
            if character == OPEN_MARK:
                end = shown_text.index(CLOSE_MARK, at) + 1
            if character in (OPEN_MARK, NEWLINE_MARK):
                if plain:
                    found.append((False, "".join(plain)))
                    plain = []
                found.append((True, shown_text[at:end]))
            else:
                plain.append(character)
            at = end
        if plain:
            found.append((False, "".join(plain)))
        return found

    def text(self) -> str:
        """The plain-text rendering: the CLI, the MCP elicitation, the adapters."""
        return "\n".join(text_lines(self))

    def stored(self) -> str:
        """The JSON kept in the held receipt's ``detail``."""
        return json.dumps({"format": STORED_FORMAT, **_plain(self)}, ensure_ascii=False,
                          separators=(",", ":"))

    @classmethod
    def from_stored(cls, detail: str | None) -> Draft | None:
        """The draft ``stored`` kept, or ``None`` for any other text."""
        if not detail or not detail.startswith("{"):
            return None
        try:
            data = json.loads(detail)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("format") != STORED_FORMAT:
            return None
        try:
            held = data.get("held_by")
            return cls(
                tool=str(data["tool"]), summary=str(data["summary"]),
                rows=tuple(DraftRow(
                    name=str(row["name"]), shown=str(row["shown"]), kind=str(row["kind"]),
                    value=str(row["value"]),
                    warnings=tuple(DraftWarning(str(w["kind"]), str(w["text"]))
                                   for w in row["warnings"]),
                    reads=tuple(Read(str(r["tool"]), str(r["call"]), int(r["position"]),
                                     str(r["before"]), str(r["match"]), str(r["after"]))
                                for r in row["reads"]))
                    for row in data["rows"]),
                held_by=HeldBy(str(held["rule"]), str(held["message"])) if held else None,
                requests=tuple(str(r) for r in data["requests"]),
                requests_left_out=int(data["requests_left_out"]),
                summary_warnings=tuple(DraftWarning(str(w["kind"]), str(w["text"]))
                                       for w in data["summary_warnings"]),
                notes=tuple(str(n) for n in data["notes"]))
        except (KeyError, TypeError, ValueError):
            return None

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape the API gives (``draft_rows``)."""
        return _plain(self)


def _plain(draft: Draft) -> dict[str, Any]:
    return {
        "tool": draft.tool, "summary": draft.summary,
        "rows": [{"name": row.name, "shown": row.shown, "kind": row.kind, "value": row.value,
                  "warnings": [{"kind": w.kind, "text": w.text} for w in row.warnings],
                  "reads": [{"tool": r.tool, "call": r.call, "position": r.position,
                             "before": r.before, "match": r.match, "after": r.after}
                            for r in row.reads]}
                 for row in draft.rows],
        "held_by": {"rule": draft.held_by.rule, "message": draft.held_by.message}
        if draft.held_by else None,
        "requests": list(draft.requests), "requests_left_out": draft.requests_left_out,
        "summary_warnings": [{"kind": w.kind, "text": w.text}
                             for w in draft.summary_warnings],
        "notes": list(draft.notes),
    }



# Plain text ---------------------------------------------------------------------------------


def text_lines(draft: Draft) -> list[str]:
    """The draft as lines of plain text, no line holding a raw control, bidi or
    zero-width character (every value is made visible): the summary, a line per argument,
    then ``WARNING:`` lines with their evidence, the rule, and the user's requests."""
    lines = [f"{draft.summary}:"]
    lines.extend(f"  {row.name}: {row.shown}" for row in draft.rows)
    for warning in draft.summary_warnings:
        lines.append(f"WARNING: {warning.text}")
    for row in draft.rows:
        for warning in row.warnings:
            lines.append(f"WARNING: {warning.text}")
            if warning.kind != ORIGIN:
                continue
            for read in row.reads:
                where = "holds it" if read.found else "does not hold it as written; it begins"
                lines.append(f"  evidence: {read.tool} (tool result {read.position}, called "
                             f"with {read.call}) {where}: \"{read.excerpt}\"")
    for note in draft.notes:
        lines.append(f"WARNING: {note}")
    if draft.held_by is not None:
        lines.append(f"Held by {draft.held_by.rule}: {draft.held_by.message}")
    if draft.requests:
        earlier = (f" ({draft.requests_left_out} earlier not shown)"
            if draft.requests_left_out else "")
        lines.append(f"The user's own request{'s' if len(draft.requests) > 1 else ''} in "
                     f"this run{earlier}:")
        lines.extend(f"  \"{request}\"" for request in draft.requests)
    return lines
