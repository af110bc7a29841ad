"""CEL source text → the syntax tree of ``cel.syntax``: a lexer and a recursive-descent parser.

The grammar is the CEL specification's (cel-spec ``doc/langdef.md``, cel-go's ``CEL.g4``):

    Expr           = ConditionalOr ["?" ConditionalOr ":" Expr]
    ConditionalOr  = [ConditionalOr "||"] ConditionalAnd
    ConditionalAnd = [ConditionalAnd "&&"] Relation
    Relation       = [Relation Relop] Addition        Relop = < <= >= > == != in
    Addition       = [Addition ("+" | "-")] Multiplication
    Multiplication = [Multiplication ("*" | "/" | "%")] Unary
    Unary          = Member | "!" {"!"} Member | "-" {"-"} Member
    Member         = Primary | Member "." ["?"] SELECTOR | Member "." IDENT "(" [ExprList] ")"
                   | Member "[" ["?"] Expr "]"
    Primary        = ["."] IDENT ["(" [ExprList] ")"] | "(" Expr ")"
                   | "[" [ListInits] [","] "]" | "{" [MapInits] [","] "}"
                   | ["."] SELECTOR {"." SELECTOR} "{" [FieldInits] [","] "}" | LITERAL

with the optionals syntax of cel-go (``a.?b``, ``a[?b]``, ``[?x]``, ``{?k: v}``,
``Msg{?f: v}``) and backtick-quoted field names (``a.`b-c```). Macros are recognised here,
by name and argument count as cel-go does, into ``syntax.Macro``; a name and count that is
no macro stays a ``Call``. ``&&`` and ``||`` chains are built balanced (as cel-go builds
them), so a long chain is a shallow tree.

Hostile input: an expression longer than ``MAX_SOURCE_LENGTH`` code points, or nested
deeper than ``MAX_DEPTH`` (parentheses, operators, selections: the depth of the tree), is a
``CelSyntaxError``, never a ``RecursionError`` or a hang. Lexing is one linear pass.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from callgate_rules.cel import syntax
from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.values import UINT64_MAX, UInt

__all__ = ["MAX_DEPTH", "MAX_SOURCE_LENGTH", "parse"]

# cel-go's defaults are 100,000 code points and 250 levels of parse recursion; 250 levels of
# tree is also what the compiler below this parser (recursive lowering and code generation,
# Python's own compiler on the generated code) handles well inside Python's default
# recursion limit, with room for the caller's frames.
MAX_SOURCE_LENGTH = 100_000
MAX_DEPTH = 100

RESERVED_WORDS = frozenset({
    "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
    "loop", "package", "namespace", "return", "var", "void", "while",
})

_INT64_MAX = 2**63 - 1

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\n\r\f]+|//[^\n]*)
  | (?P<string>[bB]?[rR](?:'''.*?'''|\"\"\".*?\"\"\"|'[^'\n\r]*'|"[^"\n\r]*")
        |[bB]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
        |'(?:\\.|[^\\'\n\r])*'|"(?:\\.|[^\\"\n\r])*"))
  | (?P<float>(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+
        |\.[0-9]+(?:[eE][+-]?[0-9]+)?))
  | (?P<int>(?:0[xX][0-9a-fA-F]+|[0-9]+)[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<quoted>`[A-Za-z0-9_.\-/ ]+`)
  | (?P<operator>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)
# A raw string's body is what stands between its quotes; escapes are read only in others.
_RAW_BODY = re.compile(
    r"'''(.*?)'''|\"\"\"(.*?)\"\"\"|'([^'\n\r]*)'|\"([^\"\n\r]*)\"", re.DOTALL)
_ESCAPE = re.compile(
    r"\\(?:([abfnrtv\"'\\?`])|[xX]([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"
    r"|([0-3][0-7]{2})|(.?))",
    re.DOTALL,
)
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    '"': '"', "'": "'", "\\": "\\", "?": "?", "`": "`",
}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # string, float, int, ident, quoted, operator, end
    text: str
    offset: int


_END = "end"

_BINARY: dict[str, tuple[int, str]] = {
    "||": (0, "_||_"), "&&": (1, "_&&_"),
    "==": (2, "_==_"), "!=": (2, "_!=_"), "<": (2, "_<_"), "<=": (2, "_<=_"), ">": (2, "_>_"),
    ">=": (2, "_>=_"), "in": (2, "@in"),
    "+": (3, "_+_"), "-": (3, "_-_"),
    "*": (4, "_*_"), "/": (4, "_/_"), "%": (4, "_%_"),
}


def parse(source: str) -> syntax.Node:
    """The syntax tree of ``source``; raises ``CelSyntaxError`` naming the place."""
    return _Parser(source).parse()


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.line_starts = [0] + [match.end() for match in re.finditer("\n", source)]
        self.tokens: list[_Token] = []
        self.position = 0
        self.nesting = 0
        self.depths: dict[int, int] = {}  # id(node) → depth of its tree

    # Places and errors -----------------------------------------------------------------------

    def place(self, offset: int) -> syntax.Position:
        line = bisect.bisect_right(self.line_starts, offset)
        return syntax.Position(line=line, column=offset - self.line_starts[line - 1] + 1)

    def error(self, message: str, offset: int) -> CelSyntaxError:
        at = self.place(offset)
        return CelSyntaxError(f"CEL syntax error at {at.line}:{at.column}: {message}",
                              at.line, at.column)

    def unexpected(self, token: _Token, expected: str) -> CelSyntaxError:
        found = "the end of the expression" if token.kind == _END else f"`{token.text[:40]}`"
        return self.error(f"found {found}, expected {expected}", token.offset)

    # Lexing ------------------------------------------------------------------------------------

    def lex(self) -> None:
        source, offset = self.source, 0
        while offset < len(source):
            match = _TOKEN.match(source, offset)
            if match is None:
                character = source[offset]
                if character in "'\"":
                    raise self.error("a string literal is not closed on its line (use "
                                     "''' or \"\"\" for a text over several lines)", offset)
                if character == "`":
                    raise self.error("a backtick-quoted field name holds only letters, "
                                     "digits and _ . - / and space, and ends with `", offset)
                raise self.error(f"unexpected character {character!r}", offset)
            kind = match.lastgroup or "space"
            if kind != "space":
                self.tokens.append(_Token(kind, match.group(), offset))
            offset = match.end()
        # "the end" is placed on the last token, after which something is missing
        self.tokens.append(_Token(_END, "", self.tokens[-1].offset if self.tokens else 0))

    def peek(self, ahead: int = 0) -> _Token:
        if not ahead:
            return self.tokens[self.position]  # never past the end token
        return self.tokens[min(self.position + ahead, len(self.tokens) - 1)]

    def take(self) -> _Token:
        token = self.tokens[self.position]
        if token.kind != _END:
            self.position += 1
        return token

    def at(self, text: str) -> bool:
        token = self.tokens[self.position]
        return token.text == text and token.kind == "operator"

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.position += 1
            return True
        return False

    def expect(self, text: str, expected: str | None = None) -> _Token:
        token = self.peek()
        if not self.at(text):
            raise self.unexpected(token, expected or f"`{text}`")
        return self.take()

    # Depth ---------------------------------------------------------------------------------

    def node(self, made: syntax.Node, offset: int, *parts: syntax.Node) -> syntax.Node:
        """Record ``made``'s tree depth (one more than its deepest part); refuse too deep."""
        depth = 1 + max((self.depths.get(id(part), 1) for part in parts), default=0)
        if depth > MAX_DEPTH:
            raise self.error(f"the expression nests deeper than {MAX_DEPTH} levels", offset)
        self.depths[id(made)] = depth
        return made

    # Grammar -------------------------------------------------------------------------------

    def parse(self) -> syntax.Node:
        if len(self.source) > MAX_SOURCE_LENGTH:
            raise self.error(f"the expression is {len(self.source)} characters long, more "
                             f"than the {MAX_SOURCE_LENGTH} allowed", 0)
        self.lex()
        if self.peek().kind == _END:
            raise self.error("the expression is empty", 0)
        tree = self.expression()
        token = self.peek()
        if token.kind != _END:
            raise self.unexpected(token, "an operator or the end of the expression")
        self.depths.clear()
        return tree

    def expression(self) -> syntax.Node:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise self.error(f"the expression nests deeper than {MAX_DEPTH} levels",
                             self.peek().offset)
        try:
            test = self.binary(0)
            if not self.at("?"):
                return test
            question = self.take()
            then = self.binary(0)
            self.expect(":", "`:` of the conditional `test ? a : b`")
            otherwise = self.expression()
            return self.node(
                syntax.Call("_?_:_", (test, then, otherwise), at=self.place(question.offset)),
                question.offset, test, then, otherwise)
        finally:
            self.nesting -= 1

    def binary_operator(self) -> tuple[int, str] | None:
        """The precedence (0 for ``||`` to 4 for ``*``) and function of the next token."""
        token = self.peek()
        if token.kind == "operator":
            return _BINARY.get(token.text)
        if token.kind == "ident" and token.text == "in":
            return _BINARY["in"]
        return None

    def binary(self, lowest: int) -> syntax.Node:
        """Operators of precedence ``lowest`` and above, by precedence climbing: left
        associative, and ``&&``/``||`` runs gathered and built balanced."""
        left = self.unary()
        while (found := self.binary_operator()) is not None and found[0] >= lowest:
            precedence, function = found
            if function in ("_&&_", "_||_"):
                operands, operators = [left], []
                while self.binary_operator() == found:
                    operators.append(self.take())
                    operands.append(self.binary(precedence + 1))
                left = self.balanced(function, operands, operators, 0, len(operands))
                continue
            token = self.take()
            right = self.binary(precedence + 1)
            left = self.node(syntax.Call(function, (left, right), at=self.place(token.offset)),
                             token.offset, left, right)
        return left

    def balanced(self, function: str, operands: list[syntax.Node], operators: list[_Token],
                 low: int, high: int) -> syntax.Node:
        if high - low == 1:
            return operands[low]
        middle = (low + high) // 2
        left = self.balanced(function, operands, operators, low, middle)
        right = self.balanced(function, operands, operators, middle, high)
        token = operators[middle - 1]
        return self.node(syntax.Call(function, (left, right), at=self.place(token.offset)),
                         token.offset, left, right)

    def unary(self) -> syntax.Node:
        operators: list[_Token] = []
        while self.at("!") or self.at("-"):
            operators.append(self.take())
        if operators and operators[-1].text == "-" and self.peek().kind in ("int", "float"):
            # ``-9223372036854775808``: the sign belongs to the literal, as in CEL.g4.
            sign = operators.pop()
            operand = self.member(self.number(self.take(), negative=True, offset=sign.offset))
        else:
            operand = self.member(self.primary())
        for token in reversed(operators):
            function = "!_" if token.text == "!" else "-_"
            operand = self.node(syntax.Call(function, (operand,), at=self.place(token.offset)),
                                token.offset, operand)
        return operand

    def member(self, operand: syntax.Node) -> syntax.Node:
        while True:
            token = self.peek()
            if self.accept("."):
                optional = self.accept("?")
                name_token = self.take()
                if name_token.kind == "quoted":
                    name = name_token.text[1:-1]
                elif name_token.kind == "ident":
                    name = name_token.text
                else:
                    raise self.unexpected(name_token, "a field name after `.`")
                if not optional and name_token.kind == "ident" and self.at("("):
                    operand = self.method(operand, name, name_token)
                    continue
                operand = self.node(syntax.Select(operand, name, optional,
                                                  at=self.place(name_token.offset)),
                                    name_token.offset, operand)
            elif self.accept("["):
                optional = self.accept("?")
                index = self.expression()
                self.expect("]", "`]` closing the index")
                operand = self.node(syntax.Index(operand, index, optional,
                                                 at=self.place(token.offset)),
                                    token.offset, operand, index)
            else:
                return operand

    def method(self, target: syntax.Node, name: str, name_token: _Token) -> syntax.Node:
        self.expect("(")
        arguments = self.arguments(")")
        made = _macro(name, target, arguments, self.place(name_token.offset))
        if isinstance(made, str):
            raise self.error(made, name_token.offset)
        return self.node(made, name_token.offset, target, *arguments)

    def arguments(self, closing: str) -> tuple[syntax.Node, ...]:
        found: list[syntax.Node] = []
        while not self.at(closing):
            found.append(self.expression())
            if not self.accept(","):
                break
        self.expect(closing, f"`,` or `{closing}`")
        return tuple(found)

    def primary(self) -> syntax.Node:
        token = self.peek()
        if token.kind == "operator":
            if token.text == ".":
                self.take()
                name = self.take()
                if name.kind != "ident":
                    raise self.unexpected(name, "a name after the leading `.`")
                return self.name("." + name.text, name, token.offset)
            if token.text == "(":
                self.take()
                inner = self.expression()
                self.expect(")", "`)`")
                return inner
            if token.text == "[":
                return self.list_literal()
            if token.text == "{":
                return self.map_literal()
            raise self.unexpected(token, "an operand (a name, a literal, `(`, `[` or `{`)")
        if token.kind == "ident":
            self.take()
            if token.text in ("true", "false"):
                return syntax.Literal(token.text == "true", at=self.place(token.offset))
            if token.text == "null":
                return syntax.Literal(None, at=self.place(token.offset))
            return self.name(token.text, token, token.offset)
        if token.kind in ("int", "float"):
            return self.number(self.take(), negative=False, offset=token.offset)
        if token.kind == "string":
            self.take()
            return syntax.Literal(self.string(token), at=self.place(token.offset))
        if token.kind == "quoted":
            raise self.error("a backtick-quoted name is only allowed as a field name "
                             "(a.`b-c`), not on its own", token.offset)
        raise self.unexpected(token, "an operand")

    def name(self, name: str, token: _Token, offset: int) -> syntax.Node:
        """An identifier, a global call, or a message literal's type name (``a.b.C{...}``)."""
        bare = name.lstrip(".")
        if bare in RESERVED_WORDS or bare == "in":
            raise self.error(f"`{bare}` is a reserved word and cannot be used as a name",
                             token.offset)
        if self.at("("):
            self.take()
            arguments = self.arguments(")")
            made = _global_macro(bare, arguments, self.place(token.offset))
            if isinstance(made, str):
                raise self.error(made, token.offset)
            return self.node(made, token.offset, *arguments)
        # ``a.b.C{`` is a message literal: the dotted type name is gathered first.
        if self.at("{") or (self.at(".") and self._message_name_ahead()):
            parts = [name]
            while self.accept("."):
                parts.append(self.take().text)
            return self.struct_literal(".".join(parts), offset)
        return syntax.Ident(name, at=self.place(offset))

    def _message_name_ahead(self) -> bool:
        ahead = 0
        while self.peek(ahead).text == "." and self.peek(ahead + 1).kind == "ident":
            ahead += 2
        return ahead > 0 and self.peek(ahead).text == "{" and self.peek(ahead).kind == "operator"

    def list_literal(self) -> syntax.Node:
        opening = self.expect("[")
        elements: list[syntax.Node] = []
        optional: set[int] = set()
        while not self.at("]"):
            if self.accept("?"):
                optional.add(len(elements))
            elements.append(self.expression())
            if not self.accept(","):
                break
        self.expect("]", "`,` or `]` in the list")
        return self.node(syntax.ListLiteral(tuple(elements), frozenset(optional),
                                            at=self.place(opening.offset)),
                         opening.offset, *elements)

    def map_literal(self) -> syntax.Node:
        opening = self.expect("{")
        entries: list[syntax.MapEntry] = []
        while not self.at("}"):
            start = self.peek()
            optional = self.accept("?")
            key = self.expression()
            self.expect(":", "`:` after the map key")
            value = self.expression()
            entries.append(syntax.MapEntry(key, value, optional, at=self.place(start.offset)))
            if not self.accept(","):
                break
        self.expect("}", "`,` or `}` in the map")
        parts = [part for entry in entries for part in (entry.key, entry.value)]
        return self.node(syntax.MapLiteral(tuple(entries), at=self.place(opening.offset)),
                         opening.offset, *parts)

    def struct_literal(self, type_name: str, offset: int) -> syntax.Node:
        self.expect("{")
        fields: list[syntax.MapEntry] = []
        while not self.at("}"):
            start = self.peek()
            optional = self.accept("?")
            name = self.take()
            if name.kind not in ("ident", "quoted"):
                raise self.unexpected(name, "a field name in the message literal")
            field_name = name.text.strip("`")
            self.expect(":", "`:` after the field name")
            value = self.expression()
            fields.append(syntax.MapEntry(syntax.Literal(field_name, at=self.place(name.offset)),
                                          value, optional, at=self.place(start.offset)))
            if not self.accept(","):
                break
        self.expect("}", "`,` or `}` in the message literal")
        return self.node(syntax.StructLiteral(type_name, tuple(fields), at=self.place(offset)),
                         offset, *(entry.value for entry in fields))

    # Literals --------------------------------------------------------------------------------

    def number(self, token: _Token, negative: bool, offset: int) -> syntax.Node:
        text = token.text
        at = self.place(offset)
        if token.kind == "float":
            value = float(text)
            return syntax.Literal(-value if negative else value, at=at)
        unsigned = text[-1] in "uU"
        digits = text[:-1] if unsigned else text
        number = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits)
        if unsigned:
            if negative:
                raise self.error(f"an unsigned literal cannot be negative: -{text}", offset)
            if number > UINT64_MAX:
                raise self.error(f"the unsigned literal {text} is out of range "
                                 f"(at most {UINT64_MAX}u)", offset)
            return syntax.Literal(UInt(number), at=at)
        if negative:
            number = -number
        if not -_INT64_MAX - 1 <= number <= _INT64_MAX:
            raise self.error(f"the integer literal {'-' if negative else ''}{text} is out of "
                             "the int64 range", offset)
        return syntax.Literal(number, at=at)

    def string(self, token: _Token) -> str | bytes:
        text = token.text
        prefix_length = 0
        while text[prefix_length] not in "'\"":
            prefix_length += 1
        prefix = text[:prefix_length].lower()
        is_bytes, is_raw = "b" in prefix, "r" in prefix
        body_offset = token.offset + prefix_length
        quoted = text[prefix_length:]
        if is_raw:
            raw = _RAW_BODY.fullmatch(quoted)
            if raw is None:
                raise self.error("a raw string cannot contain its own quote", token.offset)
            body = next(group for group in raw.groups() if group is not None)
            return body.encode("utf-8") if is_bytes else body
        quote_length = 3 if quoted[:3] in ("'''", '"""') else 1
        body = quoted[quote_length:-quote_length]
        return self.unescape(body, is_bytes, body_offset + quote_length)

    def unescape(self, body: str, is_bytes: bool, offset: int) -> str | bytes:
        if "\\" not in body:
            return body.encode("utf-8") if is_bytes else body
        out = bytearray()
        text: list[str] = []
        position = 0
        for match in _ESCAPE.finditer(body):
            plain = body[position:match.start()]
            simple, hex2, hex4, hex8, octal, bad = match.groups()
            where = offset + match.start()
            if bad is not None:
                shown = "\\" + bad if bad else "\\ at the end"
                raise self.error(f"invalid escape `{shown}` in a string literal (CEL knows "
                                 "\\a \\b \\f \\n \\r \\t \\v \\\\ \\' \\\" \\` \\? \\ooo "
                                 "\\xHH \\uHHHH \\UHHHHHHHH)", where)
            if is_bytes:
                out += plain.encode("utf-8")
                if simple is not None:
                    out += _SIMPLE_ESCAPES[simple].encode("ascii")
                elif hex2 is not None or octal is not None:
                    out.append(int(hex2, 16) if hex2 is not None else int(octal, 8))
                else:
                    out += self.code_point(hex4 or hex8, where).encode("utf-8")
            else:
                text.append(plain)
                if simple is not None:
                    text.append(_SIMPLE_ESCAPES[simple])
                elif hex2 is not None or octal is not None:
                    text.append(chr(int(hex2, 16) if hex2 is not None else int(octal, 8)))
                else:
                    text.append(self.code_point(hex4 or hex8, where))
            position = match.end()
        if is_bytes:
            out += body[position:].encode("utf-8")
            return bytes(out)
        text.append(body[position:])
        return "".join(text)

    def code_point(self, digits: str, offset: int) -> str:
        value = int(digits, 16)
        if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            raise self.error(f"the escape \\u{digits} is not a Unicode scalar value "
                             "(a surrogate or beyond U+10FFFF)", offset)
        return chr(value)


# Macros ------------------------------------------------------------------------------------

# method name → argument counts that make it a macro (cel-go's standard and extension macros)
_METHOD_MACROS: dict[str, frozenset[int]] = {
    "all": frozenset({2, 3}),
    "exists": frozenset({2, 3}),
    "exists_one": frozenset({2}),
    "existsOne": frozenset({2, 3}),
    "map": frozenset({2, 3}),
    "filter": frozenset({2}),
    "transformList": frozenset({3, 4}),
    "transformMap": frozenset({3, 4}),
    "transformMapEntry": frozenset({3, 4}),
    "sortBy": frozenset({2}),
    "optMap": frozenset({2}),
    "optFlatMap": frozenset({2}),
}
# how many leading arguments of the macro are variable names, by argument count
MACRO_VARIABLES: dict[str, dict[int, int]] = {
    "all": {2: 1, 3: 2}, "exists": {2: 1, 3: 2}, "existsOne": {2: 1, 3: 2},
    "exists_one": {2: 1}, "map": {2: 1, 3: 1}, "filter": {2: 1},
    "transformList": {3: 2, 4: 2}, "transformMap": {3: 2, 4: 2},
    "transformMapEntry": {3: 2, 4: 2}, "sortBy": {2: 1}, "optMap": {2: 1},
    "optFlatMap": {2: 1},
}


def _macro(name: str, target: syntax.Node, arguments: tuple[syntax.Node, ...],
           at: syntax.Position) -> syntax.Node | str:
    """``target.name(arguments)`` as a macro, a call, or an error message."""
    if name == "bind" and syntax.qualified_name(target) == "cel" and len(arguments) == 3:
        if not _is_simple_name(arguments[0]):
            return "cel.bind(name, init, body): the first argument must be a simple name"
        return syntax.Macro("cel.bind", arguments, None, at=at)
    counts = _METHOD_MACROS.get(name)
    if counts is None or len(arguments) not in counts:
        return syntax.Call(name, arguments, target, at=at)
    variables = MACRO_VARIABLES[name][len(arguments)]
    for number, argument in enumerate(arguments[:variables], start=1):
        if not _is_simple_name(argument):
            return (f"{name}(): argument {number} must be a simple name (the iteration "
                    "variable)")
    if variables == 2 and _names(arguments[:2])[0] == _names(arguments[:2])[1]:
        return f"{name}(): the two iteration variables must have different names"
    return syntax.Macro(name, arguments, target, at=at)


def _global_macro(name: str, arguments: tuple[syntax.Node, ...],
                  at: syntax.Position) -> syntax.Node | str:
    if name == "has" and len(arguments) == 1:
        argument = arguments[0]
        if not isinstance(argument, syntax.Select) or argument.optional:
            return "has() takes a field selection such as has(a.b)"
        return syntax.Macro("has", arguments, None, at=at)
    return syntax.Call(name, arguments, None, at=at)


def _is_simple_name(node: syntax.Node) -> bool:
    return isinstance(node, syntax.Ident) and not node.name.startswith(".")


def _names(nodes: tuple[syntax.Node, ...]) -> list[str]:
    return [node.name for node in nodes if isinstance(node, syntax.Ident)]
