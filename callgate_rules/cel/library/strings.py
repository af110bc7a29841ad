"""cel-go's strings extension (``ext.Strings``, version 3): ``charAt``, ``indexOf``,
``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``, ``split``, ``substring``,
``trim``, ``join``, ``format``, ``strings.quote``, ``reverse``.

Semantics and error messages are cel-go's (its ext/strings.go documentation and the
cel-spec conformance file ``string_ext.textproto``). Indices count Unicode code points, as
cel-go's rune indexing does; Python strings index by code point already. ``format`` is in
``formatting``.
"""

from __future__ import annotations

from typing import Any

from callgate_rules.cel.compiler.runtime.kinds import kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library.arguments import strings, typed
from callgate_rules.cel.library.formatting import format_string
from callgate_rules.cel.library.signatures import Function, global_, member

# Go's unicode.IsSpace: what strings.TrimSpace removes (Python's str.strip() also removes
# the ASCII separators U+001C..U+001F, which Go keeps).
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _out_of_range(index: int) -> CelEvaluationError:
    return CelEvaluationError(f"index out of range: {index}")


def char_at(text: Any, index: Any) -> str:
    """``'hello'.charAt(1)`` is ``'e'``; the index one past the end gives ``''``."""
    value, position = typed("charAt", (text, index), ("string", "int"))
    if position < 0 or position > len(value):
        raise _out_of_range(position)
    return value[position] if position < len(value) else ""


def _string_and_offset(
    function: str, text: Any, fragment: Any, offset: Any
) -> tuple[str, str, int]:
    if offset is None:
        value, part = strings(function, text, fragment)
        return value, part, -1
    value, part, start = typed(function, (text, fragment, offset), ("string", "string", "int"))
    return value, part, start


def index_of(text: Any, fragment: Any, offset: Any = None) -> int:
    """The code-point index of the first ``fragment`` at or after ``offset`` (0), or -1.
    An empty fragment is found at the offset; an offset outside the string is an error.
    Without an offset, a fragment longer than the string is simply not found (so
    ``''.indexOf('a')`` is -1, as ``''.lastIndexOf('@@')`` is in the conformance file)."""
    value, part, start = _string_and_offset("indexOf", text, fragment, offset)
    start = 0 if offset is None else start
    if part == "":
        return start
    if offset is None and len(part) > len(value):
        return -1
    if start < 0 or start >= len(value):
        raise _out_of_range(start)
    return value.find(part, start)


def last_index_of(text: Any, fragment: Any, offset: Any = None) -> int:
    """The code-point index of the last ``fragment`` starting at or before ``offset``
    (the end), or -1. An empty fragment is found at the offset (the length by default)."""
    value, part, last = _string_and_offset("lastIndexOf", text, fragment, offset)
    if offset is None:
        if part == "":
            return len(value)
        if len(part) > len(value):
            return -1
        last = len(value) - 1
    if part == "":
        return last
    if last < 0 or last >= len(value):
        raise _out_of_range(last)
    return value.rfind(part, 0, last + len(part))


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def lower_ascii(text: Any) -> str:
    """``'TacoCÆt'.lowerAscii()`` is ``'tacocÆt'``: only ASCII letters change."""
    (value,) = strings("lowerAscii", text)
    return str(value.translate(_ASCII_LOWER))


def upper_ascii(text: Any) -> str:
    (value,) = strings("upperAscii", text)
    return str(value.translate(_ASCII_UPPER))


def replace(text: Any, old: Any, new: Any, limit: Any = None) -> str:
    """Go's strings.Replace: ``limit`` replacements (all when negative or absent); an empty
    ``old`` matches before every code point and at the end."""
    if limit is None:
        value, before, after = strings("replace", text, old, new)
        count = -1
    else:
        value, before, after, count = typed(
            "replace", (text, old, new, limit), ("string", "string", "string", "int"))
    return value.replace(before, after, count if count >= 0 else -1)


def split(text: Any, separator: Any, limit: Any = None) -> list[str]:
    """Go's strings.SplitN: at most ``limit`` pieces (all when negative or absent, none for
    0); an empty separator splits between code points."""
    if limit is None:
        value, cut = strings("split", text, separator)
        count = -1
    else:
        value, cut, count = typed("split", (text, separator, limit), ("string", "string", "int"))
    if count == 0:
        return []
    if cut == "":
        if count < 0 or count >= len(value):
            return list(value)
        return [*value[: count - 1], value[count - 1:]]
    return value.split(cut, count - 1 if count > 0 else -1)


def substring(text: Any, start: Any, end: Any = None) -> str:
    """Code points ``start`` (inclusive) to ``end`` (exclusive, the end by default)."""
    if end is None:
        value, first = typed("substring", (text, start), ("string", "int"))
        if first < 0 or first > len(value):
            raise _out_of_range(first)
        return str(value[first:])
    value, first, last = typed("substring", (text, start, end), ("string", "int", "int"))
    if first > last:
        raise CelEvaluationError(f"invalid substring range. start: {first}, end: {last}")
    for bound in (first, last):
        if bound < 0 or bound > len(value):
            raise _out_of_range(bound)
    return str(value[first:last])


def trim(text: Any) -> str:
    """Leading and trailing Unicode white space removed (Go's strings.TrimSpace)."""
    (value,) = strings("trim", text)
    return value.strip(_GO_SPACE)


def join(items: Any, separator: Any = "") -> str:
    """``['a', 'b'].join('-')`` is ``'a-b'``; every element must be a string."""
    if kind(items) != "list":
        raise no_overload("join", items, separator)
    (glue,) = strings("join", separator)
    for item in items:
        if kind(item) != "string":
            raise CelEvaluationError(f"join: invalid input: {item!r}")
    return glue.join(items)


_QUOTED = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    "\v": "\\v", "\\": "\\\\", '"': '\\"',
}


def quote(text: Any) -> str:
    """``strings.quote(s)``: ``s`` in double quotes with CEL's escapes written out; a lone
    surrogate (invalid UTF-8 in any other language) becomes U+FFFD."""
    (value,) = strings("strings.quote", text)
    escaped = "".join(
        _QUOTED.get(c, "\ufffd" if "\ud800" <= c <= "\udfff" else c) for c in value)
    return f'"{escaped}"'


def reverse(text: Any) -> str:
    """The code points in reverse order."""
    (value,) = strings("reverse", text)
    return value[::-1]


LIBRARY = "strings"

# Extended to lists by the Kubernetes library (indexOf, lastIndexOf) and by the lists
# library (reverse).
INDEX_OF = Function("indexOf", LIBRARY, (
    member("string_index_of_string", "string", "string", "int"),
    member("string_index_of_string_int", "string", "string", "int", "int"),
), index_of, "code-point index of the first occurrence of a substring, or -1")
LAST_INDEX_OF = Function("lastIndexOf", LIBRARY, (
    member("string_last_index_of_string", "string", "string", "int"),
    member("string_last_index_of_string_int", "string", "string", "int", "int"),
), last_index_of, "code-point index of the last occurrence of a substring, or -1")
REVERSE = Function("reverse", LIBRARY, (member("string_reverse", "string", "string"),),
                   reverse, "the code points in reverse order")

FUNCTIONS: tuple[Function, ...] = (
    Function("charAt", LIBRARY, (member("string_char_at_int", "string", "int", "string"),),
             char_at, "the character at a code-point index ('' one past the end)"),
    INDEX_OF,
    LAST_INDEX_OF,
    Function("lowerAscii", LIBRARY, (member("string_lower_ascii", "string", "string"),),
             lower_ascii, "ASCII letters lower-cased, other characters unchanged"),
    Function("upperAscii", LIBRARY, (member("string_upper_ascii", "string", "string"),),
             upper_ascii, "ASCII letters upper-cased, other characters unchanged"),
    Function("replace", LIBRARY, (
        member("string_replace_string_string", "string", "string", "string", "string"),
        member("string_replace_string_string_int", "string", "string", "string", "int",
               "string"),
    ), replace, "occurrences of a substring replaced (all, or at most n)"),
    Function("split", LIBRARY, (
        member("string_split_string", "string", "string", "list(string)"),
        member("string_split_string_int", "string", "string", "int", "list(string)"),
    ), split, "the pieces between separators (all, or at most n)"),
    Function("substring", LIBRARY, (
        member("string_substring_int", "string", "int", "string"),
        member("string_substring_int_int", "string", "int", "int", "string"),
    ), substring, "the code points from start (inclusive) to end (exclusive)"),
    Function("trim", LIBRARY, (member("string_trim", "string", "string"),), trim,
             "leading and trailing Unicode white space removed"),
    Function("join", LIBRARY, (
        member("list_join", "list(string)", "string"),
        member("list_join_string", "list(string)", "string", "string"),
    ), join, "a list of strings concatenated, with an optional separator"),
    Function("format", LIBRARY, (member("string_format", "string", "list(dyn)", "string"),),
             format_string, "printf-style %s %d %f %e %b %o %x %X substitution"),
    Function("strings.quote", LIBRARY, (global_("strings_quote", "string", "string"),), quote,
             "the string in double quotes with escapes written out"),
    REVERSE,
)
