"""Which fields a ``has()`` has made sure of, at each point of an expression.

Reading an optional field that is absent is an error, so a rule reading one should test
``has()`` first. A ``has(a.b)`` guards exactly ``a.b`` (not ``a``, which it reads, nor
``a.b.c``), and only where its answer decides: CEL's ``&&`` is false as soon as one side
is false, whatever errors the others raise, and ``||`` is true as soon as one side is true,
so

- ``has(p)`` as one of the operands of an ``&&`` chain guards ``p`` in all the others
  (on either side: ``p > 0 && has(p)`` is as safe as ``has(p) && p > 0``);
- ``!has(p)`` as one of the operands of an ``||`` chain guards ``p`` in all the others;
- the condition of ``c ? x : y`` guards ``x`` with what ``c && x`` would, and ``y`` with
  what ``!c || y`` would.

``has(p) || p > 0`` guards nothing: when ``p`` is absent, ``p > 0`` decides, and fails.
Paths are dotted names (``args.meta.tag``, ``i.qty`` for a macro's variable).
"""

from __future__ import annotations

from callgate_rules.cel import syntax


def tested(node: syntax.Node) -> str | None:
    """``a.b`` for ``has(a.b)``, else ``None``."""
    if isinstance(node, syntax.Macro) and node.name == "has" and len(node.args) == 1:
        return syntax.qualified_name(node.args[0])
    return None


def _negated(node: syntax.Node) -> syntax.Node | None:
    if isinstance(node, syntax.Call) and node.function == "!_" and len(node.args) == 1:
        return node.args[0]
    return None


def _operands(node: syntax.Node, operator: str) -> list[syntax.Node]:
    """The operands of a chain of ``operator`` (``_&&_``), flattened."""
    found: list[syntax.Node] = []
    pending = [node]
    while pending:
        current = pending.pop()
        if (isinstance(current, syntax.Call) and current.function == operator
                and current.target is None):
            pending.extend(reversed(current.args))
        else:
            found.append(current)
    return found


def when_true(node: syntax.Node) -> frozenset[str]:
    """What is present wherever ``node`` being true decides: its ``has()`` conjuncts."""
    return frozenset(path for operand in _operands(node, "_&&_")
                     if (path := tested(operand)) is not None)


def when_false(node: syntax.Node) -> frozenset[str]:
    """What is present wherever ``node`` being false decides: its ``!has()`` disjuncts."""
    paths: set[str] = set()
    for operand in _operands(node, "_||_"):
        inner = _negated(operand)
        path = tested(inner) if inner is not None else None
        if path is not None:
            paths.add(path)
    return frozenset(paths)
