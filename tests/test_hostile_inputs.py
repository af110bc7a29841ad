"""Hostile input at the gate's boundary: regular expressions, YAML and numbers (issue 13).

What an attacker or an unlucky operator would send ends in a classified decision or one
clear line naming the file — never a stall, a traceback or a MemoryError:

- every pattern run on the model's text has RE2 semantics and runs in linear time, and a
  pattern RE2 refuses is refused at load, naming file:line:col and the field;
- a YAML file too large, too deep, recursive or an alias bomb is refused quickly in bounded
  memory, whichever reader meets it;
- NaN and the infinities in the arguments are ``invalid_argument``, and a repeated key in
  the model's JSON is ``malformed``.

Where the code before the fix would stall or exhaust memory, the input runs in a child
process under a time limit (and a memory limit), so such a regression fails the test
instead of hanging the suite; the limits are seconds, generous enough never to flake. The
timings themselves are printed by ``benchmarks/hostile_inputs.py``.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import re2  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.errors import ConfigError, InputError
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.propose import read_json
from callgate_rules.regex import PatternError, compile_pattern, is_linear_under_backtracking
from callgate_rules.taxonomy import ErrorClass, Route

REPO = Path(__file__).resolve().parents[1]
HOSTILE = "^(a+)+$"
HOSTILE_TEXT = "a" * 40 + "!"
SECONDS = 30  # a generous limit: the hostile inputs take milliseconds


def run_python(code: str, *, memory: int = 1536 * 2**20, timeout: float = 120) -> Any:
    """Run ``code`` in a child process under a memory and a time limit; the JSON it prints
    last. A stall or an exhausted memory fails the test here, not the suite."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    try:
        process = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                                 capture_output=True, text=True, timeout=timeout, cwd=REPO,
                                 preexec_fn=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s")
    assert process.returncode == 0, process.stderr[-2000:]
    return json.loads(process.stdout.splitlines()[-1])


def callgate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The installed command, in its own process (so a stall is a failure, not a hang)."""
    script = Path(sys.executable).with_name("callgate")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "callgate_rules.cli"]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))

    try:
        return subprocess.run([*command, *args], capture_output=True, text=True, cwd=REPO,
                              timeout=timeout, preexec_fn=limit,
                              env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"callgate {' '.join(args)} still running after {timeout} s")


def one_clear_line(process: subprocess.CompletedProcess[str], exit_code: int) -> str:
    output = process.stdout + process.stderr
    assert "Traceback" not in output and "MemoryError" not in output, output[-2000:]
    assert process.returncode == exit_code, output[-2000:]
    return output


# A configuration of our own: a pattern, a patternProperties key and a CEL rule on the model's
# text, and a bounded amount, as in the sendPayment.

def contract(pattern: str = HOSTILE, key: str = HOSTILE, rule: str = HOSTILE) -> str:
    return f"""\
apiVersion: callgate/v1
kind: ToolContract
metadata: {{name: pay, version: "1.0.0", owner: o@example.com, description: Pay.}}
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [amount]
    properties:
      amount: {{type: number, exclusiveMinimum: 0, maximum: 10000}}
      code: {{type: string, pattern: '{pattern}'}}
      tags:
        type: object
        patternProperties: {{'{key}': {{type: string}}}}
      label: {{type: string}}
  rules:
    - name: label-plain
      expression: '!has(args.label) || !args.label.matches("{rule}")'
      error_class: invalid_argument
      message: The label is not plain.
  examples: [{{arguments: {{amount: 5}}}}]
"""


POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: everyone, version: "1.0.0", owner: o@example.com, description: Anyone.}
spec:
  rules:
    - {name: anyone, effect: allow, tools: ["*"], when: "true"}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "contracts").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "contracts" / "pay.yaml").write_text(contract(), "utf-8")
    (tmp_path / "policies" / "access.yaml").write_text(POLICY, "utf-8")
    return tmp_path


def pay_gate(config: Path) -> Any:
    from callgate_rules.pipeline.gate import Gate
    from callgate_rules.store.memory import MemoryStore

    return Gate.from_paths(config / "contracts", config / "policies", store=MemoryStore(),
                           executors={"pay": lambda request: {"ok": True}})


# Linear-time patterns ---------------------------------------------------------------------------


def test_a_catastrophic_pattern_decides_in_linear_time(config: Path) -> None:
    """``^(a+)+$`` on 41 characters: as a pattern, a patternProperties key and in a CEL
    rule. Python's re takes minutes; each decision here must take milliseconds."""
    outcome = run_python(f"""
        import json, time
        from callgate_rules.pipeline.gate import Gate
        gate = Gate.from_paths({str(config / "contracts")!r}, {str(config / "policies")!r})
        hostile = {HOSTILE_TEXT!r}
        result = {{}}
        for name, arguments in (("pattern", {{"amount": 5, "code": hostile}}),
                                ("patternProperties", {{"amount": 5, "tags": {{hostile: 1}}}}),
                                ("matches", {{"amount": 5, "label": hostile}})):
            start = time.perf_counter()
            decision = gate.check({{"name": "pay", "arguments": arguments}}, actor={{}})
            result[name] = [str(decision.error_class), time.perf_counter() - start]
        print(json.dumps(result))
    """)
    assert outcome["pattern"][0] == "invalid_argument"
    assert outcome["patternProperties"][0] == "None"  # the key does not match: not checked
    assert outcome["matches"][0] == "None"  # the label does not match the pattern: plain
    assert all(seconds < SECONDS for _, seconds in outcome.values()), outcome


def test_callgate_check_decides_a_catastrophic_pattern_quickly(config: Path) -> None:
    call = config / "call.json"
    call.write_text(json.dumps({"name": "pay", "arguments": {"amount": 5,
                                                             "code": HOSTILE_TEXT}}), "utf-8")
    actor = config / "actor.json"
    actor.write_text("{}", "utf-8")
    process = callgate("check", "--call", str(call), "--actor", str(actor), "--format", "json",
                       str(config / "contracts"),
                       str(config / "policies"), timeout=60)
    one_clear_line(process, 1)  # regenerate: not executed
    payload = json.loads(process.stdout)
    assert (payload["route"], payload["error_class"]) == ("regenerate", "invalid_argument")


@pytest.mark.parametrize(("where", "document", "field", "told"), [
    ("pattern", contract(pattern="^(a)\\1$"), "spec.arguments.properties.code.pattern",
     "backreferences are not supported"),
    ("patternProperties", contract(key="^(?=x)"),
     "spec.arguments.properties.tags.patternProperties", "lookahead is not supported"),
    ("CEL matches()", contract(rule="(?<!a)b"), "spec.rules[0].expression",
     "negative lookbehind is not supported"),
])
def test_a_pattern_re2_refuses_is_refused_at_load_naming_the_place(
        config: Path, where: str, document: str, field: str, told: str) -> None:
    path = config / "contracts" / "pay.yaml"
    path.write_text(document, "utf-8")
    with pytest.raises(ConfigError) as raised:
        pay_gate(config)
    [finding] = [f for f in raised.value.findings if getattr(f, "code", "") == "regex"]
    line = next(number for number, text in enumerate(document.splitlines(), 1)
                if ("?<!a" if where == "CEL matches()" else "(a)" if where == "pattern"
                    else "?=x") in text)
    assert (finding.location.path, finding.location.line) == (str(path), line)
    assert finding.message.startswith(field) and told in finding.message
    assert "RE2" in finding.message
    process = callgate("lint", str(config / "contracts"), str(config / "policies"))
    output = one_clear_line(process, 1)
    assert f"{path}:{line}:{finding.location.column}: error regex {field}" in output


def test_a_literal_pattern_in_cel_is_pointed_at_exactly(config: Path) -> None:
    path = config / "contracts" / "pay.yaml"
    path.write_text(contract(rule="(a)\\\\2"), "utf-8")
    with pytest.raises(ConfigError) as raised:
        pay_gate(config)
    [finding] = [f for f in raised.value.findings if f.code == "regex"]
    text = path.read_text("utf-8").splitlines()[finding.location.line - 1]
    assert text[finding.location.column - 1:].startswith('"(a)'), text


def test_unevaluated_properties_would_bring_back_the_backtracking_matcher(
        config: Path) -> None:
    document = contract().replace("      label: {type: string}\n",
                                  "      label: {type: string}\n    unevaluatedProperties: false\n")
    (config / "contracts" / "pay.yaml").write_text(document, "utf-8")
    with pytest.raises(ConfigError, match="unevaluatedProperties is not supported together"):
        pay_gate(config)


def test_every_reference_pattern_stays_on_the_faster_engine() -> None:
    """The shipped contracts' patterns are provably linear under backtracking, so they keep
    Python's re (a third of RE2's per-call cost from Python)."""
    import yaml

    patterns = []
    for path in sorted((REPO / "contracts").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text("utf-8")):
            for field in document["spec"]["arguments"].get("properties", {}).values():
                if "pattern" in field:
                    patterns.append(field["pattern"])
    assert patterns
    assert {pattern: compile_pattern(pattern).engine for pattern in patterns} == \
        {pattern: "re" for pattern in patterns}


@pytest.mark.parametrize("pattern", [
    HOSTILE, "^a*a$", "^(a|a)*$", "^[a-z]+[a-z0-9]*$", "^a?a?a?aaa$", "^\\d*\\d$", "a+b",
    "^[^@]+[^.]+$", "^(?:ab)+$", "^.*x$", "^a{1,10}a{1,10}$",
])
def test_patterns_a_backtracking_matcher_could_stall_on_go_to_re2(pattern: str) -> None:
    assert not is_linear_under_backtracking(pattern)
    assert compile_pattern(pattern).engine == "re2"


def test_re2_meaning_differs_from_pythons_where_it_should() -> None:
    digits = compile_pattern("^[0-9]+$").search
    assert compile_pattern("^T-[0-9]{3,8}$").search("T-123\n") is False  # $ is the very end
    assert compile_pattern("^\\d+$").search("١٢٣") is False  # \d is ASCII
    assert digits("123") is True and digits("12a") is False
    with pytest.raises(PatternError, match="lone UTF-16 surrogate"):
        compile_pattern("^a\ud800$")
    # a lone surrogate in the text (not text, but Python lets it in) never raises
    assert compile_pattern("^x.a$").search("x\ud800a") is True  # re
    assert compile_pattern("(?:a)").search("x\ud800a") is True  # re2


plain_atoms = st.sampled_from(["a", "b", "-", "\\.", ".", "[ab]", "[^a]", "[a-c]", "\\d",
                               "\\w", "\\s", "[\\d-]", "x", "[]a]"])
quantifiers = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,3}", "{2,}"])
plain_patterns = st.lists(st.tuples(plain_atoms, quantifiers), max_size=5).flatmap(
    lambda items: st.sampled_from(["$", ""]).map(
        lambda end: "^" + "".join(atom + quantifier for atom, quantifier in items) + end))
texts = st.text(alphabet="ab-.xc1 \n\t_é١", max_size=12)


@settings(max_examples=500, deadline=None)
@given(pattern=plain_patterns, text=texts)
def test_the_faster_engine_answers_as_re2_does(pattern: str, text: str) -> None:
    compiled = compile_pattern(pattern)
    assert compiled.search(text) is (re2.search(pattern, text) is not None), compiled.engine


# Bounded YAML ---------------------------------------------------------------------------------


def alias_bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 10)]
    return "\n".join(lines) + "\n"


def as_document(kind: str, body: str) -> str:
    """``body`` (YAML lines at column 0) inside a document of ``kind``, where each reader
    would go on to walk it."""
    nested = textwrap.indent(body, "    ")
    if kind == "PolicyTest":
        return ("apiVersion: callgate/v1\nkind: PolicyTest\nmetadata: {name: t, version: '1', "
                "owner: o@example.com, description: d}\nspec:\n  cases:\n  - name: c\n"
                f"    world:\n{textwrap.indent(nested, '  ')}")
    if kind == "scenario":
        return f"name: s\nactor: {{id: U-1}}\nworld:\n{nested}steps: []\n"
    return (f"apiVersion: callgate/v1\nkind: {kind}\nmetadata: {{name: x, version: '1', "
            f"owner: o@example.com, description: d}}\nspec:\n  bomb:\n{nested}")


def test_an_alias_bomb_is_refused_quickly_in_bounded_memory_by_every_reader(
        tmp_path: Path) -> None:
    """Nine levels of ``&a [*a, ...]``: today ``Gate.from_paths`` grows past 5 GB. In a child
    process limited to 1.5 GB, every reader must refuse it with one error naming the file."""
    bomb = alias_bomb()
    files = {kind: tmp_path / f"{kind}.yaml" for kind in ("ToolContract", "AccessPolicy",
                                                          "PolicyTest", "scenario")}
    for kind, path in files.items():
        path.write_text(as_document(kind, bomb), "utf-8")
    (tmp_path / "world.yaml").write_text(bomb, "utf-8")
    outcome = run_python(f"""
        import json
        from callgate_rules.documents.compiler import load
        from callgate_rules.documents.source import read_data_file
        from callgate_rules.errors import CallgateError
        from callgate_rules.harness.policytest import load_tests
        from callgate_rules.harness.scenarios import load_scenarios
        readers = {{
            "ToolContract": lambda: load([{str(files["ToolContract"])!r}]),
            "AccessPolicy": lambda: load([{str(files["AccessPolicy"])!r}]),
            "PolicyTest": lambda: load_tests([{str(files["PolicyTest"])!r}]),
            "scenario": lambda: load_scenarios([{str(files["scenario"])!r}]),
            "world": lambda: read_data_file({str(tmp_path / "world.yaml")!r}, "the world"),
        }}
        result = {{}}
        for name, read in readers.items():
            try:
                read()
                result[name] = "read"
            except CallgateError as error:
                result[name] = str(error)
        print(json.dumps(result))
    """, timeout=120)
    for name, message in outcome.items():
        assert "more than 100,000 nodes once aliases are expanded" in message, (name, message)
        assert len(message.splitlines()) == 1, message
        assert message.startswith(str(files.get(name, tmp_path / "world.yaml"))), message


HOSTILE_YAML = {
    "alias bomb": (alias_bomb(), "more than 100,000 nodes"),
    "nested 5,000 deep": ("- " * 5_000 + "x\n", "nested deeper than 64 levels"),
    "nested 5,000 deep in flow": ("[" * 5_000 + "]" * 5_000 + "\n", "nested deeper than 64"),
    "a recursive alias": ("a: &a [1, *a]\n", "an alias names a node that holds it"),
    "a list as a key": ("? [a, b]\n: 1\n", "a key must be a plain value"),
    "a python tag": ("a: !!python/object/apply:os.system [echo hi]\n",
                     "could not determine a constructor"),
    "too many nodes": ("a: [" + "1," * 150_000 + "1]\n", "more than 100,000 nodes"),
    "too large": ("a: '" + "x" * (5 * 2**20) + "'\n", "more than the 4,194,304 bytes"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_YAML))
def test_callgate_lint_refuses_hostile_yaml_in_one_line(tmp_path: Path, name: str) -> None:
    text, told = HOSTILE_YAML[name]
    path = tmp_path / "contract.yaml"
    path.write_text(text, "utf-8")
    output = one_clear_line(callgate("lint", str(path), timeout=90), 1)
    [finding] = [line for line in output.splitlines() if line.startswith(str(path))]
    assert " error yaml " in finding and told in finding, finding


@pytest.mark.parametrize("name", ["nested 5,000 deep", "a recursive alias", "a list as a key",
                                  "a python tag", "too large"])
def test_the_library_refuses_hostile_yaml_with_a_config_error(tmp_path: Path,
                                                               name: str) -> None:
    from callgate_rules.documents.compiler import load

    text, told = HOSTILE_YAML[name]
    (tmp_path / "contract.yaml").write_text(text, "utf-8")
    with pytest.raises(ConfigError, match=told.replace("(", "\\(")):
        load([tmp_path])


def test_callgate_check_refuses_hostile_call_and_world_files(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(), "utf-8")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, "utf-8")
    repeated = tmp_path / "actor.json"
    repeated.write_text('{"id": "U-7", "tenant": "acme", "role": "agent", "role": "admin"}',
                        "utf-8")
    dana = str(REPO / "examples" / "actors" / "dana.yaml")
    call = str(REPO / "examples" / "calls" / "create_follow_up.json")
    for args, told in (
            (["--call", str(bomb), "--actor", dana], "more than 100,000 nodes"),
            (["--call", call, "--actor", dana, "--world", str(bomb)], "more than 100,000"),
            (["--call", call, "--actor", dana, "--world", str(deep)], "nested deeper than 64"),
            (["--call", call, "--actor", str(repeated)], "'role' appears twice")):
        output = one_clear_line(callgate("check", *args), 2)
        assert told in output and len(output.strip().splitlines()) == 1, output


def test_a_json_data_file_is_bounded_and_may_not_repeat_a_key(tmp_path: Path) -> None:
    from callgate_rules.documents.source import read_data_file

    path = tmp_path / "world.json"
    path.write_text(json.dumps({"a": [[[[[[[[1]]]]]]]]}), "utf-8")
    assert read_data_file(str(path), "the world") == {"a": [[[[[[[[1]]]]]]]]}
    path.write_text("{" + '"a": {' * 70 + "}" * 71, "utf-8")
    with pytest.raises(InputError, match="nested deeper than 64 levels"):
        read_data_file(str(path), "the world")
    path.write_text('{"a": 1, "a": 2}', "utf-8")
    with pytest.raises(InputError, match="'a' appears twice"):
        read_data_file(str(path), "the world")


# Numbers that mean something --------------------------------------------------------------------


NON_FINITE = {"NaN": "NaN is not a number", "Infinity": "Infinity is not a finite number",
              "-Infinity": "-Infinity is not a finite number",
              "1e400": "Infinity is not a finite number"}


@pytest.mark.parametrize("literal", sorted(NON_FINITE))
def test_a_non_finite_amount_in_a_text_is_an_invalid_argument(config: Path,
                                                               literal: str) -> None:
    """Today ``"amount": NaN`` passes ``exclusiveMinimum: 0, maximum: 10000``, ``check``
    says execute and ``handle`` raises ValueError into the host."""
    gate = pay_gate(config)
    arguments = f'{{"amount": {literal}, "label": "x"}}'
    for output in ({"name": "pay", "arguments": arguments},
                   json.dumps({"role": "assistant", "tool_calls": [{
                       "id": "c1", "type": "function",
                       "function": {"name": "pay", "arguments": arguments}}]})):
        decision = gate.check(output, actor={})
        assert (decision.error_class, decision.route) == (ErrorClass.INVALID_ARGUMENT,
                                                          Route.REGENERATE)
        assert decision.log["detail"] == f"argument 'amount': {NON_FINITE[literal]}" or \
            decision.log["detail"].startswith(f"argument 'amount': {NON_FINITE[literal]} (")
        assert NON_FINITE[literal] in decision.agent_message
        handled = gate.handle(output, actor={}, request_id=f"r-{literal}")
        assert handled.error_class == ErrorClass.INVALID_ARGUMENT


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_in_a_decoded_object_is_an_invalid_argument(
        config: Path, value: float) -> None:
    gate = pay_gate(config)
    for arguments, field in (({"amount": value}, "amount"),
                             ({"amount": 5, "tags": {"t": [1, value]}}, "tags.t.1")):
        decision = gate.check({"type": "tool_use", "id": "t1", "name": "pay",
                               "input": arguments}, actor={})
        assert decision.error_class == ErrorClass.INVALID_ARGUMENT, decision.agent_message
        assert f"`{field}`" in decision.agent_message


def test_callgate_check_says_a_nan_amount_is_invalid(config: Path) -> None:
    call = config / "call.json"
    call.write_text('{"name": "pay", "arguments": "{\\"amount\\": NaN}"}', "utf-8")
    actor = config / "actor.json"
    actor.write_text("{}", "utf-8")
    process = callgate("check", "--call", str(call), "--actor", str(actor), "--format", "json",
                       str(config / "contracts"),
                       str(config / "policies"), timeout=60)
    one_clear_line(process, 1)  # regenerate: not executed
    payload = json.loads(process.stdout)
    assert (payload["route"], payload["error_class"]) == ("regenerate", "invalid_argument")


def test_a_name_given_twice_does_not_become_another_tool(config: Path) -> None:
    gate = pay_gate(config)
    for output in ('{"name": "readTicket", "arguments": {"amount": 5}, "name": "pay"}',
                   '{"type": "function", "function": {"name": "x", "arguments": "{}", '
                   '"name": "pay"}}',
                   '{"name": "pay", "arguments": "{\\"amount\\": 5, \\"amount\\": 50000}"}',
                   '{"name": "pay", "arguments": {"amount": 5, "tags": {"a": "1", "a": "2"}}}',
                   '{"name": "pay", "arguments": {"amount": 5, "label": "a\\u003ab", '
                   '"label": "c"}}'):
        decision = gate.check(output, actor={})
        assert decision.error_class == ErrorClass.MALFORMED, output
        assert "appears twice in one object" in decision.log["detail"]
        assert decision.route == Route.REGENERATE


# The model's JSON: a repeated key is found exactly, without a second reading of most texts.

keys = st.sampled_from(["a", "b", "a:b", "name", ":", ""])
scalars = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "1:2", "2026-12-15T09:00:00Z",
                                                          ":", "é:"]), st.booleans(), st.none())
trees = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3).map(lambda items: ("list", items))
    | st.lists(st.tuples(keys, inner), max_size=4).map(lambda pairs: ("object", pairs)),
    max_leaves=10)


def spelled(tree: Any, escape_colons: bool, ascii_only: bool) -> str:
    """``tree`` as JSON text, objects as written (a key may repeat)."""
    def string(text: str) -> str:
        out = json.dumps(text, ensure_ascii=ascii_only)
        return out.replace(":", "\\u003a") if escape_colons else out

    if isinstance(tree, tuple) and tree[0] == "list":
        return "[" + ", ".join(spelled(item, escape_colons, ascii_only) for item in tree[1]) + "]"
    if isinstance(tree, tuple):
        return "{" + ", ".join(f"{string(key)}: {spelled(value, escape_colons, ascii_only)}"
                               for key, value in tree[1]) + "}"
    return string(tree) if isinstance(tree, str) else json.dumps(tree)


def repeats(tree: Any) -> bool:
    if isinstance(tree, tuple) and tree[0] == "list":
        return any(repeats(item) for item in tree[1])
    if isinstance(tree, tuple):
        names = [key for key, _ in tree[1]]
        return len(set(names)) != len(names) or any(repeats(value) for _, value in tree[1])
    return False


@settings(max_examples=400, deadline=None)
@given(tree=trees, escape_colons=st.booleans(), ascii_only=st.booleans())
def test_a_repeated_key_is_malformed_and_nothing_else_is(tree: Any, escape_colons: bool,
                                                         ascii_only: bool) -> None:
    text = spelled(tree, escape_colons, ascii_only)
    try:
        value = read_json(text, "text is")
    except Rejection as rejection:
        assert rejection.error_class == ErrorClass.MALFORMED
        assert "appears twice in one object" in rejection.detail
        assert repeats(tree), text
    else:
        assert not repeats(tree), text
        assert value == json.loads(text)
