"""The intermediate form → Python source for one ``evaluate(variables)`` function.

The generated code is plain Python: field selection is a subscript, comparisons with a
literal are inlined behind an exact ``type(...) is`` check (falling back to ``runtime`` for
any other operand), ``?:`` and ``!`` are conditional expressions, and every other operator
is one call to a ``runtime`` function bound in the code's globals.

CEL's ``&&`` / ``||`` need statements (an error on one side is held until the other side has
had its say), and so do macros (a loop) and ``has()`` of a computed operand. Each of those
becomes a small generated function; a top-level chain (most rules are one) is inlined in
``evaluate`` itself. Python exceptions raised by inlined fast paths (``KeyError`` for a
missing key, ``TypeError`` for subscripting a non-map) count as CEL errors wherever errors
are absorbed, and ``evaluate`` turns whatever escapes into ``CelEvaluationError``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from callgate_rules.cel.compiler import runtime
from callgate_rules.cel.compiler.ir import (
    Apply,
    Bind,
    Call,
    Compare,
    Comprehension,
    Conditional,
    Const,
    Fail,
    Has,
    ListLiteral,
    Local,
    Logic,
    MapLiteral,
    Member,
    Node,
    Not,
    Select,
    Var,
    children,
    free_locals,
    loop_cost,
    variables_read,
)
from callgate_rules.cel.cost import LIST_SCANS, STRING_SCANS

_RUNTIME_NAMESPACE = runtime.NAMESPACE

_SLOW_COMPARISONS = {
    "==": "_equals",
    "!=": "_not_equals",
    "<": "_less",
    "<=": "_less_equal",
    ">": "_greater",
    ">=": "_greater_equal",
}
# Nesting of one generated expression before the rest moves into a helper function: each
# level adds at most three brackets, and CPython's parser nests 200.
_SPILL_DEPTH = 40
# In an expression that is metered (``runtime.cost``), the operands of these calls are charged
# by their size before the call: the library's scans by their names (``cel.cost``'s tables),
# the runtime's string functions by their ``Call`` names.
_SCANS = LIST_SCANS | STRING_SCANS
_RUNTIME_SCANS = frozenset({"contains", "starts_with", "ends_with", "matches",
                            "matches_compiled", "to_string", "to_bytes"})
# Literal types whose comparison can be inlined behind ``type(x) is T``.
_INLINE_LITERAL_TYPES = {str: "str", int: "int", float: "float", bool: "bool", bytes: "bytes"}


class _Function:
    """One generated Python function: its parameters and body lines."""

    def __init__(self, name: str, parameters: list[str]) -> None:
        self.name = name
        self.parameters = parameters
        self.body: list[str] = []
        self.temporary_numbers = itertools.count(1)

    def temporary(self, prefix: str = "_t") -> str:
        return f"{prefix}{next(self.temporary_numbers)}"

    def source(self) -> str:
        lines = [f"def {self.name}({', '.join(self.parameters)}):"]
        lines += [f"    {line}" for line in self.body]
        return "\n".join(lines)


class Program:
    """The generated source and the globals it runs with.

    ``body``: the lines of ``evaluate`` inside its ``try``, for a caller that inlines the
    expression in its own generated code (the express lane): they read ``variables``,
    ``return`` the value and raise one of ``_FAILURES`` for a CEL error, and bind no local
    but ``_``-prefixed temporaries. ``None`` for a top-level macro, whose ``return`` sits in
    a loop. Constants and helper functions are numbered across the process (or tagged: see
    ``generate``), so the globals of several programs' bodies can be merged (``_NAMES``,
    which differs, is read only by ``evaluate``'s own error handling, never by a body)."""

    def __init__(self, source: str, namespace: dict[str, Any], body: list[str] | None) -> None:
        self.source = source
        self.namespace = namespace
        self.body = body


# Shared by every untagged generator, so that no two programs bind one name to different
# values.
_function_numbers = itertools.count(1)
_constant_numbers = itertools.count(1)


def generate(root: Node, tag: str = "") -> Program:
    """``tag``: a name for the program unique to what it was generated from (the load
    cache's digest of the expression); its globals are numbered within the program and end
    in the tag, so code generated in another process can be merged with this one's as is.
    Without a tag they are numbered across the process."""
    return _Generator(tag).program(root)


class _Generator:
    def __init__(self, tag: str = "") -> None:
        self.suffix = f"_{tag}" if tag else ""
        self.function_numbers = itertools.count(1) if tag else _function_numbers
        self.constant_numbers = itertools.count(1) if tag else _constant_numbers
        self.namespace: dict[str, Any] = dict(_RUNTIME_NAMESPACE)
        self.functions: list[_Function] = []
        self.depth = 0  # how deeply the expression being generated nests
        # whether the code charges the cost meter (``_metered``)
        self.metered = False

    def program(self, root: Node) -> Program:
        self.namespace["_NAMES"] = variables_read(root)
        main = _Function("evaluate", ["variables"])
        self.metered = _metered(root)
        body = self.returning(root, main)
        if self.metered:  # a fresh cost budget (runtime.cost)
            body = ["_start_metering()", *body]
        main.body = [
            "try:",
            *(f"    {line}" for line in body),
            "except _FAILURES as _caught:",
            "    raise _translate(_caught, variables, _NAMES) from None",
        ]
        source = "\n\n".join(function.source() for function in [*self.functions, main])
        return Program(source + "\n", self.namespace,
                       None if isinstance(root, Comprehension | Bind) else body)

    # Statements ------------------------------------------------------------------------------

    def returning(self, node: Node, function: _Function) -> list[str]:
        """Lines that make ``function`` return the value of ``node`` (or raise)."""
        if isinstance(node, Logic):
            return self.logic(node, function)
        if isinstance(node, Comprehension):
            return self.comprehension(node, function)
        if isinstance(node, Bind):
            return self.bind(node, function)
        if isinstance(node, Has) and _select_path(node.operand) is None:
            operand = self.expression(node.operand, function)
            return [
                "try:",
                f"    _value = {operand}",
                "except _CostExceeded:",
                "    raise",
                "except _FAILURES:",
                "    return False",
                f"return _has_field(_value, (), {node.field!r})",
            ]
        return [f"return {self.expression(node, function)}"]

    def logic(self, node: Logic, function: _Function,
              settle: Callable[[str], list[str]] | None = None) -> list[str]:
        # An operand equal to the deciding value (false for &&, true for ||) settles the
        # chain at once; otherwise the chain is the other value only if every operand is,
        # and an error or non-bool operand is reported. ``settle``: the lines that end the
        # chain with a value, when it is written out where a return would not do (a
        # macro's loop: ``predicate``); the chain then ends with its last value's.
        deciding, neutral = ("True", "False") if node.operator == "||" else ("False", "True")
        lines: list[str] = []
        outcomes: list[str] = []
        for operand in node.operands:
            outcome = function.temporary("_r")
            outcomes.append(outcome)
            value = self.expression(operand, function)
            if _cannot_fail(operand):
                lines.append(f"{outcome} = {value}")
            else:
                lines += [
                    "try:",
                    f"    {outcome} = {value}",
                    "except _CostExceeded:",
                    "    raise",
                    "except _FAILURES as _caught:",
                    f"    {outcome} = _caught",
                ]
            lines += [f"if {outcome} is {deciding}:",
                      *(f"    {line}" for line in (settle or _returns)(deciding))]
        all_neutral = " and ".join(f"{outcome} is {neutral}" for outcome in outcomes)
        failure = f"raise _logic_failure('_{node.operator}_', ({', '.join(outcomes)},))"
        if settle is not None:
            return [*lines, f"if not ({all_neutral}):", f"    {failure}", *settle(neutral)]
        return [*lines, f"if {all_neutral}:", f"    return {neutral}", failure]

    def comprehension(self, node: Comprehension, function: _Function) -> list[str]:
        variable = node.variable
        range_value = self.expression(node.range, function)
        # each loop is charged before it runs: its elements times one pass of its body
        per_element = loop_cost(node)
        if node.variable2 is not None:
            loop = (f"for {variable}, {node.variable2} in "
                    f"_metered_pairs({range_value}, {per_element}):")
        else:
            loop = f"for {variable} in _metered_range({range_value}, {per_element}):"
        skip = "True" if node.macro == "all" else "False"  # what leaves an element out
        predicate = (self.predicate(node.predicate, function, skip)
                     if node.predicate is not None else None)
        if node.macro in ("all", "exists"):
            deciding, neutral = ("True", "False") if node.macro == "exists" else ("False", "True")
            # Errors are held: a later deciding element still decides (CEL absorption).
            return [
                "_failure = None",
                loop,
                "    try:",
                *(f"        {line}" for line in predicate or ()),
                "    except _CostExceeded:",  # never absorbed: the budget is spent
                "        raise",
                "    except _FAILURES as _caught:",
                "        _failure = _failure or _caught",
                "        continue",
                # most elements decide nothing: one test for them
                f"    if _outcome is not {neutral}:",
                f"        if _outcome is {deciding}:",
                f"            return {deciding}",
                f"        _failure = _failure or _no_overload({node.macro!r}, _outcome)",
                "if _failure is not None:",
                "    raise _failure",
                f"return {neutral}",
            ]
        if node.macro == "exists_one":
            return [
                "_count = 0",
                loop,
                *(f"    {line}" for line in predicate or ()),
                "    if _outcome is True:",
                "        _count += 1",
                "    elif _outcome is not False:",
                "        _not_bool('exists_one', _outcome)",
                "return _count == 1",
            ]
        element = variable if node.macro == "filter" else None
        if element is None:
            assert node.transform is not None
            element = self.expression(node.transform, function)
        mapping = node.macro in ("transformMap", "transformMapEntry")
        lines = ["_result = {}" if mapping else "_result = []", loop]
        if predicate is not None:
            lines += [
                *(f"    {line}" for line in predicate),
                "    if _outcome is False:",
                "        continue",
                "    if _outcome is not True:",
                f"        _not_bool({node.macro!r}, _outcome)",
            ]
        if node.macro == "transformMap":
            return [*lines, f"    _result[{variable}] = {element}", "return _result"]
        if node.macro == "transformMapEntry":
            return [*lines, f"    _entry = {element}",
                    "    if type(_entry) is not dict:",
                    "        raise _no_overload('transformMapEntry', _entry)",
                    "    for _key in _entry:",
                    "        if _key in _result:",
                    "            _fail(f'transformMapEntry: duplicate key {_key!r}')",
                    "    _result.update(_entry)",
                    "return _result"]
        return [*lines, f"    _result.append({element})", "return _result"]

    def predicate(self, node: Node, function: _Function, skip: str) -> list[str]:
        """Lines that set ``_outcome`` to a macro's predicate in each pass of its loop, or
        go on to the next element when it is ``skip`` (the value that leaves an element
        out). A chain of ``&&`` or ``||`` is written out in the loop, not called (a call an
        element cost about as much as the chain): a chain settled by ``skip`` goes on to
        the next element at once; any other is written in a loop of one pass, left with
        its value. The chain's own lines hold no loop (operands that do are calls)."""
        if not isinstance(node, Logic):
            return [f"_outcome = {self.expression(node, function)}"]
        deciding = "True" if node.operator == "||" else "False"
        if deciding == skip:
            return self.logic(node, function, lambda value: (
                ["continue"] if value == skip else [f"_outcome = {value}"]))
        return ["while True:", *(f"    {line}" for line in self.logic(
            node, function, lambda value: [f"_outcome = {value}", "break"]))]

    def bind(self, node: Bind, function: _Function) -> list[str]:
        init = self.expression(node.init, function)
        if node.optional is None:
            return [f"{node.variable} = {init}",
                    f"return {self.expression(node.body, function)}"]
        macro = "optMap" if node.optional == "map" else "optFlatMap"
        lines = [f"_operand = _optional_operand({macro!r}, {init})",
                 "if not _operand.present:",
                 "    return _operand",
                 f"{node.variable} = _operand.value"]
        body = self.expression(node.body, function)
        if node.optional == "map":
            return [*lines, f"return _Optional({body}, True)"]
        return [*lines, f"return _flat_map_result({body})"]

    def helper_call(self, node: Node, kind: str) -> str:
        """Move ``node`` into its own generated function; return the call expression."""
        parameters = ["variables", *sorted(free_locals(node))]
        helper = _Function(f"_{kind}_{next(self.function_numbers)}{self.suffix}", parameters)
        helper.body = self.returning(node, helper)
        self.functions.append(helper)
        return f"{helper.name}({', '.join(parameters)})"

    # Expressions -----------------------------------------------------------------------------

    def expression(self, node: Node, function: _Function) -> str:
        """A Python expression (atomic or parenthesised) that evaluates ``node``. Past
        ``_SPILL_DEPTH`` levels of nesting the rest moves into a helper function, so the
        generated code stays within what CPython's parser nests (200 brackets)."""
        if self.depth >= _SPILL_DEPTH and not isinstance(node, Const | Var | Local | Fail):
            self.depth, outer = 0, self.depth
            try:
                return self.helper_call(node, "part")
            finally:
                self.depth = outer
        self.depth += 1
        try:
            return self.nested_expression(node, function)
        finally:
            self.depth -= 1

    def nested_expression(self, node: Node, function: _Function) -> str:
        if isinstance(node, Const):
            return self.constant(node.value)
        if isinstance(node, Fail):
            return f"_fail({node.message!r})"
        if isinstance(node, Var):
            return f"variables[{node.name!r}]"
        if isinstance(node, Local):
            return node.name
        if isinstance(node, Select):
            return f"{self.expression(node.operand, function)}[{node.field!r}]"
        if isinstance(node, Has):
            return self.has(node, function)
        if isinstance(node, Not):
            value = function.temporary()
            operand = self.expression(node.operand, function)
            return (
                f"(False if ({value} := {operand}) is True else True if {value} is False "
                f"else _not_bool('!_', {value}))"
            )
        if isinstance(node, Conditional):
            test = function.temporary()
            condition = self.expression(node.test, function)
            then = self.expression(node.then, function)
            otherwise = self.expression(node.otherwise, function)
            return (
                f"({then} if ({test} := {condition}) is True else {otherwise} if {test} is False"
                f" else _not_bool('_?_:_', {test}))"
            )
        if isinstance(node, Compare):
            return self.compare(node, function)
        if isinstance(node, Member):
            return self.member(node, function)
        if isinstance(node, Call):
            sort = node.function == "sort_by"  # its keys' loop is charged; the sort here
            arguments = self.arguments(node.arguments, function,
                                       sort or node.function in _RUNTIME_SCANS, sort=sort)
            return f"_{node.function}({', '.join(arguments)})"
        if isinstance(node, Apply):
            arguments = self.arguments(node.arguments, function, node.name in _SCANS,
                                       sort=node.name == "sort")
            return f"{self.constant(node.implementation)}({', '.join(arguments)})"
        if isinstance(node, ListLiteral):
            items = [self.expression(item, function) for item in node.items]
            if node.optional:
                pairs = "".join(f"({number in node.optional}, {item}), "
                                for number, item in enumerate(items))
                return f"_make_list_with_optionals(({pairs}))"
            return f"[{', '.join(items)}]"
        if isinstance(node, MapLiteral):
            if node.optional:
                triples = "".join(
                    f"({number in node.optional}, {self.expression(key, function)}, "
                    f"{self.expression(value, function)}), "
                    for number, (key, value) in enumerate(node.entries))
                return f"_make_map_with_optionals(({triples}))"
            entries = "".join(
                f"({self.expression(key, function)}, {self.expression(value, function)}), "
                for key, value in node.entries
            )
            return f"_make_map(({entries}))"
        if isinstance(node, Logic):
            return self.helper_call(node, "logic")
        if isinstance(node, Bind):
            return self.helper_call(node, "bind")
        return self.helper_call(node, node.macro)

    def arguments(self, nodes: tuple[Node, ...], function: _Function, scans: bool,
                  sort: bool) -> list[str]:
        """The arguments of a call; in metered code, those of a call that scans a value are
        charged by their size first (``runtime.cost.scanned``; literals are bounded by the
        expression itself, so not charged)."""
        arguments = [self.expression(argument, function) for argument in nodes]
        if not (self.metered and scans):
            return arguments
        charged = "_scanned_sort" if sort else "_scanned"
        return [argument if isinstance(node, Const) or (sort and number)
                else f"{charged if number == 0 else '_scanned'}({argument})"
                for number, (node, argument) in enumerate(zip(nodes, arguments, strict=True))]

    def has(self, node: Has, function: _Function) -> str:
        found = _select_path(node.operand)
        if found is None:
            return self.helper_call(node, "has")
        root, path = found
        root_value = (
            f"variables.get({root.name!r}, _ABSENT)" if isinstance(root, Var) else root.name
        )
        if path:
            return f"_has_field({root_value}, {path!r}, {node.field!r})"
        value = function.temporary()
        return (
            f"({node.field!r} in {value} if type({value} := {root_value}) is dict "
            f"else _has_field({value}, (), {node.field!r}))"
        )

    def compare(self, node: Compare, function: _Function) -> str:
        operator, slow = node.operator, _SLOW_COMPARISONS[node.operator]
        value = function.temporary()
        literal, other = _literal_side(node)
        if literal is not None and other is not None:
            constant = self.constant(literal.value)
            operand = self.expression(other, function)
            if literal.value is None and operator in ("==", "!="):
                return (
                    f"({operator == '=='} if ({value} := {operand}) is None "
                    f"else {slow}({value}, None))"
                )
            type_name = _INLINE_LITERAL_TYPES.get(type(literal.value))
            if type_name is not None:
                if other is node.left:
                    fast, slow_call = f"{value} {operator} {constant}", f"{value}, {constant}"
                else:
                    fast, slow_call = f"{constant} {operator} {value}", f"{constant}, {value}"
                return (
                    f"({fast} if type({value} := {operand}) is {type_name} "
                    f"else {slow}({slow_call}))"
                )
        left = self.expression(node.left, function)
        right = self.expression(node.right, function)
        right_value = function.temporary()
        if self.metered and operator in ("==", "!="):  # lists and maps: charged by size
            slow = "_metered_equals" if operator == "==" else "_metered_not_equals"
        same_kind = "_SCALAR" if operator in ("==", "!=") else "_ORDERED"
        return (
            f"({value} {operator} {right_value} if type({value} := {left}) is "
            f"type({right_value} := {right}) and type({value}) in {same_kind} "
            f"else {slow}({value}, {right_value}))"
        )

    def member(self, node: Member, function: _Function) -> str:
        container = node.container
        if isinstance(container, ListLiteral) and all(
            isinstance(item, Const) for item in container.items
        ):
            values = tuple(item.value for item in container.items if isinstance(item, Const))
            elements = self.constant(values)
            item = self.expression(node.item, function)
            if values and all(type(element) is str for element in values):
                value = function.temporary()
                lookup = self.constant(frozenset(values))
                return (
                    f"({value} in {lookup} if type({value} := {item}) is str "
                    f"else _is_in({value}, {elements}))"
                )
            return f"_is_in({item}, {elements})"
        # A string found in a list is in it (``is_in``'s first answer), told without the call;
        # ``&`` evaluates both sides, item first, as the call would.
        value, elements = function.temporary(), function.temporary()
        item = self.expression(node.item, function)
        if self.metered:  # a scan of the list, charged by its size (runtime.cost)
            return f"_metered_in({item}, {self.expression(container, function)})"
        return (
            f"(True if (type({value} := {item}) is str) & "
            f"(type({elements} := {self.expression(container, function)}) is list) "
            f"and {value} in {elements} else _is_in({value}, {elements}))"
        )

    def constant(self, value: Any) -> str:
        """A literal for simple values; a name in the globals for everything else."""
        value_type = type(value)
        if value is None or value_type is bool or value_type is str or value_type is bytes:
            return repr(value)
        if value_type is int or (value_type is float and math.isfinite(value)):
            text = repr(value)
            return f"({text})" if text.startswith("-") else text
        name = f"_k{next(self.constant_numbers)}{self.suffix}"
        self.namespace[name] = value
        return name


def _returns(value: str) -> list[str]:
    return [f"return {value}"]


def _metered(root: Node) -> bool:
    """Whether the code for ``root`` charges the cost meter (``runtime.cost``): when it holds
    a loop, or calls a list function of the library (``sort``, ``distinct``, ``sets.*``...:
    Python-level comparisons, about a microsecond each, so a sort of the 32,768 elements a
    call may carry takes a quarter of a second). An expression with neither is left
    unmetered, and its code as fast as it was: it calls each function at most once per node,
    and what those scan (``in``, ``==``, ``contains``, ``matches``...) they scan once,
    linearly, over inputs the parse step bounded (64 KiB): milliseconds at most."""
    pending = [root]
    while pending:
        current = pending.pop()
        if isinstance(current, Comprehension):
            return True
        if isinstance(current, Apply) and current.name in LIST_SCANS:
            return True
        pending.extend(children(current))
    return False


def _cannot_fail(node: Node) -> bool:
    return isinstance(node, Const | Local) or (
        isinstance(node, Has) and _select_path(node.operand) is not None
    )


def _literal_side(node: Compare) -> tuple[Const | None, Node | None]:
    """The literal operand of a comparison and the other one, when exactly one is literal."""
    if isinstance(node.right, Const) and not isinstance(node.left, Const):
        return node.right, node.left
    if isinstance(node.left, Const) and not isinstance(node.right, Const):
        return node.left, node.right
    return None, None


def _select_path(node: Node) -> tuple[Var | Local, tuple[str, ...]] | None:
    """``a.b.c`` → (a, ("b", "c")) when ``node`` is a plain field chain from a name."""
    path: list[str] = []
    while isinstance(node, Select):
        path.append(node.field)
        node = node.operand
    if isinstance(node, Var | Local):
        return node, tuple(reversed(path))
    return None
