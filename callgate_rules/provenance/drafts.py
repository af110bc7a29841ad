"""The ``WARNING:`` lines of a confirmation draft that ``origins`` gives.

A draft warns the person about every value a rule of the tool checks the origin of. For a
rule that reads ``origins``, the warning says what ``origins`` knows: a value only in
content the assistant read (and the labels of that content), a value that appears nowhere,
a value the user did not give that sits in labelled content, for a text the parts of
it that came from labelled or only-read content, and for a number written nowhere but
computed from two the conversation holds (``derived``) how, and where each came from.
``record`` (``pipeline.record.draft``) adds the lines; the values shown are the call's own
arguments, which the draft shows anyway (and a computed number's operands).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

# The fields of one argument's origins: a rule's path ends at the argument before them.
_FIELDS = frozenset({"sources", "reads", "labels", "turns", "latest_turn", "echoes",
                     "composed", "derived", "parts"})
_UNTRACED = frozenset({"unknown", "indistinct"})
_MAX_PARTS = 5  # parts named per argument; the rest counted


def watched(references: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The argument paths (prefixes) the rules' ``origins.…`` references look at."""
    found = []
    for path in references:
        if path and path[0] == "origins":
            rest = path[1:]
            cut = next((at for at, name in enumerate(rest) if name in _FIELDS), len(rest))
            found.append(rest[:cut])
    return found


def _leaves(origins: Any, path: str = "args", keys: tuple[str, ...] = ()
            ) -> Iterator[tuple[str, tuple[str, ...], Mapping[str, Any]]]:
    pending = [(origins, path, keys)]
    while pending:
        node, at, names = pending.pop()
        if isinstance(node, Mapping) and "sources" in node:
            yield at, names, node
        elif isinstance(node, Mapping):
            pending.extend((member, f"{at}.{key}", (*names, str(key)))
                           for key, member in reversed(list(node.items())))
        elif isinstance(node, list):
            pending.extend((member, f"{at}[{index}]", names)
                           for index, member in reversed(list(enumerate(node))))


def _tools(sources: Iterable[str]) -> str:
    return ", ".join(s.split(":", 1)[1] for s in sources if ":" in s) or "a tool"


def _labelled(labels: Iterable[str]) -> str:
    found = list(labels)
    return f", labelled {', '.join(found)}" if found else ""


def _place(operand: Mapping[str, Any]) -> str:
    """Where an operand of a computed value came from, in a draft's words."""
    sources = list(operand.get("sources", ()))
    if "user" in sources:
        return "the user"
    if any(s.startswith("tool") for s in sources):
        named = any(read.get("named_by_user") for read in operand.get("reads", ())
                    if read.get("kind") == "tool")
        return (_tools(sources) + (" (a read the user named)" if named else "")
                + _labelled(operand.get("labels", ())))
    return "a record looked up" if "record" in sources else "the system instructions"


def _derived_warning(name: str, derived: list[Mapping[str, Any]]) -> str:
    """``1200 = 1100 + 100, both from read_file (a read the user named)``."""
    way = derived[0]
    first, second = way["operands"]
    where = _place(first), _place(second)
    said = (f", both from {where[0]}" if where[0] == where[1] else
            f": {first['text']} from {where[0]}, {second['text']} from {where[1]}")
    others = len(derived) - 1
    more = (f" (and {others} other way{'s' if others > 1 else ''} to compute it)"
            if others else "")
    return (f"WARNING: {name} is written nowhere: it is computed, {way['text']}{said}"
            f"{more}. Check it before you confirm.")


def _value_warning(name: str, origin: Mapping[str, Any]) -> str | None:
    sources = list(origin.get("sources", ()))
    if _UNTRACED & set(sources) or "user" in sources:
        return None
    if not sources and origin.get("derived"):
        return _derived_warning(name, list(origin["derived"]))
    if not sources:
        return (f"WARNING: {name} appears nowhere in the conversation or the records: the "
                "assistant produced it.")
    if all(s.startswith("tool") for s in sources):
        return (f"WARNING: {name} was not given by the user: it appears only in content the "
                f"assistant read ({_tools(sources)}{_labelled(origin.get('labels', ()))}). "
                "Check it before you confirm.")
    if origin.get("labels"):
        return (f"WARNING: {name} was not given by the user and appears in content"
                f"{_labelled(origin['labels'])}. Check it before you confirm.")
    return None


def _parts_warning(name: str, origin: Mapping[str, Any]) -> str | None:
    """The parts of a text the user did not give that come from labelled content or only
    from what the assistant read."""
    named = []
    for part in origin.get("parts", ()):
        sources = list(part.get("sources", ()))
        if "user" in sources or not sources or not (
                part.get("labels") or all(s.startswith("tool") for s in sources)):
            continue
        origin_of = _labelled(part.get("labels", ())).removeprefix(", ") or "read"
        named.append(f"\"{part.get('text', '')}\" ({origin_of}: {_tools(sources)})")
    if not named:
        return None
    more = f", and {len(named) - _MAX_PARTS} more" if len(named) > _MAX_PARTS else ""
    return (f"WARNING: {name} holds what the assistant read: "
            f"{', '.join(named[:_MAX_PARTS])}{more}. Check it before you confirm.")


def origin_warnings(references: Iterable[tuple[str, ...]],
                    origins: Any) -> dict[str, list[str]]:
    """Argument path (``args.to``) → its warning lines, for every argument a rule's
    ``origins`` reference looks at."""
    prefixes = watched(references)
    warnings: dict[str, list[str]] = {}
    if not prefixes or not isinstance(origins, Mapping):
        return warnings
    for path, keys, origin in _leaves(origins):
        if not any(keys[:len(prefix)] == prefix for prefix in prefixes):
            continue
        name = path.removeprefix("args.")
        parts = _parts_warning(name, origin)
        value = _value_warning(name, origin)
        if parts is not None and origin.get("sources") == []:
            value = None  # a text the model wrote: what matters is what it holds
        warnings[path] = [line for line in (value, parts) if line is not None]
    return warnings
