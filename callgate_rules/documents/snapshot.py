"""A whole configuration in the load cache: what ``compile_paths`` made of these very files.

An unchanged configuration is the common case (every ``callgate check``, every CI lint, every
process start of a service), and compiling it piece by piece from the per-piece entries of
``documents.cache`` still read a few thousand entry files and built every object again. So
the compilation of the whole configuration is one entry too, named by every file's path and
text (with callgate's and jsonschema's code, as every entry is: ``callgate_rules.cache``): a
load that finds it (the second load of the same files writes it) reads the files, hashes
them and reads that one entry, and nothing is parsed, checked or generated. The entry is a
pickle of the ``Compilation`` in which what pickle cannot hold is kept as the plain data it
is made from: each CEL expression as its own entry (``cel.expression.restored``), each
compiled schema check as its code and what its constants are made from
(``schemacheck.check_data``), each argument validator as its schema, each document as
``marshal`` data (its places read only when asked for). A configuration with anything else
in it (a constant pickle refuses) is simply not kept whole; its pieces still are. Lint keeps
its findings the same way (``remembered_findings``): they are a function of
the files and of callgate's code, both in the key.
"""

from __future__ import annotations

import gc
import io
import json
import marshal
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from jsonschema import FormatChecker
from jsonschema.protocols import Validator

from callgate_rules.cache import ContentCache, cache_enabled
from callgate_rules.cel.expression import CompiledExpression, restored
from callgate_rules.documents.cache import yaml_key
from callgate_rules.documents.findings import Finding
from callgate_rules.documents.schemacheck import (
    Check,
    GateValidator,
    check_data,
    rebuilt_check,
)
from callgate_rules.documents.source import SourceDocument, iter_yaml_files, read_text
from callgate_rules.documents.validators import FORMAT_CHECKER
from callgate_rules.errors import InputError, Location

if TYPE_CHECKING:  # the compiler imports this module
    from callgate_rules.documents.compiler import Compilation

COMPILATIONS = ContentCache("compilation")
SEEN = ContentCache("compiled-once")  # an empty entry: these files were compiled before
LINT_FINDINGS = ContentCache("lint-findings")
_Kept = TypeVar("_Kept")
_UNKEPT = b""  # the entry of a configuration that cannot be kept whole


@dataclass(frozen=True)
class ConfigurationFile:
    """One YAML file of a configuration as read: its text, or why it could not be read."""

    path: Path
    text: str | None
    error: InputError | None = None

    @cached_property
    def key(self) -> str:
        """The file's entry name as read YAML (``documents.cache.yaml_key``): it names its
        path and text, so the configuration's key is made of these, each computed once."""
        if self.text is None:
            return f"unreadable {self.error}"
        return yaml_key(self.text, str(self.path))


@dataclass(frozen=True)
class Configuration:
    """Every YAML file under some paths, read, and the digest that names what they make."""

    files: tuple[ConfigurationFile, ...]

    def key(self, cache: ContentCache) -> str | None:
        """The entry name in ``cache`` for these files; None when there is no cache."""
        if not cache_enabled():
            return None
        return cache.key(json.dumps([file.key for file in self.files]).encode())


def read_configuration(paths: Iterable[Path]) -> Configuration:
    """The YAML files under ``paths`` (``iter_yaml_files``' order), each read or refused;
    raises ``InputError`` for a path that is not there."""
    files = []
    for path in iter_yaml_files(list(paths)):
        try:
            files.append(ConfigurationFile(path, read_text(path)))
        except InputError as error:
            files.append(ConfigurationFile(path, None, error))
    return Configuration(tuple(files))


# Compilations ---------------------------------------------------------------------------------


def remembered_compilation(key: str | None, kind: type[_Kept]) -> _Kept | None:
    """The compilation (a ``kind``) stored under ``key``, or None (none, or not readable)."""
    stored = COMPILATIONS.get(key) if key is not None else None
    if stored is None or stored == _UNKEPT:
        return None
    collecting = gc.isenabled()
    gc.disable()  # unpickling makes containers only, no cycles: collecting them is 2/3 of it
    try:
        found = pickle.loads(stored)  # noqa: S301 - the cache is as trusted as __pycache__
    except Exception:  # noqa: BLE001 - any unreadable entry is a miss, compiled afresh
        return None
    finally:
        if collecting:
            gc.enable()
    return found if isinstance(found, kind) else None


def remember_compilation(key: str | None, compilation: Compilation) -> None:
    """Store ``compilation`` under ``key`` the second time these files are compiled (the
    first time, note that they were), unless something in it cannot be kept. A first load
    already writes every piece, and a configuration being edited changes before it is
    loaded again: keeping each edit whole would cost it time (about 4%) and the cache space
    (the entry is about 17 KB a contract) for an entry never read."""
    if key is None:
        return
    if SEEN.get(key) is None:
        SEEN.put(key, b"")
        return
    if COMPILATIONS.get(key) == _UNKEPT:
        return  # tried before: something in it cannot be kept
    written = io.BytesIO()
    try:
        _Pickler(written).dump(compilation)
    except (pickle.PicklingError, TypeError, AttributeError, ValueError, RecursionError):
        COMPILATIONS.put(key, _UNKEPT)  # not tried again for these files
        return
    COMPILATIONS.put(key, written.getvalue())


class _Pickler(pickle.Pickler):
    """Pickle, with what it cannot hold itself written as the data it is made from."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is CompiledExpression:
            if obj.entry is None:
                raise pickle.PicklingError("an expression without its entry")
            return _expression, (obj.source, obj.entry)
        if kind is SourceDocument:
            try:  # marshal refuses what it cannot hold exactly (a date): pickled then
                return _source, (obj.path, marshal.dumps(obj.data), obj.index,
                                 marshal.dumps(dict(obj.places)),
                                 marshal.dumps(dict(obj.scalars)), obj.lines)
            except ValueError:
                return NotImplemented
        if kind is GateValidator:
            return _validator, (obj.schema, obj.format_checker)
        if kind is FormatChecker:
            if obj is not FORMAT_CHECKER:
                raise pickle.PicklingError("a format checker other than the gate's")
            return _gate_format_checker, ()
        if callable(obj) and (made := check_data(obj)) is not None:
            return _check, made
        return NotImplemented


def _expression(source: str, entry: bytes) -> CompiledExpression:
    expression = restored(source, entry)
    if expression is None:
        raise ValueError("an expression's entry that does not read")
    return expression


def _source(path: str, data: bytes, index: int, places: bytes, scalars: bytes,
            lines: tuple[str, ...]) -> SourceDocument:
    return SourceDocument(path, marshal.loads(data), _Unread(places), index, _Unread(scalars),
                          lines)


class _Unread(Mapping[Any, Any]):
    """A document's places (or scalars), read from ``marshal`` data when first asked for:
    only findings and lint ask, never a gate, and they are half of a document's entry."""

    __slots__ = ("_read", "_stored")

    def __init__(self, stored: bytes) -> None:
        self._stored = stored
        self._read: dict[Any, Any] | None = None

    def _mapping(self) -> dict[Any, Any]:
        if self._read is None:
            read = marshal.loads(self._stored)
            if type(read) is not dict:
                raise ValueError("a document's places that are not a mapping")
            self._read = read
        return self._read

    def __getitem__(self, key: Any) -> Any:
        return self._mapping()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._mapping()

    def get(self, key: Any, default: Any = None) -> Any:
        return self._mapping().get(key, default)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())


def _check(data: bytes, format_checker: FormatChecker | None) -> Check:
    return rebuilt_check(data, format_checker)


def _validator(schema: Any, format_checker: FormatChecker | None) -> Validator:
    validator: Validator = GateValidator(schema, format_checker=format_checker)
    return validator


def _gate_format_checker() -> FormatChecker:
    return FORMAT_CHECKER


# Lint's findings ------------------------------------------------------------------------------


def remembered_findings(key: str | None) -> list[Finding] | None:
    """The findings stored under ``key``: ``marshal`` data, never run."""
    stored = LINT_FINDINGS.get(key) if key is not None else None
    if stored is None:
        return None
    try:
        rows = marshal.loads(stored)
        return [Finding(Location(path, line, column), severity, code, message)
                for path, line, column, severity, code, message in rows]
    except (ValueError, EOFError, TypeError):
        return None


def remember_findings(key: str | None, findings: Sequence[Finding]) -> None:
    if key is None:
        return
    rows = [(f.location.path, f.location.line, f.location.column, f.severity, f.code,
             f.message) for f in findings]
    if all(_plain_row(row) for row in rows):
        LINT_FINDINGS.put(key, marshal.dumps(rows))


def _plain_row(row: tuple[Any, ...]) -> bool:
    kinds: tuple[Callable[[Any], bool], ...] = (
        lambda v: type(v) is str, lambda v: type(v) is int, lambda v: type(v) is int,
        lambda v: type(v) is str, lambda v: type(v) is str, lambda v: type(v) is str)
    return all(test(value) for test, value in zip(kinds, row, strict=True))
