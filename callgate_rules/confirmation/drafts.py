"""The draft a person confirms: one model, rendered the same on every surface.

A held write is shown to a person on the review page, by ``callgate review``, in the MCP
gateway's elicitation and by the framework adapters. Each of them shows a ``Draft`` made
here, never the arguments formatted on its own:

- **one row per argument** (a leaf of the arguments: ``items[0].sku``), its value taken
  from the *canonical* arguments, the ones the operation's hash binds and the host
  executes (``950``, not ``950.0``; strings in NFC);
- **every character a person could not see or could misread made visible** (``visible``):
  a line break as ``↵``, any other control, bidi control, zero-width or unusual space as a
  named mark such as ``⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩``, and in a word that mixes
  scripts the letters of the minority script the same way (a Cyrillic ``а`` in a Latin
  IBAN). The marks are reversible (``recovered``): the value shown always identifies the
  value sent. Long values are shown whole, with a warning saying how long they are;
- **a warning per argument** for each of those, and the provenance warnings of the rules
  that read ``origins`` or ``provenance``;
- **evidence** (``Evidence``): for an argument that needs a person because of where its
  value came from, which read it came from (tool, call), a short excerpt of that read
  around the value, and the user's own requests of the run; for a write held by a rule,
  the rule's name and its message for people. Excerpts and requests are masked as the
  contract's ``spec.mask`` says and bounded (``EXCERPT_RADIUS``, ``MAX_READS``,
  ``MAX_REQUESTS``, ``REQUEST_CHARS``); a cut is always said, never silent.

The draft is stored with the held receipt (``Draft.stored``: JSON in the receipt's
``detail``), so any instance's page and the API show the same draft and evidence.
``Draft.text`` is the plain-text rendering (CLI, MCP, adapters, ``Decision.draft``); the
page renders the same rows as HTML (Jinja, autoescaped). The script of a letter is the
first word of its Unicode name (``unicodedata``), no dependency.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from callgate_rules.canonical import canonical_json, normalise
from callgate_rules.confirmation.draft_model import (
    LONG,
    ORIGIN,
    STORED_FORMAT,
    Draft,
    DraftRow,
    DraftWarning,
    HeldBy,
    Read,
    text_lines,
)

# The draft's parts, each in the module named for it; imported from here by its users.
from callgate_rules.confirmation.evidence import (
    EXCERPT_RADIUS,
    MAX_READS,
    MAX_REQUESTS,
    REQUEST_CHARS,
    Masker,
    excerpt,
    held_by,
    masked_row,
    operands_read,
    parts_read,
    provenance_warnings,
    reads_of,
    requests_of,
    sources_of,
)
from callgate_rules.intent.model import INTENT_RULE
from callgate_rules.masking import MASK
from callgate_rules.visible_text import (
    BIDI,
    BIDI_CONTROLS,
    CLOSE_MARK,
    COMBINING,
    CONTROL,
    DIGIT,
    INVISIBLE,
    LINE_BREAK,
    LINE_BREAKS,
    MIXED_SCRIPT,
    NEWLINE_MARK,
    OPEN_MARK,
    SPACE,
    ZERO_WIDTH,
    Visible,
    char_name,
    recovered,
    script_of,
    shown,
    shown_lines,
    visible,
)

if TYPE_CHECKING:  # types only: the pipeline imports this module
    from callgate_rules.documents.model import Contract
    from callgate_rules.provenance.conversation import Conversation

__all__ = [
    "BIDI", "BIDI_CONTROLS", "CLOSE_MARK", "COMBINING", "CONTROL", "DIGIT", "EXCERPT_RADIUS",
    "INVISIBLE",
    "LINE_BREAK", "LINE_BREAKS", "LONG", "LONG_VALUE", "MAX_READS", "MAX_REQUESTS",
    "MIXED_SCRIPT", "NEWLINE_MARK", "OPEN_MARK", "ORIGIN", "REQUEST_CHARS", "SPACE",
    "STORED_FORMAT", "ZERO_WIDTH", "Draft", "DraftRow", "DraftWarning", "HeldBy", "Read",
    "Visible", "char_name", "character_warnings", "draft_of", "excerpt", "from_arguments",
    "held_by", "of_receipt", "reads_of", "recovered", "row_of", "script_of", "shown",
    "shown_lines", "text_lines", "visible",
]

LONG_VALUE = 200  # characters from which a value gets a warning that it is long


# Building a draft ---------------------------------------------------------------------------


def _listed(names: Counter[str]) -> str:
    return ", ".join(f"{name} ×{count}" if count > 1 else name
                     for name, count in names.items())


# What each kind of marked character means to a reviewer: ``{name}`` the argument,
# ``{listed}`` the characters found (by name and count), ``{count}``/``{s}`` how many line
# breaks (line breaks alone are counted; a row warns once per kind).
KIND_WARNINGS = {
    LINE_BREAK: ("{name} holds {count} line break{s} ({listed}), shown as " + NEWLINE_MARK
                 + " or a named mark: text after a line break can pass for further rows. It "
                 "is all one value."),
    CONTROL: ("{name} holds control characters ({listed}), shown as named marks: they are "
              "invisible or move the text around."),
    BIDI: ("{name} holds bidirectional controls ({listed}), shown as named marks: they make "
           "text display in another order than the one sent."),
    INVISIBLE: ("{name} holds invisible characters ({listed}), shown as named marks: the "
                "value sent differs from what it looks like."),
    SPACE: "{name} holds unusual spaces ({listed}), shown as named marks.",
    DIGIT: ("{name} holds digits of another script than 0–9 ({listed}), shown as named "
            "marks: they can look like other digits (৪ like 8)."),
    COMBINING: ("{name} holds combining marks that can draw over other characters "
                "({listed}): an overlay, a second mark on one letter or a mark with no "
                "letter. Shown as named marks."),
}


def character_warnings(name: str, seen: Visible, length: int) -> list[DraftWarning]:
    """The warnings a value's characters earn (``seen``: the value made visible)."""
    marked = seen.marked
    found = []
    for kind, sentence in KIND_WARNINGS.items():
        if kind in marked:
            count = sum(marked[kind].values())
            found.append(DraftWarning(kind, sentence.format(
                name=name, listed=_listed(marked[kind]), count=count,
                s="s" if count > 1 else "")))
    if MIXED_SCRIPT in marked:
        found.append(DraftWarning(MIXED_SCRIPT, (
            f"{name} mixes scripts within a word ({_script_list(seen.scripts)}): "
            f"{_listed(marked[MIXED_SCRIPT])} looks like a letter of another script. Shown "
            "as named marks; it may be a different account, address or name.")))
    elif seen.scripts:
        found.append(DraftWarning(MIXED_SCRIPT, (
            f"{name} is written in more than one script ({_script_list(seen.scripts)}): "
            "check that each word is what it looks like.")))
    if length >= LONG_VALUE:
        found.append(DraftWarning(LONG, (
            f"{name} is long ({length:,} characters): it is shown whole; read it to its "
            "end.")))
    return found


def _script_list(scripts: Iterable[str]) -> str:
    return ", ".join(s.title() for s in scripts)


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Each leaf of the arguments with its path (``to``, ``items[0].sku``); an empty list
    or object is a leaf of its own."""
    if isinstance(value, Mapping) and value:
        for key, member in value.items():
            yield from _leaves(member, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value:
        for index, member in enumerate(value):
            yield from _leaves(member, f"{path}[{index}]")
    else:
        yield path, value


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "number"
    return "list" if isinstance(value, list) else "object"


def row_of(name: str, value: Any) -> DraftRow:
    """One argument's row, from its canonical value: a text as it is (made visible),
    anything else as its canonical JSON."""
    value = normalise(value)  # the canonical value, whoever calls
    text = value if isinstance(value, str) else canonical_json(value)
    seen_name = visible(name)
    seen = visible(text)
    warnings = character_warnings(seen_name.shown, seen, len(text))
    if seen_name.marked:
        warnings.extend(DraftWarning(w.kind, f"The argument's name: {w.text}")
                        for w in character_warnings(seen_name.shown, seen_name, 0))
    return DraftRow(seen_name.shown, seen.shown, _kind(value), canonical_json(value),
                    tuple(warnings))



def draft_of(contract: Contract, variables: Mapping[str, Any],
             conversation: Conversation | None = None, rule: str | None = None,
             user_message: str | None = None) -> Draft:
    """The draft of a write held for a person: the summary, a row per argument from the
    canonical arguments, the warnings, the evidence (see the module's docstring)."""
    arguments = normalise(variables.get("args", {}))
    raw_summary = (contract.confirmation.summary.render(variables)
        if contract.confirmation.summary else f"Run {contract.name}")
    mask = Masker(contract, arguments)
    summary = visible(mask(raw_summary))
    warned = {name: [mask(line) for line in lines]
              for name, lines in provenance_warnings(contract, variables).items()}
    rows = []
    for name, value in _leaves(arguments):
        row = row_of(name, value)
        if masked_row(name, contract):  # by its path: no search for a secret in what's shown
            row = DraftRow(row.name, MASK, row.kind, MASK, ())
        origin_lines = warned.pop(name, [])
        if origin_lines:
            evidence = reads_of(value, sources_of(name, variables), conversation, mask)
            parts = parts_read(name, variables)
            if parts and not any(r.found for r in evidence):  # a text: where its parts are
                evidence = tuple(read for part in parts[:MAX_READS] for read in reads_of(
                    part, sources_of(name, variables), conversation, mask)[:1])
            operands = operands_read(name, variables)
            if operands and not evidence:  # a computed number: where its operands were read
                evidence = tuple(read for text, tools in operands
                                 for read in reads_of(text, tools, conversation, mask)[:1])
            row = DraftRow(row.name, row.shown, row.kind, row.value,
                           tuple(DraftWarning(ORIGIN, shown(line)) for line in origin_lines)
                           + row.warnings, evidence)
        rows.append(row)
    requests, left_out = requests_of(conversation, mask)
    summary_warnings = tuple(
        DraftWarning(w.kind, f"The summary: {w.text}")
        for w in character_warnings("it", summary, 0))
    return Draft(contract.name, summary.shown, tuple(rows),
                 held_by(contract, variables, rule, user_message), requests, left_out,
                 summary_warnings,
                 tuple(shown(line) for found in warned.values() for line in found)
                 + intent_notes(variables, rule, mask))


def intent_notes(variables: Mapping[str, Any], rule: str | None,
                 mask: Masker) -> tuple[str, ...]:
    """What of the run's intent the call leaves (``pipeline.intents``), a note each, when
    another rule held it (the intent's own hold says so in ``held_by``)."""
    intent = variables.get("intent")
    if rule == INTENT_RULE or not isinstance(intent, Mapping) or not intent.get("leaves"):
        return ()
    return tuple(shown(mask(f"Beyond what was asked at the start of the run: {part}."))
                 for part in intent["leaves"])


def from_arguments(tool: str, arguments: Mapping[str, Any]) -> Draft:
    """A draft of arguments alone (a receipt held before drafts were stored as models)."""
    canonical = normalise(dict(arguments))
    return Draft(tool, shown(f"Run {tool}"),
                 tuple(row_of(name, value) for name, value in _leaves(canonical)))


def of_receipt(detail: str | None, tool: str, arguments: Mapping[str, Any]) -> Draft:
    """The draft a held receipt keeps, else one of its arguments."""
    return Draft.from_stored(detail) or from_arguments(tool, arguments)

