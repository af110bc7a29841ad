"""``callgate lint --since REF``: a document that changed since a git revision must say so in
its version.

A decision records the version of every document that took part in it; that record is only
worth something if every change of behaviour comes with a higher ``metadata.version``.
Documents are matched by kind and ``metadata.name``, not by file, so moving a contract to
another file is no change; their parsed data is compared, not their text, so comments and
layout are not either. The old versions are the blobs ``git show REF:path`` prints, read in
one ``git cat-file --batch`` rather than one process per file.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate_rules.documents.compiler import KINDS, Finding
from callgate_rules.documents.source import (
    YAML_SUFFIXES,
    NodePath,
    SourceDocument,
    iter_yaml_files,
    parse_yaml_text,
    read_documents,
)
from callgate_rules.errors import InputError


@dataclass(frozen=True)
class VersionedDocument:
    kind: str
    name: str
    version: str
    source: SourceDocument

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


def version_findings(
    paths: Iterable[str | Path],
    since: str,
    *,
    allow_removed: Iterable[str] = (),
    current: Iterable[SourceDocument] | None = None,
) -> list[Finding]:
    """Findings for the documents under ``paths`` against the same paths at ``since``;
    ``current`` saves reading the documents again when the caller has them already.

    Raises ``InputError`` (one line) outside a git repository or for an unknown revision.
    """
    roots = [Path(p) for p in paths]
    repository = Repository.at(Path.cwd(), since)
    before = _by_key(repository.documents_at(roots))
    now = _by_key(_current_documents(roots) if current is None else current)
    acknowledged = set(allow_removed)
    findings: list[Finding] = []
    for key, old in before.items():
        new = now.get(key)
        if new is not None:
            findings.extend(compare(old, new, since))
        elif old.kind == "ToolContract" and old.name not in acknowledged:
            findings.append(Finding(
                old.source.locate(("metadata", "name")), "error", "removed-tool",
                f"ToolContract {old.name} (version {old.version} at {since}) was removed; a "
                "model with an older tool list, or a conversation already under way, may "
                "still call it and now gets unknown_tool. If that is intended, acknowledge it "
                f"with --allow-removed {old.name}"))
    return findings


def compare(old: VersionedDocument, new: VersionedDocument, since: str) -> list[Finding]:
    """What is wrong with ``new``'s version, given ``old`` (the same document at ``since``)."""
    order = compare_versions(new.version, old.version)
    version_place = new.source.locate(("metadata", "version"))
    suggestion = next_version(old.version)
    findings: list[Finding] = []
    if order < 0:
        findings.append(Finding(
            version_place, "error", "version-decreased",
            f"{new.label}: metadata.version went down from {old.version} at {since} to "
            f"{new.version}; versions only go up, or logged decisions become ambiguous. Set it "
            f"to {suggestion}"))
    changed = changed_fields(old.source.data, new.source.data)
    if order > 0 or not changed:
        return findings
    state = (f"metadata.version is still {new.version}" if order == 0
             else f"metadata.version went down to {new.version}")
    narrowed = (list(narrowings(old.source.data["spec"].get("arguments"),
                               new.source.data["spec"].get("arguments")))
        if new.kind == "ToolContract" else [])
    for path, what in narrowed:
        findings.append(Finding(
            new.source.locate(("spec", "arguments", *path)), "error", "narrowed-arguments",
            f"ToolContract {new.name}: {what} since {since}, which refuses calls that passed "
            f"before, but {state}; raise it to {suggestion}"))
    if order == 0 and not narrowed:
        findings.append(Finding(
            version_place, "error", "version-not-bumped",
            f"{new.label} changed since {since} ({', '.join(changed)}) but {state}; raise it "
            f"to {suggestion} so that decisions record which behaviour applied"))
    return findings


def changed_fields(old: Any, new: Any) -> list[str]:
    """The fields (two levels deep: ``spec.rules``, ``metadata.description``) whose parsed
    values differ; ``metadata.version`` itself is not content."""
    changed: list[str] = []
    for section in sorted(set(old) | set(new), key=str):
        before, after = old.get(section), new.get(section)
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            keys = sorted(set(before) | set(after), key=str)
            changed += [f"{section}.{key}" for key in keys
                        if before.get(key) != after.get(key)
                        and (section, key) != ("metadata", "version")]
        elif before != after:
            changed.append(str(section))
    return changed


# Versions --------------------------------------------------------------------------------------

_NUMERIC_VERSION = re.compile(r"[vV]?([0-9]+(?:\.[0-9]+)*)")


def version_key(version: str) -> tuple[int, ...] | None:
    """``"1.2.0"`` or ``"v1.2"`` → (1, 2, 0) / (1, 2); ``None`` when not dotted integers."""
    match = _NUMERIC_VERSION.fullmatch(version.strip())
    return tuple(int(part) for part in match[1].split(".")) if match else None


def compare_versions(left: str, right: str) -> int:
    """-1, 0 or 1. Dotted integers compare as numbers (``1.10`` > ``1.9``, ``1.0`` ==
    ``1.0.0``); anything else compares as text."""
    left_key, right_key = version_key(left), version_key(right)
    if left_key is None or right_key is None:
        return (left > right) - (left < right)
    width = max(len(left_key), len(right_key))
    left_key += (0,) * (width - len(left_key))
    right_key += (0,) * (width - len(right_key))
    return (left_key > right_key) - (left_key < right_key)


def next_version(version: str) -> str:
    """The smallest sensible bump: the last number plus one, or a hint for other schemes."""
    key = version_key(version)
    if key is None:
        return f"a version above {version}"
    prefix = version.strip()[0] if version.strip()[0] in "vV" else ""
    return prefix + ".".join(str(part) for part in (*key[:-1], key[-1] + 1))


# Narrowed argument schemas -------------------------------------------------------------------

UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")


def narrowings(old: Any, new: Any, path: NodePath = (), label: str = "args"
               ) -> Iterator[tuple[NodePath, str]]:
    """(where in the new schema, what narrowed) for every change after which a value the
    old schema accepted can be refused."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return
    old_types, new_types = _types(old), _types(new)
    if new_types is not None and (old_types is None or not old_types <= new_types):
        was = f" (was {', '.join(sorted(old_types))})" if old_types else ""
        yield (*path, "type"), f"{label} now accepts only {', '.join(sorted(new_types))}{was}"
    for keyword in (*UPPER_BOUNDS, *LOWER_BOUNDS):
        bound, before = _number(new.get(keyword)), _number(old.get(keyword))
        if bound is None:
            continue
        if before is None:
            yield (*path, keyword), f"{label} got {keyword} {new[keyword]}"
        elif bound < before if keyword in UPPER_BOUNDS else bound > before:
            change = "lowered" if keyword in UPPER_BOUNDS else "raised"
            yield (*path, keyword), (f"{label}: {keyword} {change} from {old[keyword]} to "
                                     f"{new[keyword]}")
    yield from _value_narrowings(old, new, path, label)
    yield from _object_narrowings(old, new, path, label)
    if isinstance(old.get("items"), Mapping):
        yield from narrowings(old["items"], new.get("items"), (*path, "items"), f"{label}[]")


def _value_narrowings(old: Mapping[str, Any], new: Mapping[str, Any], path: NodePath,
                      label: str) -> Iterator[tuple[NodePath, str]]:
    if isinstance(new.get("enum"), list):
        if not isinstance(old.get("enum"), list):
            yield (*path, "enum"), f"{label} now accepts only {_values(new['enum'])}"
        elif removed := [value for value in old["enum"] if value not in new["enum"]]:
            yield (*path, "enum"), f"{label} no longer accepts {_values(removed)}"
    if "const" in new and ("const" not in old or old["const"] != new["const"]):
        yield (*path, "const"), f"{label} must now be {new['const']!r}"
    if "pattern" in new and old.get("pattern") != new["pattern"]:
        yield (*path, "pattern"), (
            f"{label} must now match pattern {new['pattern']!r}" if "pattern" not in old else
            f"{label}: pattern changed from {old['pattern']!r} to {new['pattern']!r}")
    if "format" in new and old.get("format") != new["format"]:
        yield (*path, "format"), f"{label} must now be a {new['format']}"


def _object_narrowings(old: Mapping[str, Any], new: Mapping[str, Any], path: NodePath,
                       label: str) -> Iterator[tuple[NodePath, str]]:
    old_properties = _mapping(old.get("properties"))
    new_properties = _mapping(new.get("properties"))
    if _closed(new):
        if not _closed(old):
            yield path, f"{label} no longer accepts undeclared fields"
        for name in old_properties:
            if name not in new_properties:
                yield (*path, "properties"), (f"{label}.{name} was removed, so a call that "
                                              "sends it is refused as unexpected_argument")
    required = new.get("required")
    before = set(old.get("required", ()) if isinstance(old.get("required"), list) else ())
    for index, name in enumerate(required if isinstance(required, list) else ()):
        if name not in before:
            yield (*path, "required", index), f"{label}.{name} is now required"
    for name, schema in new_properties.items():
        if name in old_properties:
            yield from narrowings(old_properties[name], schema, (*path, "properties", name),
                                  f"{label}.{name}")


def _types(schema: Mapping[str, Any]) -> set[str] | None:
    declared = schema.get("type")
    if isinstance(declared, str):
        types = {declared}
    elif isinstance(declared, list):
        types = {str(t) for t in declared}
    else:
        return None
    if "number" in types:
        types.add("integer")  # every integer is a number: integer → number widens
    return types


def _closed(schema: Mapping[str, Any]) -> bool:
    # callgate closes every object that declares properties unless it says otherwise
    # (compiler.closed_objects).
    default = "properties" in schema
    return schema.get("additionalProperties", not default) is False


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    return (float(value) if isinstance(value, int | float) and not isinstance(value, bool)
        else None)


def _values(values: list[Any]) -> str:
    return ", ".join(repr(value) for value in values)


# Reading documents now and at a revision -----------------------------------------------------


def _current_documents(paths: list[Path]) -> list[SourceDocument]:
    sources: list[SourceDocument] = []
    for file in iter_yaml_files(paths):
        try:
            sources.extend(read_documents(file))
        except InputError:
            continue  # lint itself reports the file; there is nothing to compare
    return sources


def _by_key(sources: Iterable[SourceDocument]) -> dict[tuple[str, str], VersionedDocument]:
    """Gate documents by (kind, metadata.name); the first of duplicates, as the compiler."""
    documents: dict[tuple[str, str], VersionedDocument] = {}
    for source in sources:
        data = source.data
        if not isinstance(data, Mapping) or data.get("kind") not in KINDS:
            continue
        metadata = data.get("metadata")
        if not isinstance(metadata, Mapping) or not isinstance(data.get("spec"), Mapping):
            continue
        name, version = metadata.get("name"), metadata.get("version")
        if isinstance(name, str) and version is not None:
            documents.setdefault((data["kind"], name),
                                 VersionedDocument(data["kind"], name, str(version), source))
    return documents


@dataclass(frozen=True)
class Repository:
    root: Path
    revision: str

    @classmethod
    def at(cls, directory: Path, revision: str) -> Repository:
        top = _git(directory, ["rev-parse", "--show-toplevel"],
                   f"--since {revision}: {directory} is not inside a git repository; run lint "
                   "in a checkout, or drop --since")
        root = Path(top.decode("utf-8").strip())
        _git(root, ["rev-parse", "--verify", "--quiet", "--end-of-options",
                    f"{revision}^{{commit}}"],
             f"--since {revision}: no such commit in {root}; name a branch, tag or commit "
             "(a shallow CI checkout may need to fetch it first)")
        return cls(root, revision)

    def documents_at(self, paths: list[Path]) -> list[SourceDocument]:
        """The documents the same ``paths`` held at the revision, named as lint names them."""
        prefixes = [(self._inside(path), path) for path in paths]
        listing = _git(self.root, ["ls-tree", "-r", "-z", "--name-only", "--full-tree",
                                   self.revision, "--", *(prefix or "." for prefix, _ in prefixes)],
                       f"--since {self.revision}: cannot list the documents")
        shown: dict[str, str] = {}  # name in the repository → path as the user wrote it
        for name in listing.decode("utf-8").split("\0"):
            if not name.endswith(YAML_SUFFIXES) or "\n" in name:
                continue
            for prefix, path in prefixes:
                if not prefix or name == prefix or name.startswith(prefix + "/"):
                    rest = name[len(prefix):].lstrip("/")
                    shown[name] = str(path / rest) if rest else str(path)
                    break
        sources: list[SourceDocument] = []
        for name, text in self._blobs(list(shown)).items():
            try:
                sources.extend(parse_yaml_text(text, shown[name]))
            except InputError:
                continue  # it did not parse then; there is nothing to compare it with
        return sources

    def _inside(self, path: Path) -> str:
        try:
            relative = path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            raise InputError(f"--since {self.revision}: {path} is outside the git repository "
                             f"at {self.root}") from None
        return "" if relative == "." else relative

    def _blobs(self, names: list[str]) -> dict[str, str]:
        """The text of each file at the revision, from one ``git cat-file --batch``."""
        request = "".join(f"{self.revision}:{name}\n" for name in names).encode("utf-8")
        output = _git(self.root, ["cat-file", "--batch"],
                      f"--since {self.revision}: cannot read the documents", request)
        texts: dict[str, str] = {}
        position = 0
        for name in names:
            end = output.index(b"\n", position)
            header = output[position:end].split()
            position = end + 1
            if header[-1] == b"missing":
                continue
            size = int(header[2])
            blob = output[position:position + size]
            position += size + 1  # the blob is followed by a newline
            try:
                texts[name] = blob.decode("utf-8")
            except UnicodeDecodeError:
                continue
        return texts


def _git(directory: Path, arguments: list[str], failure: str, stdin: bytes | None = None
         ) -> bytes:
    """Run git; its failure becomes ``failure``, one line for the person at the terminal."""
    try:
        completed = subprocess.run(["git", *arguments], cwd=directory, input=stdin,
                                   capture_output=True, check=False)
    except FileNotFoundError:
        raise InputError("--since needs git, and git is not installed here") from None
    if completed.returncode != 0:
        raise InputError(failure)
    return completed.stdout
