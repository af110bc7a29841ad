"""Named CEL definitions shared by every rule of a configuration: constants, tables and small
functions of their arguments, declared once (a ``Definitions`` document) instead of written
out in every rule that needs them::

    max_refund: 500.0                                   # a constant
    fee_by_tier: '{"gold": 0.0, "silver": 2.5}'         # a table
    within_limit(amount, tier): amount <= max_refund - fee_by_tier[tier]   # a function

Definitions are substitution over syntax trees, so that nothing downstream needs to know of
them: each definition is parsed once; ``Definitions.expand`` replaces, in a rule's tree,
every name of a constant by the constant's tree and every call of a function by the
function's tree with its parameters replaced by the call's argument trees, before the rule
is compiled. The compiler, the type checker (lint) and the field-path analysis then see
what the rule really reads: ``within_limit(args.amount, actor.tier)`` reads ``args.amount``
and ``actor.tier``.

Substitution is hygienic: a function's own iteration variables are renamed when an argument
uses the same name, and a rule's iteration variable of the same name as a definition hides
the definition. Substituted trees take the place of the reference in the rule, so an error
in a definition's body is reported where the rule uses it.

What is refused, with the definition's name (the document compiler adds file:line): a
name taken by a variable, a macro or another definition, a parameter given twice, a cycle
(``a`` uses ``b`` uses ``a``), a function called with the wrong number of arguments, a
function used without a call or a constant called, and an expansion beyond ``MAX_NODES``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from callgate_rules.cel import syntax
from callgate_rules.cel.errors import CelCompileError, CelSyntaxError
from callgate_rules.cel.parser import (
    MACRO_VARIABLES,  # the parser's own table
    parse,
)

# What a definition may not be called: the variables every rule reads, and the macros.
RESERVED = frozenset({
    "args", "actor", "session", "now", "tool", "provenance", "history", "record", "result",
    "origins", "reads", "intent",
    "has", "all", "exists", "exists_one", "existsOne", "map", "filter", "cel",
    "true", "false", "null", "in",
})
# An expansion larger than this is refused: a function that uses its parameter twice,
# called inside itself through other functions, would otherwise grow exponentially.
MAX_NODES = 20_000


@dataclass(frozen=True)
class Definition:
    """One named definition: ``parameters`` is None for a constant or a table, the
    parameter names for a function."""

    name: str
    expression: str
    parameters: tuple[str, ...] | None = None

    @property
    def signature(self) -> str:
        if self.parameters is None:
            return self.name
        return f"{self.name}({', '.join(self.parameters)})"


@dataclass(frozen=True)
class Problem:
    """What is wrong with a definition: ``line``/``column`` within its expression."""

    name: str
    message: str
    line: int = 1
    column: int = 1


class Definitions:
    """A configuration's definitions, each parsed once and expanded in the others; build
    with ``Definitions.of``, which also says what is wrong with any of them."""

    def __init__(self, bodies: Mapping[str, syntax.Node],
                 parameters: Mapping[str, tuple[str, ...] | None],
                 uses: Mapping[str, frozenset[str]] | None = None) -> None:
        self.bodies = dict(bodies)  # name → its tree, other definitions already expanded
        self.parameters = dict(parameters)
        self.uses = dict(uses or {})  # name → the definitions its body uses
        self.used: set[str] = set()  # what the trees expanded so far used, directly or not

    def mark_used(self, name: str) -> None:
        pending = [name]
        while pending:
            current = pending.pop()
            if current not in self.used:
                self.used.add(current)
                pending.extend(self.uses.get(current, ()))

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.bodies)

    @classmethod
    def of(cls, definitions: Iterable[Definition]) -> tuple[Definitions, list[Problem]]:
        """The definitions that are sound, and a problem for each one that is not."""
        problems: list[Problem] = []
        declared: dict[str, Definition] = {}
        trees: dict[str, syntax.Node] = {}
        for definition in definitions:
            problem = _naming_problem(definition, declared)
            if problem is not None:
                problems.append(problem)
                continue
            try:
                trees[definition.name] = parse(definition.expression)
            except CelSyntaxError as error:
                problems.append(Problem(definition.name, str(error), error.line, error.column))
                continue
            declared[definition.name] = definition
        parameters = {name: d.parameters for name, d in declared.items()}
        bodies: dict[str, syntax.Node] = {}
        uses: dict[str, frozenset[str]] = {}
        for name in _in_dependency_order(trees, parameters, problems):
            uses[name] = frozenset(_used(trees[name], trees, frozenset(parameters[name] or ())))
            broken = sorted(uses[name] - set(bodies))
            if broken:
                problems.append(Problem(name, f"definition {name!r} uses {', '.join(broken)}, "
                                              "which has an error"))
                continue
            expander = _Expander(cls(bodies, parameters))
            try:
                bodies[name] = expander.expand(
                    trees[name], frozenset(parameters[name] or ()))
            except CelCompileError as error:
                problems.append(Problem(name, str(error), error.line, error.column))
        return cls(bodies, {name: parameters[name] for name in bodies},
                   {name: uses[name] for name in bodies}), problems

    def expand(self, tree: syntax.Node) -> syntax.Node:
        """``tree`` with every use of a definition replaced by what it stands for; raises
        ``CelCompileError`` at the place of a wrong use."""
        if not self.bodies:
            return tree
        return _Expander(self).expand(tree, frozenset())


def _naming_problem(definition: Definition, declared: Mapping[str, Definition]) -> Problem | None:
    name = definition.name
    if name in RESERVED:
        return Problem(name, f"{name!r} is a name every rule already has (a variable or a "
                             "macro); choose another")
    if name in declared:
        return Problem(name, f"{name!r} is defined twice; the first is "
                             f"{declared[name].signature}")
    parameters = definition.parameters or ()
    for index, parameter in enumerate(parameters):
        if parameter in parameters[:index]:
            return Problem(name, f"{definition.signature}: parameter {parameter!r} is given "
                                 "twice")
        if parameter in RESERVED:
            return Problem(name, f"{definition.signature}: parameter {parameter!r} would hide "
                                 "the variable of that name; choose another")
    return None


def _in_dependency_order(trees: Mapping[str, syntax.Node],
                         parameters: Mapping[str, tuple[str, ...] | None],
                         problems: list[Problem]) -> list[str]:
    """The definitions, each after those it uses; a problem for each one in a cycle (and
    those that use one)."""
    uses = {name: _used(tree, trees, frozenset(parameters[name] or ()))
            for name, tree in trees.items()}
    order: list[str] = []
    state: dict[str, str] = {}  # "visiting" or "done" or "broken"

    def visit(name: str, path: tuple[str, ...]) -> bool:
        if state.get(name) == "done":
            return True
        if state.get(name) in ("visiting", "broken"):
            if state.get(name) == "visiting":
                cycle = " → ".join((*path[path.index(name):], name))
                problems.append(Problem(name, f"definition {name!r} uses itself: {cycle}"))
                state[name] = "broken"
            return False
        state[name] = "visiting"
        sound = all([visit(used, (*path, name)) for used in sorted(uses[name])])
        if state[name] == "broken":
            return False
        if not sound:
            problems.append(Problem(name, f"definition {name!r} uses a definition that is "
                                          "in a cycle"))
            state[name] = "broken"
            return False
        state[name] = "done"
        order.append(name)
        return True

    for name in trees:
        visit(name, ())
    return order


def _used(tree: syntax.Node, names: Mapping[str, syntax.Node],
          bound: frozenset[str]) -> set[str]:
    """The definitions ``tree`` refers to (not counting names its own macros bind, or the
    function's parameters)."""
    found: set[str] = set()
    pending: list[tuple[syntax.Node, frozenset[str]]] = [(tree, bound)]
    while pending:
        node, locals_ = pending.pop()
        if isinstance(node, syntax.Ident) and node.name in names and node.name not in locals_:
            found.add(node.name)
        elif (isinstance(node, syntax.Call) and node.target is None and node.function in names
                and node.function not in locals_):
            found.add(node.function)
        inner = locals_ | _binders(node) if isinstance(node, syntax.Macro) else locals_
        pending.extend((child, inner) for child in syntax.children(node))
    return found


def _binders(macro: syntax.Macro) -> frozenset[str]:
    """The iteration (or ``cel.bind``) variables a macro introduces."""
    if macro.name == "cel.bind":
        count = 1
    else:
        count = MACRO_VARIABLES.get(macro.name, {}).get(len(macro.args), 0)
    return frozenset(arg.name for arg in macro.args[:count] if isinstance(arg, syntax.Ident))



class _Expander:
    """One expansion of a tree: counts the nodes it makes, refuses past ``MAX_NODES``."""

    def __init__(self, definitions: Definitions) -> None:
        self.definitions = definitions
        self.made = 0

    def expand(self, node: syntax.Node, locals_: frozenset[str]) -> syntax.Node:
        self.made += 1
        if self.made > MAX_NODES:
            raise CelCompileError(f"the definitions used here expand to more than {MAX_NODES} "
                                  "nodes; simplify them", node.at.line, node.at.column)
        bodies, parameters = self.definitions.bodies, self.definitions.parameters
        if isinstance(node, syntax.Ident) and node.name in bodies and node.name not in locals_:
            if parameters[node.name] is not None:
                raise CelCompileError(
                    f"{node.name} is a function of ({', '.join(parameters[node.name] or ())}); "
                    f"call it as {node.name}(...)", node.at.line, node.at.column)
            self.definitions.mark_used(node.name)
            return _placed(bodies[node.name], node.at)
        if (isinstance(node, syntax.Call) and node.target is None and node.function in bodies
                and node.function not in locals_):
            self.definitions.mark_used(node.function)
            return self.call(node, locals_)
        if isinstance(node, syntax.Macro):
            return _in_macro(node, locals_, self.expand)
        return _rebuilt(node, lambda child: self.expand(child, locals_))

    def call(self, node: syntax.Call, locals_: frozenset[str]) -> syntax.Node:
        name = node.function
        declared = self.definitions.parameters[name]
        if declared is None:
            raise CelCompileError(f"{name} is a constant, not a function; write {name} without "
                                  "arguments", node.at.line, node.at.column)
        if len(node.args) != len(declared):
            raise CelCompileError(
                f"{name}({', '.join(declared)}) takes {len(declared)} argument(s), "
                f"{len(node.args)} given", node.at.line, node.at.column)
        arguments = [self.expand(arg, locals_) for arg in node.args]
        free = set().union(*(_names_in(arg) for arg in arguments)) if arguments else set()
        body = _hygienic(self.definitions.bodies[name], free)
        substituted = _substituted(_placed(body, node.at), dict(zip(declared, arguments,
                                                                    strict=True)))
        self.made += sum(1 for _ in syntax.walk(substituted))
        if self.made > MAX_NODES:
            raise CelCompileError(f"the definitions used here expand to more than {MAX_NODES} "
                                  "nodes; simplify them", node.at.line, node.at.column)
        return substituted


def _in_macro(node: syntax.Macro, hidden: frozenset[str],
              change: Callable[[syntax.Node, frozenset[str]], syntax.Node]) -> syntax.Node:
    """``node`` with ``change(child, names hidden there)`` applied to each sub-expression
    but the macro's own variables: a macro's variables hide outer names in its body (for
    ``cel.bind``, in its body only, not in its init)."""
    binders = _binders(node)
    inner = hidden | binders
    target = change(node.target, hidden) if node.target is not None else None
    if node.name == "cel.bind":
        args: tuple[syntax.Node, ...] = (node.args[0], change(node.args[1], hidden),
                                         change(node.args[2], inner))
    else:
        count = len(binders)
        args = (*node.args[:count], *(change(arg, inner) for arg in node.args[count:]))
    return replace(node, target=target, args=args)


def _rebuilt(node: syntax.Node, change: Callable[[syntax.Node], syntax.Node]) -> syntax.Node:
    """``node`` with each direct sub-expression replaced by ``change(child)``."""
    if isinstance(node, syntax.Select):
        return replace(node, operand=change(node.operand))
    if isinstance(node, syntax.Index):
        return replace(node, operand=change(node.operand), index=change(node.index))
    if isinstance(node, syntax.Call | syntax.Macro):
        return replace(node, target=change(node.target) if node.target is not None else None,
                       args=tuple(change(arg) for arg in node.args))
    if isinstance(node, syntax.ListLiteral):
        return replace(node, elements=tuple(change(e) for e in node.elements))
    if isinstance(node, syntax.MapLiteral):
        return replace(node, entries=tuple(
            replace(entry, key=change(entry.key), value=change(entry.value))
            for entry in node.entries))
    if isinstance(node, syntax.StructLiteral):
        return replace(node, fields=tuple(replace(entry, value=change(entry.value))
                                          for entry in node.fields))
    return node


def _placed(tree: syntax.Node, at: syntax.Position) -> syntax.Node:
    """``tree`` with every node placed at ``at``: a definition's body stands where it is
    used, so what goes wrong in it is reported there."""
    def place(node: syntax.Node) -> syntax.Node:
        moved = _rebuilt(node, place)
        return replace(moved, at=at)
    return place(tree)


def _names_in(tree: syntax.Node) -> set[str]:
    return {node.name for node in syntax.walk(tree) if isinstance(node, syntax.Ident)}


def _hygienic(body: syntax.Node, taken: set[str]) -> syntax.Node:
    """``body`` with each macro variable whose name an argument uses renamed, so that the
    argument, once substituted, still means what it meant at the call."""
    def rename(node: syntax.Node, renamed: Mapping[str, str]) -> syntax.Node:
        if isinstance(node, syntax.Ident):
            return replace(node, name=renamed[node.name]) if node.name in renamed else node
        if isinstance(node, syntax.Macro):
            clashing = _binders(node) & taken
            inner = {**renamed, **{name: _fresh(name, taken) for name in sorted(clashing)}}
            target = rename(node.target, renamed) if node.target is not None else None
            if node.name == "cel.bind":  # the init sees the outer names
                args: tuple[syntax.Node, ...] = (rename(node.args[0], inner),
                                                 rename(node.args[1], renamed),
                                                 rename(node.args[2], inner))
            else:
                args = tuple(rename(arg, inner) for arg in node.args)
            return replace(node, target=target, args=args)
        return _rebuilt(node, lambda child: rename(child, renamed))
    return rename(body, {}) if taken else body


def _fresh(name: str, taken: set[str]) -> str:
    """A new name for ``name``, not in ``taken`` (and now taken): the same on every run."""
    candidate = next(f"{name}_{n}" for n in itertools.count(1) if f"{name}_{n}" not in taken)
    taken.add(candidate)
    return candidate


def _substituted(body: syntax.Node, arguments: Mapping[str, syntax.Node]) -> syntax.Node:
    """``body`` with each free use of a parameter replaced by its argument's tree."""
    def substitute(node: syntax.Node, hidden: frozenset[str]) -> syntax.Node:
        if isinstance(node, syntax.Ident) and node.name in arguments and node.name not in hidden:
            return arguments[node.name]
        if isinstance(node, syntax.Macro):
            return _in_macro(node, hidden, substitute)
        return _rebuilt(node, lambda child: substitute(child, hidden))
    return substitute(body, frozenset())
