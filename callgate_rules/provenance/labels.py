"""Labels a configuration gives the results of its reads (a contract's ``spec.labels``).

A contract of a read declares, per label, either a CEL expression over ``result`` (the
tool's result as the conversation holds it: parsed JSON or YAML, else its text; see
``results``) and ``args`` (the arguments of the model's call that produced it), for the
whole result, or an item form::

    labels:                                  # excerpt of a ToolContract spec
      confidential: 'args.channel.startsWith("private")'     # the whole result
      untrusted:                                             # each item
        each: result                         # a list, or a map (its values)
        where: '!item.sender.endsWith("@bluesparrowtech.com")'

A value that appears inside an item for which ``where`` holds carries the label; a value
only in other items, or outside the items, does not. The read itself carries every label
any of its items has. ``labeller_of`` turns those into the ``Labeller`` ``origins`` asks of
every tool result in the conversation.

Where an expression fails, the label is *given*: a whole-result expression that fails on
a result (a field the result lacks, a text where JSON was expected) gives it to the
result, a ``where`` that fails on an item to that item, an ``each`` that fails or yields
neither a list nor a map to the whole result. A label marks caution, and a result that
cannot be read is no reason to drop it. A label is evidence of where a value appeared,
never proof of where it flowed.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.provenance.origins import LabelledRecord
from callgate_rules.provenance.results import (
    NO_LABELLING,
    Labeller,
    Labelling,
    no_labels,
)


class _Expression(Protocol):
    def evaluate(self, variables: Mapping[str, Any]) -> Any: ...


class _Label(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def whole(self) -> _Expression | None: ...
    @property
    def each(self) -> _Expression | None: ...
    @property
    def where(self) -> _Expression | None: ...


class _Labelled(Protocol):
    @property
    def labels(self) -> Sequence[_Label]: ...


_FAILURES = (CelEvaluationError, TypeError, ValueError, KeyError, AttributeError,
             RecursionError)


def _holds(expression: _Expression, variables: Mapping[str, Any]) -> bool:
    """Whether a label expression holds; one that cannot be evaluated gives the label."""
    try:
        return expression.evaluate(variables) is not False
    except _FAILURES:
        return True


def _items(expression: _Expression, variables: Mapping[str, Any]) -> list[Any] | None:
    """What ``each`` yields: a list, or a map's values; ``None`` for anything else."""
    try:
        found = expression.evaluate(variables)
    except _FAILURES:
        return None
    if isinstance(found, Mapping):
        return list(found.values())
    return list(found) if isinstance(found, list | tuple) else None


class ContractLabels:
    """The labels of each read's results, from the contracts that declare any."""

    def __init__(self, declared: Mapping[str, tuple[_Label, ...]]) -> None:
        self.declared = declared

    def declares(self, tool: str) -> bool:
        return tool in self.declared

    def label(self, tool: str, result: Any, arguments: Any) -> Labelling:
        labels = self.declared.get(tool)
        if not labels:
            return NO_LABELLING
        whole: list[str] = []
        items: dict[int, tuple[Any, list[str]]] = {}  # by identity, in the order found
        variables = {"result": result, "args": arguments}
        for label in labels:
            if label.whole is not None:
                if _holds(label.whole, variables):
                    whole.append(label.name)
                continue
            assert label.each is not None and label.where is not None
            found = _items(label.each, variables)
            if found is None:
                whole.append(label.name)  # no items to tell apart: caution, on all of it
                continue
            for item in found:
                _, given = items.setdefault(id(item), (item, []))
                if label.name not in given and _holds(
                        label.where, {"item": item, "result": result, "args": arguments}):
                    given.append(label.name)
        return Labelling(tuple(whole), tuple(item for item, _ in items.values()),
                         tuple(tuple(given) for _, given in items.values()))


def labeller_of(contracts: Mapping[str, _Labelled]) -> Labeller:
    """The labels of each read's results, from the contracts that declare any."""
    declared = {name: tuple(contract.labels) for name, contract in contracts.items()
                if contract.labels}
    return ContractLabels(declared) if declared else no_labels


class _LabellingLookup(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def key(self) -> _Expression: ...
    @property
    def labels(self) -> Sequence[tuple[str, _Expression]]: ...


def record_labels(lookups: Sequence[_LabellingLookup],
                  variables: Mapping[str, Any]) -> list[LabelledRecord]:
    """The records this call's look-ups found that carry a label of their look-up (each
    label CEL over ``record``, ``args`` and ``actor``; one that fails gives the label), with
    the look-up's key. Only records the actor may see are bound, so only those count."""
    labelled: list[LabelledRecord] = []
    for lookup in lookups:
        bound = variables.get(lookup.name)
        records = ([bound] if isinstance(bound, Mapping) else
            [item for item in bound if isinstance(item, Mapping)] if isinstance(bound, list)
            else [])
        if not lookup.labels or not records:
            continue
        try:
            key = lookup.key.evaluate(variables)  # as the look-up evaluated it
        except _FAILURES:
            key = None
        for record in records:
            given = {"record": record, "args": variables.get("args"),
                     "actor": variables.get("actor")}
            labels = tuple(name for name, expression in lookup.labels
                           if _holds(expression, given))
            if labels:
                labelled.append(LabelledRecord(record, key, labels))
    return labelled


# by the configuration's id, with a weak reference that tells a reused id from its owner
_MADE: dict[int, tuple[weakref.ref[Any], Labeller]] = {}


def configuration_labeller(config: Any) -> Labeller:
    """``labeller_of(config.contracts)``, made once per configuration: the conversation's
    index of reads is kept per labeller, so every tool of one configuration shares it."""
    found = _MADE.get(id(config))
    if found is not None and found[0]() is config:
        return found[1]
    made = labeller_of(config.contracts)
    for key in [key for key, (owner, _) in _MADE.items() if owner() is None]:
        del _MADE[key]
    _MADE[id(config)] = (weakref.ref(config), made)
    return made
