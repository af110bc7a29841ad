"""Whether one intent is within another: a bound intent may only be narrowed.

``widenings(new, old)`` lists, in words, each way ``new`` would let the run do something
``old`` did not; an empty list is the proof that it narrows. The proof is by the parts
(``ArgumentBound`` is a conjunction of its parts; so are a tool's conditions), so it is
sound and simple rather than complete: a condition or an argument schema narrows only by
being kept as it was (new ones may be added), a number's range only by shrinking, a set
only by losing values. What cannot be shown narrower is refused as a widening.
"""

from __future__ import annotations

from collections.abc import Iterator

from callgate_rules.intent.model import NOT_GIVEN, ArgumentBound, RunIntent, ToolBound
from callgate_rules.intent.within import argument_leaves, same_value


def widenings(new: RunIntent, old: RunIntent) -> list[str]:
    """Each way ``new`` is wider than ``old``; empty when ``new`` narrows ``old`` (or is it)."""
    found: list[str] = []
    for tool, bound in sorted(new.tools.items()):
        kept = old.tools.get(tool)
        if kept is None:
            found.append(f"adds the tool {tool}")
        else:
            found += _tool_widenings(bound, kept)
    new_totals = {total.name: total for total in new.totals}
    for total in old.totals:
        narrower = new_totals.get(total.name)
        if narrower is None:
            found.append(f"drops the total {total.name!r}")
            continue
        if narrower.argument != total.argument:
            found.append(f"sums another argument in the total {total.name!r}")
        if not narrower.tools >= total.tools:
            dropped = ", ".join(sorted(total.tools - narrower.tools))
            found.append(f"stops counting {dropped} in the total {total.name!r}")
        if narrower.at_most > total.at_most:
            found.append(f"raises the total {total.name!r} from {total.at_most:g} to "
                         f"{narrower.at_most:g}")
    return found


def _tool_widenings(new: ToolBound, old: ToolBound) -> Iterator[str]:
    tool = new.tool
    if old.calls is not None and (new.calls is None or new.calls > old.calls):
        yield f"allows more calls of {tool} than {old.calls}"
    arguments = {bound.path: bound for bound in new.arguments}
    for bound in old.arguments:
        narrower = arguments.get(bound.path)
        if narrower is None:
            yield f"drops the bound on {tool}'s {bound.name}"
        else:
            yield from (f"widens {tool}'s {bound.name}: {said}"
                        for said in _argument_widenings(narrower, bound))
    conditions = {condition.text for condition in new.when}
    for condition in old.when:
        if condition.text not in conditions:
            yield f"drops the condition `{condition.text}` on {tool}"


def _argument_widenings(new: ArgumentBound, old: ArgumentBound) -> Iterator[str]:
    """Each part of ``old`` that ``new`` does not imply."""
    values = _finite_values(new)
    if values is not None:
        # ``new`` allows only these values: it narrows when ``old`` allows each of them
        for value in values:
            left = list(argument_leaves(old, value))
            if left:
                shown = "a masked value" if old.masked else repr(value)
                yield f"allows {shown}, which the bound does not"
        return
    if old.equals is not NOT_GIVEN or old.one_of is not None:
        yield "allows values beyond the ones named"
    if old.minimum is not None and (new.minimum is None or new.minimum < old.minimum):
        yield "lowers its minimum" if old.masked else (
            f"lowers the minimum below {old.minimum:g}")
    if old.maximum is not None and (new.maximum is None or new.maximum > old.maximum):
        yield "raises its maximum" if old.masked else (
            f"raises the maximum above {old.maximum:g}")
    if old.schema is not None and not (new.schema is not None
                                       and same_value(new.schema, old.schema)):
        yield "changes or drops its schema"


def _finite_values(bound: ArgumentBound) -> list[object] | None:
    """The values ``bound`` allows when they are few enough to list (an ``equals`` or a
    ``one_of``), each of which also meets the bound's other parts; else ``None``."""
    if bound.equals is not NOT_GIVEN:
        candidates = [bound.equals]
    elif bound.one_of is not None:
        candidates = list(bound.one_of)
    else:
        return None
    return [value for value in candidates if not list(argument_leaves(bound, value))]
