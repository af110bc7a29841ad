"""Labels a configuration gives the results of its reads (a contract's ``spec.labels``).

A contract of a read declares, per label, a CEL expression over ``result`` (the tool's
result as the conversation holds it: parsed JSON, else its text) and ``args`` (the
arguments of the model's call that produced it)::

    labels:                                  # excerpt of a ToolContract spec
      confidential: "true"                   # every result of this read
      untrusted: 'args.file_path.startsWith("downloads/")'

``labeller_of`` turns those into the function ``origins`` asks of every tool result in the
conversation. A label whose expression fails on a result (a field the result lacks, a text
where JSON was expected) is *given*: a label marks caution, and a result that cannot be
read is no reason to drop it. A label is evidence of where a value appeared, never proof
of where it flowed.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.integrations.provenance.origins import Labeller, no_labels


class _Expression(Protocol):
    def evaluate(self, variables: Mapping[str, Any]) -> Any: ...


class _Labelled(Protocol):
    @property
    def labels(self) -> Sequence[tuple[str, _Expression]]: ...


def labeller_of(contracts: Mapping[str, _Labelled]) -> Labeller:
    """The labels of each read's results, from the contracts that declare any."""
    declared = {name: tuple(contract.labels) for name, contract in contracts.items()
                if contract.labels}
    if not declared:
        return no_labels

    def labels(tool: str, result: Any, arguments: Any) -> tuple[str, ...]:
        given = []
        for label, expression in declared.get(tool, ()):
            try:
                holds = expression.evaluate({"result": result, "args": arguments})
            except (CelEvaluationError, TypeError, ValueError, KeyError, AttributeError,
                    RecursionError):
                holds = True  # cannot be read: the label stays (see the module docstring)
            if holds is not False:
                given.append(label)
        return tuple(given)

    return labels


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
