"""CEL syntax trees written back as CEL text, for messages: ``args.name.split(" ")``,
``args.amount + 1``, and function signatures as ``string.split(string) -> list(string)``."""

from __future__ import annotations

from typing import Any

from callgate_rules.cel import syntax
from callgate_rules.cel.library import Overload

OPERATOR_SPELLING = {
    "_+_": "+", "_-_": "-", "_*_": "*", "_/_": "/", "_%_": "%", "-_": "unary -", "!_": "!",
    "_==_": "==", "_!=_": "!=", "_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">=",
    "@in": "in", "_&&_": "&&", "_||_": "||", "_?_:_": "?:", "_[_]": "[]",
}


def render(node: syntax.Node) -> str:
    """The node as CEL text, for messages (``args.name.split(" ")``)."""
    if isinstance(node, syntax.Literal):
        return literal_text(node.value)
    if isinstance(node, syntax.Ident):
        return node.name
    if isinstance(node, syntax.Select):
        return f"{render(node.operand)}.{'?' if node.optional else ''}{node.field}"
    if isinstance(node, syntax.Index):
        return f"{render(node.operand)}[{'?' if node.optional else ''}{render(node.index)}]"
    if isinstance(node, syntax.Call | syntax.Macro):
        arguments = ", ".join(render(argument) for argument in node.args)
        spelled = OPERATOR_SPELLING.get(node.function if isinstance(node, syntax.Call)
                                        else "")
        if spelled and isinstance(node, syntax.Call) and node.target is None:
            return _operator_text(spelled, node.args)
        name = node.function if isinstance(node, syntax.Call) else node.name
        prefix = f"{render(node.target)}." if node.target is not None else ""
        return f"{prefix}{name}({arguments})"
    if isinstance(node, syntax.ListLiteral):
        return "[" + ", ".join(render(element) for element in node.elements) + "]"
    if isinstance(node, syntax.MapLiteral):
        return "{" + ", ".join(f"{render(e.key)}: {render(e.value)}"
                               for e in node.entries) + "}"
    return node.type_name + "{...}"


def _operator_text(spelled: str, args: tuple[syntax.Node, ...]) -> str:
    if spelled == "?:" and len(args) == 3:
        return f"{render(args[0])} ? {render(args[1])} : {render(args[2])}"
    if len(args) == 1:
        return f"{spelled.removeprefix('unary ')}{render(args[0])}"
    return f" {spelled} ".join(render(argument) for argument in args)


def literal_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def signature(name: str, overload: Overload) -> str:
    """``string.split(string) -> list(string)``, ``size(list(A)) -> int``."""
    parameters = list(overload.parameters)
    if overload.member and parameters:
        receiver = parameters.pop(0)
        return f"{receiver}.{name}({', '.join(parameters)}) -> {overload.result}"
    spelled = OPERATOR_SPELLING.get(name, name)
    return f"{spelled}({', '.join(parameters)}) -> {overload.result}"
