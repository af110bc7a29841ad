"""The evidence a draft shows for a held write: the reads an argument's value came from
(an excerpt around the value), the user's own requests of the run, the provenance warnings
of the rules that read ``origins`` or ``provenance``, and the rule that held the write.

Excerpts and requests are masked as the contract's ``spec.mask`` says and bounded
(``EXCERPT_RADIUS``, ``MAX_READS``, ``MAX_REQUESTS``, ``REQUEST_CHARS``); a cut is always
said, never silent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from callgate_rules import provenance
from callgate_rules.canonical import canonical_json
from callgate_rules.confirmation.draft_model import HeldBy, Read
from callgate_rules.masking import Masking
from callgate_rules.provenance.drafts import origin_warnings
from callgate_rules.visible_text import shown

if TYPE_CHECKING:  # types only: the pipeline imports this module
    from callgate_rules.documents.model import Contract
    from callgate_rules.provenance.conversation import Conversation

EXCERPT_RADIUS = 80  # characters of a read shown on each side of the value
MAX_READS = 3  # reads shown as evidence per argument
MAX_REQUESTS = 3  # the user's latest requests shown
REQUEST_CHARS = 400  # characters of each request shown


class Masker:
    """Masks the contract's ``spec.mask`` values in evidence texts (``callgate_rules.masking``)."""

    def __init__(self, contract: Contract | None, arguments: Mapping[str, Any]) -> None:
        self.masking = None
        if contract is not None and contract.mask:
            self.masking = Masking(contract, arguments, as_shown=True)

    def __call__(self, text: str) -> str:
        if self.masking is None:
            return text
        masked = self.masking(text)
        return masked if isinstance(masked, str) else str(masked)


def _cut(text: str, limit: int) -> str:
    """At most ``limit`` characters, the cut said."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters not shown)"


def _squashed(text: str) -> tuple[str, list[int]]:
    """The letters and digits of ``text`` in lower case, with where each came from."""
    kept, where = [], []
    for at, character in enumerate(text):
        if character.isalnum():
            kept.append(character.lower())
            where.append(at)
    return "".join(kept), where


def _find(text: str, value: str) -> tuple[int, int] | None:
    """Where ``value`` is written in ``text``: as it is, in another case, or spelled with
    other separators (``GB33 BUKB …`` for ``GB33BUKB…``)."""
    if not value:
        return None
    at = text.find(value)
    if at < 0:
        at = text.lower().find(value.lower())
    if at >= 0:
        return at, at + len(value)
    needle, _ = _squashed(value)
    haystack, where = _squashed(text)
    if len(needle) < 3:
        return None
    at = haystack.find(needle)
    return (where[at], where[at + len(needle) - 1] + 1) if at >= 0 else None


def excerpt(text: str, span: tuple[int, int] | None,
            radius: int = EXCERPT_RADIUS) -> tuple[str, str, str]:
    """The text around ``span`` (its start when ``None``) as (before, the span, after),
    ``…`` where it was cut."""
    start, end = span if span is not None else (0, 0)
    left = max(0, start - radius)
    right = min(len(text), end + radius if span is not None else 2 * radius)
    return (("…" if left > 0 else "") + text[left:start], text[start:end],
            text[end:right] + ("…" if right < len(text) else ""))


def reads_of(value: Any, tools: Sequence[str], conversation: Conversation | None,
             mask: Masker) -> tuple[Read, ...]:
    """The tool results of ``tools`` that hold ``value``, at most ``MAX_READS``, each with
    an excerpt around it; the first result of those tools when none holds it as written."""
    if conversation is None or not tools:
        return ()
    wanted = value if isinstance(value, str) else canonical_json(value)
    results = [(position, segment) for position, segment in enumerate(
        (s for s in conversation.segments if s.kind == provenance.TOOL), start=1)
        if segment.tool in tools or (segment.tool is None and "" in tools)]
    found: list[Read] = []
    for position, segment in results:
        text = mask(segment.text)  # masked before it is cut: no secret is left half shown
        span = _find(text, wanted)
        if span is not None:
            found.append(_read(segment.tool or "a tool", segment.arguments, position, text,
                               span, mask))
        if len(found) == MAX_READS:
            break
    if not found and results:
        position, segment = results[0]
        found.append(_read(segment.tool or "a tool", segment.arguments, position,
                           mask(segment.text), None, mask))
    return tuple(found)


def _read(tool: str, arguments: str | None, position: int, text: str,
          span: tuple[int, int] | None, mask: Masker) -> Read:
    call = _cut(mask(arguments or "{}"), 200)
    before, match, after = (shown(part) for part in excerpt(text, span))
    return Read(shown(tool), shown(call), position, before, match, after)


def requests_of(conversation: Conversation | None, mask: Masker) -> tuple[tuple[str, ...], int]:
    if conversation is None:
        return (), 0
    asked = [s.text for s in conversation.segments if s.kind == provenance.USER]
    latest = asked[-MAX_REQUESTS:]
    # masked before it is cut: a secret across the cut is not left half shown
    return (tuple(shown(_cut(mask(text), REQUEST_CHARS)) for text in latest),
            len(asked) - len(latest))


def _tools_in(sources: Iterable[Any]) -> list[str]:
    return [s.split(":", 1)[1] for s in sources
            if isinstance(s, str) and s.startswith(f"{provenance.TOOL}:")]


def _origin_at(origins: Any, name: str) -> Mapping[str, Any] | None:
    """The ``origins`` leaf of the argument at path ``name`` (``items[0].sku``)."""
    node = origins
    for key, index in _path_parts(name):
        if isinstance(node, Mapping):
            node = node.get(key) if key else node
        if index is not None:
            node = node[index] if isinstance(node, list) and index < len(node) else None
        if node is None:
            return None
    return node if isinstance(node, Mapping) and "sources" in node else None


def masked_row(name: str, contract: Contract | None) -> bool:
    """Does the contract's ``spec.mask`` name the argument at path ``name``
    (``items[0].sku`` is at ``items.sku``; a masked object masks each of its leaves)?"""
    if contract is None or not contract.mask:
        return False
    keys = tuple(key for key, _ in _path_parts(name) if key)
    return any(keys[:len(path)] == path for path in contract.mask)


def _path_parts(name: str) -> Iterator[tuple[str, int | None]]:
    for part in name.split("."):
        key, _, rest = part.partition("[")
        yield key, None
        while rest:
            number, _, rest = rest.partition("]")
            yield "", int(number) if number.isdigit() else None
            rest = rest.removeprefix("[")


def provenance_warnings(contract: Contract, variables: Mapping[str, Any]
                         ) -> dict[str, list[str]]:
    """Argument path → its provenance warnings: what ``origins`` knows where a rule reads
    it, else what ``provenance`` does (only the values a rule of this contract watches)."""
    references = [path for rule in contract.rules for path in rule.expression.references]
    warned = {path.removeprefix("args."): [line.removeprefix("WARNING: ") for line in found]
              for path, found in origin_warnings(references, variables.get("origins")).items()}
    watched = {".".join(("args", *path[1:])) for path in references
               if path[0] == "provenance"}
    for path, found in provenance.flatten(variables.get("provenance", {})):
        name = path.removeprefix("args.")
        if path not in watched or name in warned:
            continue
        if found and all(s.startswith(provenance.TOOL) for s in found):
            tools = ", ".join(_tools_in(found)) or "a tool"
            warned[name] = [f"{name} was not given by the user: it appears only in content "
                            f"the assistant read ({tools}). Check it before you confirm."]
        elif not found:
            warned[name] = [f"{name} appears nowhere in the conversation or the records: "
                            "the assistant produced it."]
    return warned


def sources_of(name: str, variables: Mapping[str, Any]) -> list[str]:
    """The tools an argument's value (or the parts of it a warning names) was read from."""
    origin = _origin_at(variables.get("origins"), name)
    tools: list[str] = []
    if origin is not None:
        tools.extend(_tools_in(origin.get("sources", ())))
        for part in origin.get("parts", ()):
            if isinstance(part, Mapping) and "user" not in part.get("sources", ()):
                tools.extend(t for t in _tools_in(part.get("sources", ())) if t not in tools)
    for path, found in provenance.flatten(variables.get("provenance", {})):
        if path.removeprefix("args.") == name:
            tools.extend(t for t in _tools_in(found) if t not in tools)
    return tools


def parts_read(name: str, variables: Mapping[str, Any]) -> list[str]:
    """The texts of the parts of an argument its warning names (read, not the user's)."""
    origin = _origin_at(variables.get("origins"), name)
    if origin is None:
        return []
    return [str(part.get("text", "")) for part in origin.get("parts", ())
            if isinstance(part, Mapping) and "user" not in part.get("sources", ())
            and _tools_in(part.get("sources", ()))]


def operands_read(name: str, variables: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """For a number computed from two the conversation holds (``origins.X.derived``), the
    operands of the way its warning names that were read, not the user's: each with the
    tools it was read from, so the draft shows each where it was read."""
    origin = _origin_at(variables.get("origins"), name)
    derived = origin.get("derived") if origin is not None else None
    if not isinstance(derived, list) or not derived or not isinstance(derived[0], Mapping):
        return []
    operands = derived[0].get("operands")
    return [(str(operand.get("text", "")), _tools_in(operand.get("sources", ())))
            for operand in (operands if isinstance(operands, list) else [])
            if isinstance(operand, Mapping) and "user" not in operand.get("sources", ())
            and _tools_in(operand.get("sources", ()))]


def held_by(contract: Contract, variables: Mapping[str, Any], rule: str | None,
            user_message: str | None) -> HeldBy | None:
    """The rule that held the write, with its message for people: the rule's
    ``user_message`` (else its ``message``); for ``spec.confirmation.required``, that."""
    if rule is None:
        return None
    if rule == f"{contract.name}/confirmation" and contract.confirmation.required:
        return HeldBy(rule, f"Every call of {contract.name} needs a person's confirmation "
                            "(the contract's spec.confirmation.required).")
    for candidate in contract.rules:
        if f"{contract.name}/{candidate.name}" == rule:
            template = candidate.user_message or candidate.message
            try:
                message = template.render(variables)
            except Exception:  # a message that cannot be rendered: its text as written
                message = template.text
            return HeldBy(rule, shown(message))
    return HeldBy(rule, shown(user_message or "A rule routes this call to a person."))

