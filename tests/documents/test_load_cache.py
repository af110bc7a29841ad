"""The load cache (``documents.cache``): content-addressed, atomic, safe to share and delete.

A schema that passed the meta-schema check is known valid on the next load of the same
content; a changed schema, a corrupt entry or a deleted directory costs only the full
check again; an invalid schema is never remembered; where the cache lives follows
``CALLGATE_CACHE_DIR``, then ``XDG_CACHE_HOME``.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import callgate_rules.cache as store
from callgate_rules.cel.definitions import Definition, Definitions
from callgate_rules.cel.expression import CompiledExpression, compile_expression
from callgate_rules.documents import cache
from callgate_rules.documents.compiler import compile_paths, load
from callgate_rules.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("CALLGATE_CACHE_DIR", str(where))
    return where


@pytest.fixture
def documents(tmp_path: Path) -> list[Path]:
    for name in ("contracts", "policies"):
        shutil.copytree(REPO / name, tmp_path / name)
    return [tmp_path / "contracts", tmp_path / "policies"]


def entries(directory: Path) -> list[Path]:
    return sorted(path for path in directory.rglob("*") if path.is_file())


def test_a_second_load_finds_every_schema_known_valid(directory: Path,
                                                      documents: list[Path]) -> None:
    first = load(documents)
    written = entries(directory / "valid-json-schema")
    assert written, "the first load remembers the schemas it checked"
    assert all(cache.VALID_SCHEMAS.get(path.name) == b"" for path in written)

    again = load(documents)
    assert entries(directory / "valid-json-schema") == written
    assert again.contracts.keys() == first.contracts.keys()


def test_a_corrupt_or_deleted_entry_is_checked_afresh_and_written_again(
        directory: Path, documents: list[Path]) -> None:
    load(documents)
    corrupt, *others = entries(directory / "valid-json-schema")
    corrupt.write_bytes(corrupt.read_bytes()[:-3] + b"xyz")
    others[0].unlink()
    assert cache.VALID_SCHEMAS.get(corrupt.name) is None

    shutil.rmtree(directory / "compilation", ignore_errors=True)  # else it would serve
    load(documents)
    assert cache.VALID_SCHEMAS.get(corrupt.name) == b""
    assert cache.VALID_SCHEMAS.get(others[0].name) == b""
    shutil.rmtree(directory)
    load(documents)  # a deleted cache is only a cold one


def test_an_invalid_schema_is_refused_every_time_and_never_remembered(
        directory: Path, documents: list[Path]) -> None:
    contract = documents[0] / "createFollowUp.yaml"
    contract.write_text(contract.read_text().replace("maxLength: 500", "maxLength: -5"))
    for _ in range(2):
        compilation = compile_paths(documents)
        assert any("not a valid JSON Schema" in str(finding) for finding in compilation.errors)
        with pytest.raises(ConfigError):
            load(documents)


def test_changed_content_gets_another_entry() -> None:
    assert cache.schema_key({"type": "string"}) != cache.schema_key({"type": "integer"})
    assert cache.schema_key({"a": 1, "b": [True]}) == cache.schema_key({"b": [True], "a": 1})
    assert cache.schema_key({1: "not a JSON key"}) is None
    assert cache.schema_key({"type": "number", "minimum": 1}) != cache.schema_key(
        {"type": "number", "minimum": 1.0})


def test_where_it_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALLGATE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_directory() == tmp_path / "xdg" / "callgate"
    monkeypatch.setenv("CALLGATE_CACHE_DIR", str(tmp_path / "own"))
    assert cache.cache_directory() == tmp_path / "own"
    monkeypatch.setenv("CALLGATE_CACHE_DIR", "")
    assert cache.cache_directory() is None
    cache.VALID_SCHEMAS.put("00ab", b"")  # no cache: nothing written, nothing found
    assert cache.VALID_SCHEMAS.get("00ab") is None


def test_a_directory_that_cannot_be_written_is_no_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, documents: list[Path]) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("CALLGATE_CACHE_DIR", str(blocked))
    load(documents)
    load(documents)


def test_a_yaml_file_read_from_the_cache_is_the_file_read_afresh(
        directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from callgate_rules.documents.source import parse_yaml_text

    text = (REPO / "contracts" / "createFollowUp.yaml").read_text() + "\n---\nb: [1, 2.5, null]\n"
    first = parse_yaml_text(text, "contracts/createFollowUp.yaml")
    again = parse_yaml_text(text, "contracts/createFollowUp.yaml")
    monkeypatch.setenv("CALLGATE_CACHE_DIR", "")
    afresh = parse_yaml_text(text, "contracts/createFollowUp.yaml")
    for cached in (first, again):
        assert [(d.data, dict(d.places), d.index, dict(d.scalars), d.lines) for d in cached] \
            == [(d.data, dict(d.places), d.index, dict(d.scalars), d.lines) for d in afresh]
    assert entries(directory / "parsed-yaml-marshal")


def test_yaml_that_json_cannot_carry_is_read_afresh_every_time(directory: Path) -> None:
    from callgate_rules.documents.source import parse_yaml_text

    for _ in range(2):
        (document,) = parse_yaml_text("when: 2026-12-01\n1: one\n", "dated.yaml")
        assert document.data == {"when": datetime.date(2026, 12, 1), 1: "one"}
    assert not (directory / "parsed-yaml-marshal").exists()


def test_code_from_the_cache_runs_as_compiled_code_does(directory: Path) -> None:
    source = "def evaluate(variables):\n    return variables['a'] * 2\n"
    for _ in range(2):
        namespace: dict[str, object] = {}
        exec(store.compiled(source, "<test>"), namespace)
        assert namespace["evaluate"]({"a": 21}) == 42  # type: ignore[operator]
    (entry,) = entries(directory / "python-code")
    entry.write_bytes(entry.read_bytes()[:-1])  # corrupt: compiled again, and rewritten
    assert store.compiled(source, "<test>").co_filename == "<test>"
    assert store.COMPILED_CODE.get(entry.name) is not None
    with pytest.raises(SyntaxError):
        store.compiled("def (", "<test>")


# Compiled CEL expressions --------------------------------------------------------------------

EXPRESSIONS = [
    "args.amount > 100 && args.currency in ['EUR', 'USD', 'GBP']",
    "has(args.note) ? args.note.size() < 5 : args.?title.orValue('x') == 'x'",
    "args.items.all(i, i.qty > 0) && 'ab'.matches('^a')",
    "timestamp('2026-01-01T00:00:00Z') < now",
]
ACTIVATION = {"args": {"amount": 120, "currency": "EUR", "items": [{"qty": 1}], "note": "hi"},
              "now": datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)}


def described(expression: CompiledExpression) -> tuple[object, ...]:
    inline = expression.inline
    return (expression.variables, expression.references, expression.guarded,
            expression.refused_patterns, expression.tree,
            None if inline is None else (inline.body, sorted(inline.namespace)),
            expression(ACTIVATION))


@pytest.mark.parametrize("source", EXPRESSIONS)
def test_an_expression_compiled_before_comes_whole_from_the_cache(directory: Path,
                                                                  source: str) -> None:
    first = compile_expression(source)
    (entry,) = entries(directory / "cel-expression")
    again = compile_expression(source)
    assert described(again) == described(first)
    entry.write_bytes(entry.read_bytes()[:-2])  # corrupt: compiled afresh and rewritten
    assert described(compile_expression(source)) == described(first)
    assert store.ContentCache("cel-expression").get(entry.name) is not None


def test_an_entry_that_does_not_unpickle_is_compiled_afresh(directory: Path) -> None:
    compile_expression(EXPRESSIONS[0])
    (entry,) = entries(directory / "cel-expression")
    store.ContentCache("cel-expression").put(entry.name, b"\x80\x05not a pickle")
    assert compile_expression(EXPRESSIONS[0])(ACTIVATION) is True


def test_cached_code_from_another_process_merges_with_code_compiled_here(
        directory: Path) -> None:
    """Constants and helpers are named by the expression's content, not by a counter of
    the process that compiled it: an expression read from the cache and another one compiled
    here never bind one global name to different values when their code is inlined together."""
    script = ("from callgate_rules.cel.expression import compile_expression\n"
              f"compile_expression({EXPRESSIONS[0]!r})")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60,
                   env={**os.environ, "CALLGATE_CACHE_DIR": str(directory)})
    cached = compile_expression(EXPRESSIONS[0])
    fresh = compile_expression("args.currency in ['JPY', 'CHF'] && args.amount > 3.5")
    assert cached.inline is not None and fresh.inline is not None
    shared = set(cached.inline.namespace) & set(fresh.inline.namespace)
    assert all(cached.inline.namespace[name] is fresh.inline.namespace[name] for name in shared)
    assert fresh(ACTIVATION) is False and cached(ACTIVATION) is True


def test_definitions_are_in_the_key_and_marked_used_on_a_cached_load(directory: Path) -> None:
    def definitions(limit: str) -> Definitions:
        found, problems = Definitions.of([Definition("limit", limit),
                                          Definition("unused", "1")])
        assert problems == []
        return found

    for _ in range(2):
        seen = definitions("100")
        assert compile_expression("args.amount > limit", seen)(ACTIVATION) is True
        assert seen.used == {"limit"}
    changed = definitions("1000")
    assert compile_expression("args.amount > limit", changed)(ACTIVATION) is False
    assert len(entries(directory / "cel-expression")) == 2


def test_the_directory_is_made_private_to_the_user_on_the_first_write(directory: Path) -> None:
    assert not directory.exists()
    compile_expression(EXPRESSIONS[0])
    assert directory.stat().st_mode & 0o777 == 0o700
    assert entries(directory / "cel-expression")


def test_a_changed_module_of_callgate_changes_every_key(tmp_path: Path) -> None:
    """An editable install keeps its version while its code changes: the key has the
    package's files in it too, so code derived by a compiler since fixed is never found."""
    package = tmp_path / "package"
    (package / "cel").mkdir(parents=True)
    module = package / "cel" / "codegen.py"
    module.write_text("A = 1\n")
    (package / "__pycache__").mkdir()
    first = store.source_fingerprint(str(package))
    (package / "__pycache__" / "x.pyc").write_bytes(b"not source")
    assert store.source_fingerprint(str(package)) == first
    module.write_text("A = 22\n")
    assert store.source_fingerprint(str(package)) != first
    store._versions.cache_clear()  # computed once a process: files may change meanwhile
    assert store.source_fingerprint(str(Path(store.__file__).parent)) in store._versions()
    assert "jsonschema " in store._versions()  # its module files too: an upgrade changes them


# Whole configurations and lint's findings (``documents.snapshot``) ---------------------------

CALLS = [
    {"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}},
    {"name": "getTicketStatus", "arguments": {"ticketId": "not a ticket"}},
    {"name": "createFollowUp", "arguments": {"ticketId": "T-1001", "note": "call back",
                                             "dueAt": "2026-12-01T09:00:00Z"}},
    {"name": "noSuchTool", "arguments": {}},
]


def decisions(config: object) -> list[tuple[object, ...]]:
    import yaml

    from callgate_rules import Gate, WorldResolvers

    world = WorldResolvers(yaml.safe_load((REPO / "examples" / "world.yaml").read_text()))
    gate = Gate(config, resolvers=world)  # type: ignore[arg-type]
    found = []
    for call in CALLS:
        decision = gate.check(call, actor={"id": "U-7", "tenant": "acme", "role": "agent"})
        found.append((decision.route, decision.error_class, decision.agent_message))
    return found


def read(compilation: object) -> list[tuple[object, ...]]:
    return [(s.path, s.data, dict(s.places), s.index, dict(s.scalars), s.lines)
            for s in compilation.sources]  # type: ignore[attr-defined]


def test_an_unchanged_configuration_comes_whole_from_one_entry(
        directory: Path, documents: list[Path]) -> None:
    first = compile_paths(documents)
    assert not (directory / "compilation").exists(), "kept whole from the second load on"
    compile_paths(documents)
    (whole,) = entries(directory / "compilation")
    for kind in directory.iterdir():  # every other entry gone: none of them is needed
        if kind.name != "compilation":
            shutil.rmtree(kind)
    again = compile_paths(documents)
    assert entries(directory) == [whole], "nothing derived afresh, nothing written"
    assert again.findings == first.findings and again.errors == ()
    assert read(again) == read(first)
    assert again.config is not None and first.config is not None
    assert again.config.contracts.keys() == first.config.contracts.keys()
    assert [r.expression.tree for c in again.contracts.values() for r in c.rules] == \
        [r.expression.tree for c in first.contracts.values() for r in c.rules]
    assert decisions(again.config) == decisions(first.config)
    assert any(route != "execute" for route, _, _ in decisions(again.config))


def test_a_changed_or_broken_file_gets_its_own_compilation(
        directory: Path, documents: list[Path]) -> None:
    compile_paths(documents)
    compile_paths(documents)
    contract = documents[0] / "createFollowUp.yaml"
    contract.write_text(contract.read_text().replace("maxLength: 500", "maxLength: -5"))
    for _ in range(3):  # compiled, then kept whole, then from its own entry: the same findings
        broken = compile_paths(documents)
        assert broken.config is None
        assert any("not a valid JSON Schema" in str(f) for f in broken.errors)
    assert len(entries(directory / "compilation")) == 2
    (documents[0] / "unreadable.yaml").write_bytes(b"\xff\xfe not text")
    for _ in range(2):
        assert any("cannot read" in str(f) for f in compile_paths(documents).errors)


def test_a_corrupt_compilation_entry_is_compiled_afresh_and_written_again(
        directory: Path, documents: list[Path]) -> None:
    first = compile_paths(documents)
    compile_paths(documents)
    (whole,) = entries(directory / "compilation")
    whole.write_bytes(whole.read_bytes()[:-5])
    again = compile_paths(documents)
    assert read(again) == read(first) and decisions(again.config) == decisions(first.config)
    assert store.ContentCache("compilation").get(whole.name) is not None


def test_without_a_cache_nothing_is_kept_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               documents: list[Path]) -> None:
    monkeypatch.setenv("CALLGATE_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert decisions(load(documents)) == decisions(load(documents))
    assert not (tmp_path / "xdg").exists()


def test_lint_keeps_its_findings_for_unchanged_files(directory: Path,
                                                     documents: list[Path]) -> None:
    from callgate_rules.authoring.lint import lint

    contract = documents[0] / "createFollowUp.yaml"
    contract.write_text(contract.read_text().replace(
        "spec:\n", "spec:\n  mode: enforce\n  unknownField: 1\n", 1))
    first = lint(documents, notes=True)
    assert first, "the changed contract has findings"
    (kept,) = entries(directory / "lint-findings")
    shutil.rmtree(directory / "compiled-once")  # the findings alone answer: nothing compiled
    assert lint(documents, notes=True) == first
    assert not (directory / "compiled-once").exists()
    assert lint(documents) == [f for f in first if f.severity != "note"]
    compile_paths(documents)
    compile_paths(documents)  # kept whole: the checks run over the compilation read back
    shutil.rmtree(directory / "lint-findings")
    assert lint(documents, notes=True) == first
    (kept,) = entries(directory / "lint-findings")
    kept.write_bytes(kept.read_bytes()[:-1])  # corrupt: linted afresh
    assert lint(documents, notes=True) == first
    contract.write_text(contract.read_text().replace("  unknownField: 1\n", ""))
    assert lint(documents, notes=True) != first


def test_a_configuration_that_cannot_be_kept_whole_is_tried_once(
        directory: Path, documents: list[Path]) -> None:
    """An expression whose entry could not be written (here: removed from the compiled
    expression) leaves its configuration to the pieces; a later load does not try again."""
    from dataclasses import replace

    from callgate_rules.documents import snapshot

    compilation = compile_paths(documents)
    configuration = snapshot.read_configuration(documents)
    key = configuration.key(snapshot.COMPILATIONS)
    contract = next(c for c in compilation.contracts.values() if c.rules)
    rule = replace(contract.rules[0], expression=replace(contract.rules[0].expression,
                                                          entry=None))
    unkept = replace(compilation, contracts={"x": replace(contract, rules=(rule,))})
    snapshot.remember_compilation(key, unkept)  # the second time: tried, and refused
    assert snapshot.COMPILATIONS.get(key or "") == b""
    assert snapshot.remembered_compilation(key, type(compilation)) is None
    assert decisions(load(documents)) == decisions(compilation.config)
    assert snapshot.COMPILATIONS.get(key or "") == b"", "not tried again"
