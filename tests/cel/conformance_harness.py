"""Run the CEL specification's conformance tests against callgate's CEL.

The data is google/cel-spec's ``tests/simple/testdata``: each ``.textproto`` file is a
``SimpleTestFile`` (see ``simple.proto`` / ``value.proto`` beside the data) written in
protobuf text format. This module carries a small text-format parser for the subset those
files use, so no protobuf dependency is needed.

Every test that fits callgate's value model (JSON-like data, uints, types, timestamps,
durations, bytes, optionals) runs through :func:`callgate_rules.cel.expression.compile_expression`,
the one way callgate evaluates CEL (there is no fallback interpreter). The core files and the
extension files callgate implements run (``FILES``); tests that need protobuf messages,
containers, unknowns or type-checking only are skipped, each with its reason, and so is
``network_ext`` (cel-go's network library is not implemented).

``tests/cel/test_conformance.py`` runs it. The differential tests and
``benchmarks/cel_benchmark.py`` use its plain cel-python evaluator (cel-python is a test-only
dependency, an oracle where it is right) and its value equality. Run it from the repository
root as ``python -m tests.cel.conformance_harness [-v] [DIR]`` to print the report, per
file (``-v`` lists every failure).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from callgate_rules.cel.errors import CelCompileError, CelEvaluationError, CelSyntaxError
from callgate_rules.cel.expression import compile_expression
from callgate_rules.cel.values import CelType, UInt

ENVIRONMENT_VARIABLE = "CALLGATE_CEL_CONFORMANCE_DIR"

# ---------------------------------------------------------------------------------------------
# Protobuf text format, the subset the conformance files use
# ---------------------------------------------------------------------------------------------

TextScalar = bytes | int | float | str  # str: an identifier such as true or NULL_VALUE


class TextFormatError(ValueError):
    """The text is not protobuf text format as far as this parser understands it."""


class TextMessage:
    """A parsed message: field name → every value given for it, in order."""

    def __init__(self) -> None:
        self.fields: dict[str, list[TextScalar | TextMessage]] = {}

    def add(self, name: str, value: TextScalar | TextMessage) -> None:
        self.fields.setdefault(name, []).append(value)

    def has(self, name: str) -> bool:
        return name in self.fields

    def values(self, name: str) -> list[TextScalar | TextMessage]:
        return self.fields.get(name, [])

    def messages(self, name: str) -> list[TextMessage]:
        return [value for value in self.values(name) if isinstance(value, TextMessage)]

    def message(self, name: str) -> TextMessage | None:
        found = self.messages(name)
        return found[-1] if found else None

    def scalar(self, name: str) -> TextScalar | None:
        for value in reversed(self.values(name)):
            if not isinstance(value, TextMessage):
                return value
        return None

    def text(self, name: str, default: str = "") -> str:
        value = self.scalar(name)
        if value is None:
            return default
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return str(value)

    def flag(self, name: str) -> bool:
        return self.scalar(name) in ("true", "True", "t", 1)

    def only_field(self) -> tuple[str, TextScalar | TextMessage] | None:
        """The single field set in a ``oneof``-style message, if exactly one is set."""
        if len(self.fields) != 1:
            return None
        name, values = next(iter(self.fields.items()))
        return name, values[-1]


_TOKEN = re.compile(
    r"""
    (?P<skip>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fF]?(?![\w.]))
  | (?P<ident>[A-Za-z_][\w.]*)
  | (?P<punct>[{}<>:\[\],;/-])
    """,
    re.VERBOSE,
)

_SIMPLE_ESCAPES = {
    "n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v",
    "\\": b"\\", "'": b"'", '"': b'"', "?": b"?",
}
_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))"
)


def _unescape(quoted: str) -> bytes:
    """A text-format string literal (quotes included) → its bytes."""
    body = quoted[1:-1]
    out = bytearray()
    position = 0
    for match in _ESCAPE.finditer(body):
        out += body[position : match.start()].encode("utf-8")
        octal, hexadecimal, short_unicode, long_unicode, simple = match.groups()
        if octal is not None:
            out.append(int(octal, 8) & 0xFF)
        elif hexadecimal is not None:
            out.append(int(hexadecimal, 16))
        elif short_unicode is not None or long_unicode is not None:
            out += chr(int(short_unicode or long_unicode, 16)).encode("utf-8")
        elif simple in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[simple]
        else:
            raise TextFormatError(f"unknown escape \\{simple} in {quoted}")
        position = match.end()
    out += body[position:].encode("utf-8")
    return bytes(out)


class _TextParser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        position = 0
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None:
                raise TextFormatError(f"unexpected character {text[position]!r} at {position}")
            kind = match.lastgroup or "skip"
            if kind != "skip":
                self.tokens.append((kind, match.group()))
            position = match.end()
        self.index = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise TextFormatError("unexpected end of text")
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        kind, value = self.take()
        if value != text:
            raise TextFormatError(f"expected {text!r}, found {value!r}")

    def at(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token[1] == text

    def parse_message(self, closing: str | None) -> TextMessage:
        message = TextMessage()
        while True:
            token = self.peek()
            if token is None:
                if closing is not None:
                    raise TextFormatError(f"missing {closing!r}")
                return message
            if token[1] == closing:
                self.take()
                return message
            name = self.parse_field_name()
            if self.at(":"):
                self.take()
                if self.at("{") or self.at("<"):
                    message.add(name, self.parse_nested())
                elif self.at("["):
                    self.take()
                    while not self.at("]"):
                        message.add(name, self.parse_value())
                        if self.at(","):
                            self.take()
                    self.take()
                else:
                    message.add(name, self.parse_value())
            else:
                message.add(name, self.parse_nested())
            if self.at(",") or self.at(";"):
                self.take()

    def parse_field_name(self) -> str:
        kind, value = self.take()
        if value == "[":  # an extension or Any type URL: [type.googleapis.com/pkg.Message]
            parts = []
            while not self.at("]"):
                parts.append(self.take()[1])
            self.take()
            return "[" + "".join(parts) + "]"
        if kind != "ident":
            raise TextFormatError(f"expected a field name, found {value!r}")
        return value

    def parse_nested(self) -> TextMessage:
        kind, value = self.take()
        if value == "{":
            return self.parse_message("}")
        if value == "<":
            return self.parse_message(">")
        raise TextFormatError(f"expected a message, found {value!r}")

    def parse_value(self) -> TextScalar | TextMessage:
        if self.at("{") or self.at("<"):
            return self.parse_nested()
        kind, value = self.take()
        if kind == "string":
            data = _unescape(value)
            while (following := self.peek()) is not None and following[0] == "string":
                data += _unescape(self.take()[1])  # adjacent literals concatenate
            return data
        if kind == "number":
            text = value.rstrip("fF") if not value.lower().startswith(("0x", "-0x")) else value
            if re.fullmatch(r"-?0[xX][0-9a-fA-F]+", text):
                return int(text, 16)
            if re.fullmatch(r"-?\d+", text):
                return int(text)
            return float(text)
        if value == "-":
            kind, value = self.take()
            if value.lower() in ("inf", "infinity"):
                return -math.inf
            raise TextFormatError(f"unexpected '-' before {value!r}")
        if kind == "ident":
            return value
        raise TextFormatError(f"unexpected {value!r}")


def parse_text_format(text: str) -> TextMessage:
    """Parse protobuf text format into a :class:`TextMessage` tree (no schema needed)."""
    return _TextParser(text).parse_message(None)


# ---------------------------------------------------------------------------------------------
# cel.expr.Value → plain Python
# ---------------------------------------------------------------------------------------------


class Unsupported(Exception):
    """The test needs something callgate's value model cannot represent; ``category`` says what."""

    def __init__(self, category: str) -> None:
        super().__init__(category)
        self.category = category


NEEDS_MESSAGES = "needs protobuf messages"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WRAPPERS = {
    "google.protobuf.BoolValue", "google.protobuf.BytesValue", "google.protobuf.DoubleValue",
    "google.protobuf.FloatValue", "google.protobuf.Int32Value", "google.protobuf.Int64Value",
    "google.protobuf.StringValue", "google.protobuf.UInt32Value", "google.protobuf.UInt64Value",
}


def _number(value: TextScalar | TextMessage | None, as_float: bool = False) -> Any:
    if isinstance(value, str) and value.lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, str) and value.lower() == "nan":
        return math.nan
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TextFormatError(f"expected a number, found {value!r}")
    return float(value) if as_float else value


def to_python(value: TextMessage) -> Any:
    """A ``cel.expr.Value`` message → the plain Python value callgate uses."""
    only = value.only_field()
    if only is None:
        raise TextFormatError(f"a Value sets exactly one field, found {sorted(value.fields)}")
    kind, payload = only
    if kind == "null_value":
        return None
    if kind == "bool_value":
        return payload in ("true", "True", "t", 1)
    if kind == "int64_value":
        return _number(payload)
    if kind == "uint64_value":
        return UInt(_number(payload))
    if kind == "double_value":
        return _number(payload, as_float=True)
    if kind == "string_value":
        assert isinstance(payload, bytes)
        return payload.decode("utf-8")
    if kind == "bytes_value":
        assert isinstance(payload, bytes)
        return payload
    if kind == "list_value":
        assert isinstance(payload, TextMessage)
        return [to_python(item) for item in payload.messages("values")]
    if kind == "map_value":
        assert isinstance(payload, TextMessage)
        result: dict[Any, Any] = {}
        for entry in payload.messages("entries"):
            key, item = entry.message("key"), entry.message("value")
            if key is None or item is None:
                raise TextFormatError("map entry without key or value")
            result[to_python(key)] = to_python(item)
        return result
    if kind == "object_value":
        assert isinstance(payload, TextMessage)
        return _any_to_python(payload)
    if kind == "optional_value":  # not in value.proto; kept for completeness
        raise Unsupported("optional values")
    if kind == "type_value":
        assert isinstance(payload, bytes)
        return CelType(payload.decode("utf-8"))
    if kind == "enum_value":
        raise Unsupported("protobuf enums")
    raise TextFormatError(f"unknown Value field {kind!r}")


def _any_to_python(any_message: TextMessage) -> Any:
    only = any_message.only_field()
    if only is None or not only[0].startswith("["):
        raise Unsupported(NEEDS_MESSAGES)
    type_name = only[0].strip("[]").rsplit("/", 1)[-1]
    body = only[1]
    if not isinstance(body, TextMessage):
        raise TextFormatError(f"Any payload for {type_name} is not a message")
    if type_name == "google.protobuf.Duration":
        seconds = _number(body.scalar("seconds") or 0)
        nanos = _number(body.scalar("nanos") or 0)
        return timedelta(seconds=seconds, microseconds=nanos // 1000)
    if type_name == "google.protobuf.Timestamp":
        seconds = _number(body.scalar("seconds") or 0)
        nanos = _number(body.scalar("nanos") or 0)
        return _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
    if type_name in _WRAPPERS:
        wrapped = body.scalar("value")
        if type_name.endswith(("DoubleValue", "FloatValue")):
            return _number(wrapped if wrapped is not None else 0, as_float=True)
        if type_name.endswith("BoolValue"):
            return wrapped in ("true", "True", "t", 1)
        if type_name.endswith("StringValue"):
            return (wrapped or b"").decode("utf-8") if isinstance(wrapped, bytes | None) else ""
        if type_name.endswith("BytesValue"):
            return wrapped if isinstance(wrapped, bytes) else b""
        return _number(wrapped if wrapped is not None else 0)
    raise Unsupported(NEEDS_MESSAGES)


def same_value(expected: Any, actual: Any) -> bool:
    """CEL value equality for checking results: types must match (``1`` is not ``1.0``,
    ``true`` is not ``1``), NaN matches NaN, maps compare by entries."""
    if type(expected) is not type(actual):
        if isinstance(expected, datetime) and isinstance(actual, datetime):
            return expected == actual
        if isinstance(expected, timedelta) and isinstance(actual, timedelta):
            return expected == actual
        if isinstance(expected, dict) and isinstance(actual, Mapping):
            pass
        elif isinstance(expected, list) and isinstance(actual, list | tuple):
            pass
        else:
            return False
    if isinstance(expected, float):
        return (math.isnan(expected) and math.isnan(actual)) or expected == actual
    if isinstance(expected, list):
        return len(expected) == len(actual) and all(
            same_value(e, a) for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(expected, dict):
        if len(expected) != len(actual):
            return False
        for key, value in expected.items():
            matches = [k for k in actual if same_value(key, k)]
            if len(matches) != 1 or not same_value(value, actual[matches[0]]):
                return False
        return True
    return bool(expected == actual)


# ---------------------------------------------------------------------------------------------
# Test cases
# ---------------------------------------------------------------------------------------------

_MESSAGE_NAMES = re.compile(
    r"\bTestAllTypes\b|\bNestedTestAllTypes\b|\bgoogle\.protobuf\.|\bcel\.expr\."
)
_SHORT_MESSAGE_NAMES = re.compile(r"[A-Z]\w*\s*\{|\.[A-Z]|\b[A-Z]\w*\.")
_EXPECTATIONS = (
    "value", "typed_result", "eval_error", "any_eval_errors", "unknown", "any_unknowns",
)


@dataclass(frozen=True)
class ConformanceCase:
    """One conformance test, ready to run (or the reason it cannot run)."""

    file: str
    section: str
    name: str
    expr: str
    bindings: Mapping[str, Any]
    expect_error: bool
    expected: Any  # the value when ``expect_error`` is false
    skip: str | None  # a reason category, or None when the case runs
    unchecked: bool = False  # ``disable_check``: the spec runs it without type-checking

    @property
    def case_id(self) -> str:
        return f"{self.file}/{self.section}/{self.name}"


def _skip_category(test: TextMessage) -> str | None:
    expr = test.text("expr")
    if test.flag("check_only"):
        return "type-checking only"
    if _MESSAGE_NAMES.search(expr) or (test.text("container")
                                       and _SHORT_MESSAGE_NAMES.search(expr)):
        return NEEDS_MESSAGES
    if test.text("container"):
        return "containers (names resolved in a namespace; callgate binds plain names)"
    for declaration in test.messages("type_env"):
        if "message_type" in repr_declaration(declaration) or declaration.has("function"):
            return NEEDS_MESSAGES if declaration.has("ident") else "custom functions"
    if test.has("unknown") or test.has("any_unknowns"):
        return "unknowns"
    if not any(test.has(name) for name in _EXPECTATIONS):
        return "type-checking only"
    return None


def repr_declaration(message: TextMessage) -> str:
    """A flat rendering of a type declaration, enough to spot message types in it."""
    parts: list[str] = []
    for name, values in message.fields.items():
        for value in values:
            parts.append(name)
            if isinstance(value, TextMessage):
                parts.append(repr_declaration(value))
    return " ".join(parts)


def _case_from(file: str, section: str, test: TextMessage) -> ConformanceCase:
    name = test.text("name")
    expr = test.text("expr")
    skip = _skip_category(test)
    bindings: dict[str, Any] = {}
    expected: Any = None
    expect_error = test.has("eval_error") or test.has("any_eval_errors")
    if skip is None:
        try:
            for binding in test.messages("bindings"):
                holder = binding.message("value")
                value = holder.message("value") if holder is not None else None
                if value is None:
                    raise Unsupported("error or unknown bindings")
                name = binding.text("key")
                if "." in name:
                    raise Unsupported("qualified variable names")
                bindings[name] = to_python(value)
            if not expect_error:
                result = test.message("value")
                if result is None:
                    typed = test.message("typed_result")
                    result = typed.message("result") if typed is not None else None
                if result is None:
                    raise Unsupported("type-checking only")
                expected = to_python(result)
        except Unsupported as reason:
            skip = reason.category
    return ConformanceCase(file, section, name, expr, bindings, expect_error, expected, skip,
                           test.flag("disable_check"))


def load_cases(directory: Path) -> Iterator[ConformanceCase]:
    """Every test of every ``*.textproto`` file in ``directory``, in file order."""
    for path in sorted(directory.glob("*.textproto")):
        document = parse_text_format(path.read_text(encoding="utf-8"))
        for section in document.messages("section"):
            for test in section.messages("test"):
                yield _case_from(path.stem, section.text("name"), test)


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------

Evaluator = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Outcome:
    passed: bool
    detail: str  # what happened, for the report


def _judge(case: ConformanceCase, run: Callable[[], Any]) -> Outcome:
    try:
        actual = run()
    except CelEvaluationError as error:
        if case.expect_error:
            return Outcome(True, f"error: {error}")
        return Outcome(False, f"error {str(error)[:120]!r}, expected {case.expected!r}")
    except CelCompileError as error:
        # An error the spec expects when the expression runs (an unknown function, a wrong
        # argument count) is raised when callgate compiles it: earlier, and still an error.
        if case.expect_error:
            return Outcome(True, f"compile error: {error}")
        return Outcome(False, f"compile error: {error}")
    except CelSyntaxError as error:
        return Outcome(False, f"syntax error: {error}")
    except Exception as error:  # a crash of the evaluator itself counts as a failure
        return Outcome(False, f"crash {type(error).__name__}: {str(error)[:120]}")
    if case.expect_error:
        return Outcome(False, f"value {actual!r}, expected an error")
    if same_value(case.expected, actual):
        return Outcome(True, f"value {actual!r}")
    return Outcome(False, f"value {actual!r}, expected {case.expected!r}")


@dataclass(frozen=True)
class CaseResult:
    case: ConformanceCase
    outcome: Outcome


# The files that run: the spec's core files and the extension libraries callgate implements.
CORE_FILES = (
    "basic", "comparisons", "conversions", "dynamic", "fields", "fp_math", "integer_math",
    "lists", "logic", "macros", "macros2", "namespace", "parse", "plumbing", "string",
    "timestamps",
)
EXTENSION_FILES = ("string_ext", "math_ext", "optionals", "bindings_ext", "encoders_ext",
                   "network_ext")
NOT_IMPLEMENTED: dict[str, str] = {}  # file → why it does not run


@dataclass
class FileReport:
    name: str
    results: list[CaseResult] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def ran(self) -> int:
        return len(self.results)

    @property
    def passed(self) -> int:
        return sum(1 for result in self.results if result.outcome.passed)

    def failures(self) -> list[CaseResult]:
        return [result for result in self.results if not result.outcome.passed]


@dataclass
class ConformanceReport:
    directory: Path
    files: dict[str, FileReport] = field(default_factory=dict)

    @property
    def results(self) -> list[CaseResult]:
        return [result for report in self.files.values() for result in report.results]

    @property
    def skipped(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for report in self.files.values():
            total.update(report.skipped)
        return total

    @property
    def ran(self) -> int:
        return len(self.results)

    @property
    def passed(self) -> int:
        return sum(1 for result in self.results if result.outcome.passed)

    def failures(self) -> list[CaseResult]:
        return [result for result in self.results if not result.outcome.passed]

    def format(self, verbose: bool = False) -> str:
        lines = [
            f"CEL conformance through compile_expression ({self.directory})",
            f"  ran {self.ran}, passed {self.passed}, failed {len(self.failures())}, "
            f"skipped {sum(self.skipped.values())}",
            f"  {'file':14} {'ran':>5} {'passed':>7} {'%':>6} {'skipped':>8}",
        ]
        for name, report in self.files.items():
            share = f"{100 * report.passed / report.ran:.1f}" if report.ran else "-"
            lines.append(f"  {name:14} {report.ran:>5} {report.passed:>7} {share:>6} "
                         f"{sum(report.skipped.values()):>8}")
        lines.append("  skipped by reason:")
        lines += [f"    {reason}: {count}" for reason, count in sorted(self.skipped.items())]
        if verbose and self.failures():
            lines.append("  failures:")
            lines += [f"    {r.case.case_id}: {r.case.expr!r} → {r.outcome.detail}"
                      for r in self.failures()]
        return "\n".join(lines)


# A deliberate difference: the spec's unchecked tests call an unknown function where ``||``
# absorbs the run-time error; callgate refuses an unknown function when it compiles the
# expression (so that it can never reach a decision), as a type-checked cel-go does.
UNKNOWN_FUNCTION_REFUSED = "unknown function refused at compile time (deliberate)"


# A deliberate difference: cel-go orders an int against a double by converting the int to a
# double, so these four expect 9223372036854775807 < 9223372036854775808.0 to be false;
# callgate compares numbers exactly on the number line (consistent with its ``==``, and an
# integral JSON number decides as the same number written with a fraction at any magnitude).
EXACT_NUMERIC_ORDERING = "int against double compared exactly, not as doubles (deliberate)"
DELIBERATE_SKIPS: dict[str, str] = {
    case_id: EXACT_NUMERIC_ORDERING for case_id in (
        "comparisons/lt_literal/not_lt_dyn_int_big_lossy_double",
        "comparisons/gt_literal/not_gt_dyn_big_double_int",
        "comparisons/lte_literal/lte_dyn_big_double_int",
        "comparisons/gte_literal/gte_dyn_int_big_lossy_double",
    )
}


def run_case(case: ConformanceCase) -> CaseResult | str:
    """The case's result, or the reason it is skipped after all."""
    if case.case_id in DELIBERATE_SKIPS:
        return DELIBERATE_SKIPS[case.case_id]
    if case.unchecked and not case.expect_error:
        try:
            compile_expression(case.expr)
        except CelCompileError as error:
            if "unknown function" in str(error):
                return UNKNOWN_FUNCTION_REFUSED
    return CaseResult(case, _judge(case, lambda: compile_expression(case.expr)(case.bindings)))


def run_conformance(directory: Path) -> ConformanceReport:
    report = ConformanceReport(directory)
    for case in load_cases(directory):
        file_report = report.files.setdefault(case.file, FileReport(case.file))
        if case.file in NOT_IMPLEMENTED:
            file_report.skipped[NOT_IMPLEMENTED[case.file]] += 1
        elif case.skip is not None:
            file_report.skipped[case.skip] += 1
        else:
            result = run_case(case)
            if isinstance(result, str):
                file_report.skipped[result] += 1
            else:
                file_report.results.append(result)
    return report


def default_directory() -> Path:
    """``$CALLGATE_CEL_CONFORMANCE_DIR``, else ``shared/conformance/cel-spec`` beside the repo."""
    configured = os.environ.get(ENVIRONMENT_VARIABLE)
    if configured:
        return Path(configured)
    repository_root = Path(__file__).resolve().parents[2]  # tests/cel/ → the repository
    return repository_root / ".." / "shared" / "conformance" / "cel-spec"


def main(arguments: list[str]) -> int:
    verbose = "-v" in arguments
    positional = [argument for argument in arguments if argument != "-v"]
    directory = Path(positional[0]) if positional else default_directory()
    if not directory.is_dir():
        print(f"no conformance data at {directory}", file=sys.stderr)
        return 2
    report = run_conformance(directory)
    print(report.format(verbose=verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
