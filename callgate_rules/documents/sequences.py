"""Sequence rules: what may follow what in one run, written as an AccessPolicy's
``spec.sequences`` and compiled to CEL over ``history``.

    sequences:
      - name: private-reads-stay-inside
        after: {tools: [readChannel], where: 'h.args.channel.startsWith("private-")'}
        confirm: {tools: [sendEmail], where: '!args.to.endsWith("@bank.example")'}
        message: Something read from a private channel may be in this e-mail.

reads: once a call of ``after.tools`` has run in this run (``h`` is its history entry, and
``after.where``, optional, must hold of it), a call of the later ``tools`` for which
``where`` (optional, over the later call's own variables) holds is forbidden (``forbid``:
a deny access rule, refused like any deny) or needs a person (``confirm``: a business rule
of each named tool with error class ``confirmation_required``). Both compile to one
expression, which ``SequenceRule.condition`` shows::

    history.exists(h, h.tool in ["readChannel"] && h.executed && (AFTER-WHERE))
      && (WHERE)

Each ``where`` is compiled on its own first, so a mistake is reported where it is written
and no text of one can change how the other is read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.documents.model import (
    AccessRule,
    DocumentRef,
    Mode,
    OnError,
    Rule,
    Template,
)
from callgate_rules.documents.source import NodePath, SourceDocument
from callgate_rules.errors import Location
from callgate_rules.taxonomy import ErrorClass

Compile = Callable[[SourceDocument, NodePath, str], "CompiledExpression | None"]


@dataclass(frozen=True)
class SequenceRule:
    """One compiled sequence rule: a deny access rule (``forbid``) or, for ``confirm``, a
    business rule to add to each of ``tools`` (``"*"``: every tool)."""

    name: str
    tools: frozenset[str]
    condition: str  # the CEL it compiled to
    deny: AccessRule | None = None
    confirm: Rule | None = None

    def applies_to(self, tool: str) -> bool:
        return "*" in self.tools or tool in self.tools


def condition(after_tools: list[str], after_where: str | None, where: str | None) -> str:
    """The CEL a sequence rule compiles to: true when the later call is the one it names."""
    earlier = f"h.tool in {json.dumps(sorted(after_tools))} && h.executed"
    if after_where is not None:
        earlier += f" && ({after_where})"
    text = f"history.exists(h, {earlier})"
    return text if where is None else f"{text} && ({where})"


def compile_sequence(item: Mapping[str, Any], source: SourceDocument, path: NodePath,
                     compile_cel: Compile, document: DocumentRef, mode: Mode,
                     on_error: OnError) -> SequenceRule | None:
    """One item of ``spec.sequences`` (valid by the AccessPolicy schema), or ``None`` when
    a ``where`` does not compile (the finding is made by ``compile_cel``)."""
    after: Mapping[str, Any] = item["after"]
    effect = "forbid" if "forbid" in item else "confirm"
    later: Mapping[str, Any] = item[effect]
    for part, text in ((("after", "where"), after.get("where")),
                       ((effect, "where"), later.get("where"))):
        if text is not None and compile_cel(source, (*path, *part), text) is None:
            return None
    text = condition(list(after["tools"]), after.get("where"), later.get("where"))
    # the one expression the rule needs: the condition itself, or its negation to confirm
    compiled = compile_cel(source, path, text if effect == "forbid" else f"!({text})")
    if compiled is None:
        return None
    tools = frozenset(later["tools"])
    location: Location = source.locate(path)
    item_mode = Mode(item.get("mode", mode))
    item_on_error = OnError(item.get("on_error", on_error))
    message = Template.of(item["message"])
    if effect == "forbid":
        return SequenceRule(item["name"], tools, text, deny=AccessRule(
            name=item["name"], effect="deny", tools=tools, when=compiled, message=message,
            mode=item_mode, on_error=item_on_error, document=document, location=location))
    return SequenceRule(item["name"], tools, text, confirm=Rule(
        name=item["name"], expression=compiled, error_class=ErrorClass.CONFIRMATION_REQUIRED,
        route=None, message=message, user_message=None, hint=None, mode=item_mode,
        on_error=item_on_error, location=location))
