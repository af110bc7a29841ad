"""``cel.syntax``'s tree → the compiler's intermediate form (``ir``).

Names are resolved here: macro variables become Python locals, type names (``int``,
``google.protobuf.Timestamp``) become type values, a leading dot (``.a``) reads the
activation past any macro variable, everything else is read from the activation. Calls are
resolved here too: the spec's core operators and functions go to the compiler's ``runtime``
(inlined or called directly), every other name to the function library
(``callgate_rules.cel.library.FUNCTIONS``); a name in neither, or a call with an argument
count no overload has, is a ``CelCompileError`` at the call's line:col with the nearest
known name. Constant sub-expressions are folded.

There is no second interpreter behind this: every expression the parser accepts either
lowers completely or is refused here, with its place.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from callgate_rules.cel import syntax
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
)
from callgate_rules.cel.compiler.regex import CompiledPattern, compile_pattern
from callgate_rules.cel.errors import CelCompileError, CelEvaluationError
from callgate_rules.cel.values import CelType

if TYPE_CHECKING:  # the library imports the runtime; it is handed in, not imported
    from callgate_rules.cel.library import Function

Functions = Mapping[str, "Function"]

_RELATIONS = {"_==_": "==", "_!=_": "!=", "_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}
_ARITHMETIC = {"_+_": "add", "_-_": "subtract", "_*_": "multiply", "_/_": "divide",
               "_%_": "modulo"}
# The spec's core functions the compiler calls directly: name → (fewest, most, runtime name).
CORE_GLOBALS: dict[str, tuple[int, int, str]] = {
    "size": (1, 1, "size"),
    "int": (1, 1, "to_int"),
    "uint": (1, 1, "to_uint"),
    "double": (1, 1, "to_double"),
    "string": (1, 1, "to_string"),
    "bool": (1, 1, "to_bool"),
    "bytes": (1, 1, "to_bytes"),
    "timestamp": (1, 1, "to_timestamp"),
    "duration": (1, 1, "to_duration"),
    "matches": (2, 2, "matches"),
    "type": (1, 1, "type_of"),
    "dyn": (1, 1, "dyn"),
}
# method → (fewest, most arguments besides the receiver, runtime name)
CORE_METHODS: dict[str, tuple[int, int, str]] = {
    "size": (0, 0, "size"),
    "contains": (1, 1, "contains"),
    "startsWith": (1, 1, "starts_with"),
    "endsWith": (1, 1, "ends_with"),
    "matches": (1, 1, "matches"),
    "getFullYear": (0, 1, "get_full_year"),
    "getMonth": (0, 1, "get_month"),
    "getDayOfYear": (0, 1, "get_day_of_year"),
    "getDayOfMonth": (0, 1, "get_day_of_month"),
    "getDate": (0, 1, "get_date"),
    "getDayOfWeek": (0, 1, "get_day_of_week"),
    "getHours": (0, 1, "get_hours"),
    "getMinutes": (0, 1, "get_minutes"),
    "getSeconds": (0, 1, "get_seconds"),
    "getMilliseconds": (0, 1, "get_milliseconds"),
}
# Type names as values (``type(1) == int``); the dotted ones are protobuf's well-known types.
TYPE_NAMES: Mapping[str, CelType] = {
    name: CelType(name) for name in (
        "int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type",
        "type", "optional_type", "google.protobuf.Timestamp",
        "google.protobuf.Duration", "kubernetes.URL", "net.IP", "net.CIDR")
}

# Results that may be shared between evaluations: nothing a caller could mutate.
_IMMUTABLE_TYPES = (str, int, float, bool, bytes, type(None), datetime, timedelta,
                    CompiledPattern, CelType)


def lower(tree: syntax.Node, functions: Functions) -> Node:
    """The intermediate form of a parsed CEL expression, with ``functions`` the library
    (``cel.library.FUNCTIONS``); raises ``CelCompileError``."""
    return _Lowering(functions).node(tree)


def compile_error(message: str, at: syntax.Position,
                  code: str = "cel-compile") -> CelCompileError:
    return CelCompileError(f"CEL error at {at.line}:{at.column}: {message}", at.line,
                           at.column, code)


def library_function(call: syntax.Call, functions: Functions) -> tuple[str, bool] | None:
    """How ``call`` names a library function: (name, as a member call) — ``math.greatest``
    written ``math.greatest(...)`` is a global call on its dotted name; or ``None``."""
    if call.target is not None:
        namespace = syntax.qualified_name(call.target)
        if namespace is not None and f"{namespace.lstrip('.')}.{call.function}" in functions:
            return f"{namespace.lstrip('.')}.{call.function}", False
        return (call.function, True) if call.function in functions else None
    name = call.function.lstrip(".")
    return (name, False) if name in functions else None


def nearest_function(name: str, functions: Functions) -> str | None:
    """The known function name closest to ``name`` (for "unknown function" errors)."""
    known = [*functions, *CORE_GLOBALS, *CORE_METHODS]
    matches = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return matches[0] if matches else None


class _Lowering:
    def __init__(self, functions: Functions) -> None:
        self.functions = functions
        self.scope: dict[str, str] = {}  # CEL macro variable → Python local
        self.local_numbers = itertools.count(1)

    def node(self, tree: syntax.Node) -> Node:
        if isinstance(tree, syntax.Literal):
            return Const(tree.value)
        if isinstance(tree, syntax.Ident):
            return self.ident(tree)
        if isinstance(tree, syntax.Select):
            return self.select(tree)
        if isinstance(tree, syntax.Index):
            container, key = self.node(tree.operand), self.node(tree.index)
            if tree.optional or _in_optional_chain(tree.operand) or _maybe_optional(container):
                return Call("index_optional" if tree.optional else "index_through_optional",
                            (container, key))
            return _fold(Call("index", (container, key)))
        if isinstance(tree, syntax.Call):
            return self.call(tree)
        if isinstance(tree, syntax.Macro):
            return self.macro(tree)
        if isinstance(tree, syntax.ListLiteral):
            return ListLiteral(tuple(self.node(item) for item in tree.elements),
                               tree.optional_indices)
        if isinstance(tree, syntax.MapLiteral):
            entries = tuple((self.node(entry.key), self.node(entry.value))
                            for entry in tree.entries)
            optional = frozenset(number for number, entry in enumerate(tree.entries)
                                 if entry.optional)
            return MapLiteral(entries, optional)
        raise compile_error(
            f"the message literal {tree.type_name}{{...}} needs protobuf message types, "
            "which callgate's CEL does not have; write a map literal {'field': value}",
            tree.at)

    # Names -----------------------------------------------------------------------------------

    def ident(self, tree: syntax.Ident) -> Node:
        name = tree.name
        if name.startswith("."):
            return TYPE_CONSTANTS.get(name[1:]) or Var(name[1:])
        if name in self.scope:
            return Local(self.scope[name])
        return TYPE_CONSTANTS.get(name) or Var(name)

    def select(self, tree: syntax.Select) -> Node:
        qualified = syntax.qualified_name(tree)
        if (qualified is not None and qualified.lstrip(".") in TYPE_NAMES
                and qualified.split(".")[0] not in self.scope):
            return Const(TYPE_NAMES[qualified.lstrip(".")])
        operand = self.node(tree.operand)
        # after an optional selection, or on a library function's result (which may be an
        # optional: ``optional.of(m).c``), a selection works through optionals
        if tree.optional or _in_optional_chain(tree.operand) or _maybe_optional(operand):
            return Call("select_optional" if tree.optional else "select_through_optional",
                        (operand, Const(tree.field)))
        if isinstance(operand, Const):
            return Fail(f"no such overload: field selection on {runtime.kind(operand.value)}")
        return Select(operand, tree.field)

    # Calls -----------------------------------------------------------------------------------

    def call(self, tree: syntax.Call) -> Node:
        function, args = tree.function, tree.args
        if function == "_?_:_":
            test, then, otherwise = (self.node(arg) for arg in args)
            return _fold_conditional(Conditional(test, then, otherwise))
        if function in ("_&&_", "_||_"):
            operator = function[1:-1]
            operands: list[Node] = []
            for arg in args:  # balanced chains: flatten them into one n-ary chain
                operand = self.node(arg)
                if isinstance(operand, Logic) and operand.operator == operator:
                    operands.extend(operand.operands)
                else:
                    operands.append(operand)
            return _fold_logic(Logic(operator, tuple(operands)))
        if function == "!_":
            return _fold(Not(self.node(args[0])))
        if function == "-_":
            return _fold(Call("negate", (self.node(args[0]),)))
        if function in _RELATIONS:
            left, right = (self.node(arg) for arg in args)
            return _fold(Compare(_RELATIONS[function], left, right))
        if function == "@in":
            item, container = (self.node(arg) for arg in args)
            return _fold(Member(item, container))
        if function in _ARITHMETIC:
            left, right = (self.node(arg) for arg in args)
            return _fold(Call(_ARITHMETIC[function], (left, right)))
        return self.function_call(tree)

    def function_call(self, tree: syntax.Call) -> Node:
        core = CORE_METHODS if tree.target is not None else CORE_GLOBALS
        library = library_function(tree, self.functions)
        name = tree.function.lstrip(".")
        if name in core and (library is None or library[0] == name):
            fewest, most, runtime_name = core[name]
            if fewest <= len(tree.args) <= most:
                arguments = tuple(self.node(arg) for arg in self.receiver_and(tree))
                if runtime_name == "dyn":
                    return arguments[0]
                return _call(runtime_name, arguments)
            if library is None:
                raise compile_error(_arity_message(name, tree.target is not None, fewest,
                                                   most, len(tree.args)), tree.at,
                                    "wrong-arity")
        if library is None:
            qualified = name
            namespace = syntax.qualified_name(tree.target) if tree.target else None
            if namespace is not None and any(known.startswith(namespace + ".")
                                             for known in self.functions):
                qualified = f"{namespace}.{name}"  # math.gretest: a known namespace
            suggestion = nearest_function(qualified, self.functions)
            hint = f" (did you mean {suggestion}?)" if suggestion else ""
            raise compile_error(f"unknown function '{qualified}'{hint}", tree.at,
                                "unknown-function")
        library_name, member = library
        found = self.functions[library_name]
        arguments_syntax = self.receiver_and(tree) if member else tree.args
        count = len(tree.args) if member else len(arguments_syntax)
        arities = found.arities()
        if (member, count) not in arities and not (
                found.variadic and any(m == member and count >= n for m, n in arities)):
            raise compile_error(_library_arity_message(library_name, member, count, arities),
                                tree.at, "wrong-arity")
        arguments = tuple(self.node(arg) for arg in arguments_syntax)
        if member and library_name in _LAZY_ALTERNATIVES and len(arguments) == 2:
            return self.lazy_alternative(library_name, found.implementation, arguments)
        return _fold_apply(Apply(library_name, found.implementation, arguments))

    def lazy_alternative(self, name: str, implementation: Callable[..., Any],
                         arguments: tuple[Node, ...]) -> Node:
        """``a.or(b)``, ``a.orValue(b)``: ``b`` is evaluated only when ``a`` is none, as in
        cel-go. The library's function decides the result; when ``a`` has a value it is
        called with ``null`` for the alternative it then ignores."""
        receiver = Local(f"cel_optional_{next(self.local_numbers)}")
        present = Call("optional_present", (receiver,))
        return Bind(receiver.name, arguments[0], Conditional(
            present, Apply(name, implementation, (receiver, Const(None))),
            Apply(name, implementation, (receiver, arguments[1]))))

    def receiver_and(self, tree: syntax.Call) -> tuple[syntax.Node, ...]:
        return ((tree.target,) if tree.target is not None else ()) + tree.args

    # Macros ----------------------------------------------------------------------------------

    def macro(self, tree: syntax.Macro) -> Node:
        name, args = tree.name, tree.args
        if name == "has":
            selection = args[0]
            assert isinstance(selection, syntax.Select)
            operand = self.node(selection.operand)
            if _in_optional_chain(selection.operand) or _maybe_optional(operand):
                return Call("has_through_optional", (operand, Const(selection.field)))
            return Has(operand, selection.field)
        if name == "cel.bind":
            init = self.node(args[1])
            local, body = self.bound(args[:1], args[2:])
            return Bind(local[0], init, body[0])
        assert tree.target is not None
        range_node = self.node(tree.target)
        if name in ("optMap", "optFlatMap"):
            local, body = self.bound(args[:1], args[1:])
            return Bind(local[0], range_node, body[0],
                        "map" if name == "optMap" else "flat_map")
        two = name.startswith("transform") or len(args) == 3 and name in (
            "all", "exists", "existsOne")
        variables = args[:2] if two else args[:1]
        locals_, bodies = self.bound(variables, args[len(variables):])
        macro = "exists_one" if name == "existsOne" else name
        second = locals_[1] if two else None
        if macro == "sortBy":
            keys = Comprehension("map", locals_[0], range_node, None, bodies[0])
            return Call("sort_by", (range_node, keys))
        if macro in ("map", "transformList", "transformMap", "transformMapEntry"):
            predicate = bodies[0] if len(bodies) == 2 else None
            return Comprehension(macro, locals_[0], range_node, predicate, bodies[-1], second)
        return Comprehension(macro, locals_[0], range_node, bodies[0], None, second)

    def bound(self, variables: tuple[syntax.Node, ...],
              bodies: tuple[syntax.Node, ...]) -> tuple[list[str], list[Node]]:
        """Lower ``bodies`` with the macro's ``variables`` in scope, as fresh Python locals."""
        names = [variable.name for variable in variables if isinstance(variable, syntax.Ident)]
        locals_ = [f"cel_{name}_{next(self.local_numbers)}" for name in names]
        outer = {name: self.scope.get(name) for name in names}
        self.scope.update(zip(names, locals_, strict=True))
        try:
            lowered = [self.node(body) for body in bodies]
        finally:
            for name, previous in outer.items():
                if previous is None:
                    self.scope.pop(name, None)
                else:
                    self.scope[name] = previous
        return locals_, lowered


TYPE_CONSTANTS: Mapping[str, Const] = {name: Const(value) for name, value in TYPE_NAMES.items()}


def _in_optional_chain(tree: syntax.Node) -> bool:
    """``a.?b.c``, ``a[?0][1]``: a selection after an optional one works on the optional."""
    while isinstance(tree, syntax.Select | syntax.Index):
        if tree.optional:
            return True
        tree = tree.operand
    return False


# Library methods whose argument is needed only when the receiver is an empty optional.
_LAZY_ALTERNATIVES = frozenset({"or", "orValue"})
_OPTIONAL_RESULTS = frozenset({"select_optional", "select_through_optional", "index_optional",
                               "index_through_optional"})


def _maybe_optional(node: Node) -> bool:
    """Whether ``node`` may evaluate to an optional: a library function's result (``or``
    included), a ``cel.bind``, or a selection that works through optionals."""
    return isinstance(node, Apply | Bind) or (isinstance(node, Call)
                                              and node.function in _OPTIONAL_RESULTS)


def _arity_message(name: str, member: bool, fewest: int, most: int, given: int) -> str:
    wanted = str(fewest) if fewest == most else f"{fewest} to {most}"
    written = f"x.{name}(...)" if member else f"{name}(...)"
    return f"{written} takes {wanted} argument{'s' if most != 1 else ''}, not {given}"


def _library_arity_message(name: str, member: bool, given: int,
                           arities: frozenset[tuple[bool, int]]) -> str:
    same = sorted(count for is_member, count in arities if is_member == member)
    written = f"x.{name}(...)" if member else f"{name}(...)"
    if not same:
        other = "a global function" if member else "a method: write x." + name + "(...)"
        return f"'{name}' is {other}, not called as {written}"
    wanted = " or ".join(str(count) for count in same)
    return f"{written} takes {wanted} argument{'s' if same != [1] else ''}, not {given}"


# Constant folding ----------------------------------------------------------------------------


def _call(function: str, arguments: tuple[Node, ...]) -> Node:
    """A runtime call; a ``matches`` with a literal pattern gets the pattern compiled now."""
    if function == "matches" and isinstance(arguments[1], Const):
        pattern = arguments[1].value
        if isinstance(pattern, str):
            try:
                compiled = compile_pattern(pattern)
            except CelEvaluationError as error:
                return Fail(str(error))
            return _fold(Call("matches_compiled", (arguments[0], Const(compiled))))
    return _fold(Call(function, arguments))


def _fold(node: Call | Compare | Member | Not) -> Node:
    """Evaluate ``node`` now if its operands are constants. An error is not folded: it must
    only surface if evaluation reaches it, so the node stays and raises at run time."""
    operands = (
        node.arguments if isinstance(node, Call)
        else (node.left, node.right) if isinstance(node, Compare)
        else (node.item, node.container) if isinstance(node, Member)
        else (node.operand,)
    )
    if not all(isinstance(operand, Const) for operand in operands):
        return node
    values = [operand.value for operand in operands if isinstance(operand, Const)]
    try:
        if isinstance(node, Call):
            value = runtime.FUNCTIONS[node.function](*values)
        elif isinstance(node, Compare):
            value = runtime.COMPARISONS[node.operator](*values)
        elif isinstance(node, Member):
            value = runtime.is_in(*values)
        elif type(values[0]) is bool:
            value = not values[0]
        else:
            return node  # "!" of a non-bool: an error, raised at run time
    except runtime.FAILURES:
        return node
    return Const(value) if isinstance(value, _IMMUTABLE_TYPES) else node


def _fold_apply(node: Apply) -> Node:
    if not all(isinstance(argument, Const) for argument in node.arguments):
        return node
    try:
        value = node.implementation(*(argument.value for argument in node.arguments
                                      if isinstance(argument, Const)))
    except runtime.FAILURES:
        return node
    return Const(value) if isinstance(value, _IMMUTABLE_TYPES) else node


def _fold_conditional(node: Conditional) -> Node:
    if isinstance(node.test, Const) and type(node.test.value) is bool:
        return node.then if node.test.value else node.otherwise
    return node


def _fold_logic(node: Logic) -> Node:
    """Drop operands that cannot decide the chain; a deciding constant decides it now."""
    deciding = node.operator == "||"  # true decides ||, false decides &&
    kept: list[Node] = []
    for operand in node.operands:
        if isinstance(operand, Const) and type(operand.value) is bool:
            if operand.value is deciding:
                return Const(deciding)
            continue  # the neutral value: true in &&, false in ||
        kept.append(operand)
    if not kept:
        return Const(not deciding)
    return Logic(node.operator, tuple(kept))
