"""cel-python's lark parse tree → the compiler's intermediate form (``ir``).

Names are resolved here (macro variables become Python locals, everything else is read from
the activation), literals are decoded with cel-python's own routines, and constant
sub-expressions are folded. A construct the compiler does not cover raises ``Unsupported``,
and the whole expression then runs on cel-python instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celpy import evaluation as cel_evaluation
from lark import Token, Tree

from callgate_rules.cel.compiler import runtime
from callgate_rules.cel.compiler.ir import (
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
from callgate_rules.cel.errors import CelEvaluationError


class Unsupported(Exception):
    """The expression uses something the compiler leaves to cel-python."""


# Identifiers cel-python resolves to its functions, type objects or protobuf packages when no
# variable has the name; compiled code would only look them up in the activation.
_RESERVED_NAMES = frozenset(cel_evaluation.base_functions) | {"google", "dyn", "null_type"}

_RELATIONS = {
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
}
_ARITHMETIC = {
    "addition_add": "add",
    "addition_sub": "subtract",
    "multiplication_mul": "multiply",
    "multiplication_div": "divide",
    "multiplication_mod": "modulo",
}
# name → (fewest arguments, most arguments, runtime function)
_GLOBAL_FUNCTIONS: dict[str, tuple[int, int, str]] = {
    "size": (1, 1, "size"),
    "int": (1, 1, "to_int"),
    "double": (1, 1, "to_double"),
    "string": (1, 1, "to_string"),
    "bool": (1, 1, "to_bool"),
    "bytes": (1, 1, "to_bytes"),
    "timestamp": (1, 1, "to_timestamp"),
    "duration": (1, 1, "to_duration"),
    "matches": (2, 2, "matches"),
}
# method → (fewest arguments, most arguments, runtime function); the receiver comes first.
_METHODS: dict[str, tuple[int, int, str]] = {
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
    # callgate's extensions (cel.EXTENSION_FUNCTIONS gives cel-python the same)
    "lowerAscii": (0, 0, "lower_ascii"),
    "upperAscii": (0, 0, "upper_ascii"),
}
# Macros cel-python recognises by method name; reduce and min are its own extensions.
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "reduce", "min"})

# Results that may be shared between evaluations: nothing a caller could mutate.
_IMMUTABLE_TYPES = (str, int, float, bool, bytes, type(None), datetime, timedelta, CompiledPattern)


def lower(tree: Tree[Token]) -> Node:
    """The intermediate form of a parsed CEL expression; raises ``Unsupported``."""
    return _Lowering().node(tree)


class _Lowering:
    def __init__(self) -> None:
        self.scope: dict[str, str] = {}  # CEL macro variable → Python local
        self.local_numbers = itertools.count(1)

    def node(self, tree: Tree[Token] | Token) -> Node:
        if not isinstance(tree, Tree):
            raise Unsupported(f"unexpected token {tree!r}")
        handler: Callable[[Tree[Token]], Node] | None = getattr(self, f"_{tree.data}", None)
        if handler is None:
            raise Unsupported(f"{tree.data} is not compiled")
        return handler(tree)

    # Operators -------------------------------------------------------------------------------

    def _expr(self, tree: Tree[Token]) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        test, then, otherwise = (self.node(child) for child in tree.children)
        return _fold_conditional(Conditional(test, then, otherwise))

    def _conditionalor(self, tree: Tree[Token]) -> Node:
        return self._logic(tree, "||")

    def _conditionaland(self, tree: Tree[Token]) -> Node:
        return self._logic(tree, "&&")

    def _logic(self, tree: Tree[Token], operator: str) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        left, right = (self.node(child) for child in tree.children)
        operands: list[Node] = []
        for operand in (left, right):  # a && b && c parses as (a && b) && c: flatten it
            if isinstance(operand, Logic) and operand.operator == operator:
                operands.extend(operand.operands)
            else:
                operands.append(operand)
        return _fold_logic(Logic(operator, tuple(operands)))

    def _relation(self, tree: Tree[Token]) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        operator_tree, right_tree = tree.children
        assert isinstance(operator_tree, Tree)
        left = self.node(operator_tree.children[0])
        right = self.node(right_tree)
        if operator_tree.data == "relation_in":
            return _fold(Member(left, right))
        return _fold(Compare(_RELATIONS[str(operator_tree.data)], left, right))

    def _addition(self, tree: Tree[Token]) -> Node:
        return self._arithmetic(tree)

    def _multiplication(self, tree: Tree[Token]) -> Node:
        return self._arithmetic(tree)

    def _arithmetic(self, tree: Tree[Token]) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        operator_tree, right_tree = tree.children
        assert isinstance(operator_tree, Tree)
        left = self.node(operator_tree.children[0])
        return _fold(Call(_ARITHMETIC[str(operator_tree.data)], (left, self.node(right_tree))))

    def _unary(self, tree: Tree[Token]) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        operator_tree, operand_tree = tree.children
        assert isinstance(operator_tree, Tree)
        operand = self.node(operand_tree)
        if operator_tree.data == "unary_not":
            return _fold(Not(operand))
        return _fold(Call("negate", (operand,)))

    # Members ---------------------------------------------------------------------------------

    def _member(self, tree: Tree[Token]) -> Node:
        return self.node(tree.children[0])

    def _primary(self, tree: Tree[Token]) -> Node:
        return self.node(tree.children[0])

    def _paren_expr(self, tree: Tree[Token]) -> Node:
        return self.node(tree.children[0])

    def _member_dot(self, tree: Tree[Token]) -> Node:
        operand_tree, field = tree.children
        operand = self.node(operand_tree)
        if isinstance(operand, Const):  # constants are never maps
            return Fail(f"no such overload: field selection on {runtime.kind(operand.value)}")
        return Select(operand, str(field))

    def _member_index(self, tree: Tree[Token]) -> Node:
        container, key = (self.node(child) for child in tree.children)
        return _fold(Call("index", (container, key)))

    def _member_dot_arg(self, tree: Tree[Token]) -> Node:
        receiver_tree, method_token = tree.children[0], tree.children[1]
        method = str(method_token)
        argument_trees = _arguments(tree.children[2] if len(tree.children) > 2 else None)
        if method in _MACROS:
            return self._macro(method, receiver_tree, argument_trees)
        if method not in _METHODS:
            raise Unsupported(f"method {method}")
        fewest, most, function = _METHODS[method]
        if not fewest <= len(argument_trees) <= most:
            raise Unsupported(f"{method} with {len(argument_trees)} arguments")
        receiver = self.node(receiver_tree)
        arguments = tuple(self.node(argument) for argument in argument_trees)
        return _call(function, (receiver, *arguments))

    def _ident_arg(self, tree: Tree[Token]) -> Node:
        name = str(tree.children[0])
        argument_trees = _arguments(tree.children[1] if len(tree.children) > 1 else None)
        if name == "has":
            return self._has(argument_trees)
        if name == "dyn" and len(argument_trees) == 1:
            return self.node(argument_trees[0])
        if name not in _GLOBAL_FUNCTIONS:
            raise Unsupported(f"function {name}")
        fewest, most, function = _GLOBAL_FUNCTIONS[name]
        if not fewest <= len(argument_trees) <= most:
            raise Unsupported(f"{name} with {len(argument_trees)} arguments")
        return _call(function, tuple(self.node(argument) for argument in argument_trees))

    def _has(self, argument_trees: list[Tree[Token]]) -> Node:
        if len(argument_trees) != 1:
            raise Unsupported("has() takes one argument")
        selection = self.node(argument_trees[0])
        if not isinstance(selection, Select):
            raise Unsupported("has() of something other than a field selection")
        return Has(selection.operand, selection.field)

    def _macro(
        self, macro: str, receiver_tree: Tree[Token] | Token, argument_trees: list[Tree[Token]]
    ) -> Node:
        expected = (2, 3) if macro == "map" else (2,)
        if macro in ("reduce", "min") or len(argument_trees) not in expected:
            raise Unsupported(f"{macro} with {len(argument_trees)} arguments")
        variable = _identifier(argument_trees[0])
        if variable is None:
            raise Unsupported(f"{macro} whose first argument is not a name")
        range_node = self.node(receiver_tree)
        local = f"cel_{variable}_{next(self.local_numbers)}"
        outer = self.scope.get(variable)
        self.scope[variable] = local
        try:
            bodies = [self.node(argument) for argument in argument_trees[1:]]
        finally:
            if outer is None:
                del self.scope[variable]
            else:
                self.scope[variable] = outer
        if macro == "map":
            predicate = bodies[0] if len(bodies) == 2 else None
            return Comprehension(macro, local, range_node, predicate, bodies[-1])
        return Comprehension(macro, local, range_node, bodies[0], None)

    def _ident(self, tree: Tree[Token]) -> Node:
        name = str(tree.children[0])
        if name in self.scope:
            return Local(self.scope[name])
        if name in _RESERVED_NAMES:
            raise Unsupported(f"identifier {name} names a cel-python built-in")
        return Var(name)

    def _list_lit(self, tree: Tree[Token]) -> Node:
        items = _arguments(tree.children[0] if tree.children else None)
        return ListLiteral(tuple(self.node(item) for item in items))

    def _map_lit(self, tree: Tree[Token]) -> Node:
        if not tree.children:
            return MapLiteral(())
        initializers = tree.children[0]
        assert isinstance(initializers, Tree)
        parts = [self.node(part) for part in initializers.children]
        return MapLiteral(tuple(zip(parts[0::2], parts[1::2], strict=True)))

    # Literals --------------------------------------------------------------------------------

    def _literal(self, tree: Tree[Token]) -> Node:
        token = tree.children[0]
        assert isinstance(token, Token)
        text = str(token)
        if token.type == "INT_LIT":
            value = int(text, 16) if "x" in text.lower() else int(text, 10)
            if not runtime.INT64_MIN <= value <= runtime.INT64_MAX:
                return Fail(f"integer literal {text} out of range")
            return Const(value)
        if token.type == "FLOAT_LIT":
            return Const(float(text))
        if token.type == "BOOL_LIT":
            return Const(text == "true")
        if token.type == "NULL_LIT":
            return Const(None)
        if token.type in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
            # cel-python's own decoders, so escapes mean the same on both backends.
            decode = cel_evaluation.celbytes if token.type == "BYTES_LIT" else cel_evaluation.celstr
            try:
                decoded = decode(token)
            except ValueError as error:
                return Fail(f"invalid literal {text}: {error}")
            except Exception as error:  # anything else would crash cel-python: leave it to it
                raise Unsupported(f"literal {text}") from error
            if isinstance(decoded, bytes):
                return Const(bytes(decoded))
            return Const(str.__str__(decoded))
        raise Unsupported(f"{token.type} literal")  # UINT_LIT: no unsigned values here


def _arguments(exprlist: Tree[Token] | Token | None) -> list[Tree[Token]]:
    if exprlist is None:
        return []
    assert isinstance(exprlist, Tree)
    return [child for child in exprlist.children if isinstance(child, Tree)]


def _identifier(tree: Tree[Token]) -> str | None:
    """The name if ``tree`` is nothing but an identifier (a macro's variable)."""
    node: Tree[Token] | Token = tree
    while isinstance(node, Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    if isinstance(node, Tree) and node.data == "ident":
        return str(node.children[0])
    return None


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


def _constant_value(node: Node) -> tuple[bool, Any]:
    return (True, node.value) if isinstance(node, Const) else (False, None)


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
    values = [_constant_value(operand)[1] for operand in operands]
    if isinstance(node, Call) and node.function == "to_timestamp" and isinstance(values[0], str):
        if not runtime.is_rfc3339(values[0]):
            return node  # cel-python's lenient parser reads "now" as the current time
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
