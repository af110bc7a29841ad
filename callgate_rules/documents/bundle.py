"""Policy bundles: the documents of a configuration in one signed file, for a fleet.

A bundle is an uncompressed POSIX tar (``.tar``) holding

- ``manifest.json``: the bundle's format, callgate's version, the creation time, the
  signer's key ID, each file's size and SHA-256 digest, and every document's
  kind/name/version;
- ``manifest.sig``: the Ed25519 signature of ``manifest.json``'s bytes (absent from an
  unsigned bundle, which only a service on loopback may load, for development);
- ``documents/...``: the YAML files, by the path they were given under.

The manifest is signed and names the digest of every file, so one signature covers the
whole bundle: a changed, missing or added file is named by ``verify``. Uncompressed, so
``tar tf`` lists it and a changed byte shows as the file it changed. A bundle's *digest*
is the SHA-256 of the whole file (what ``sha256sum`` prints): every decision made by a
bundle records it.

Reading is bounded before anything is trusted: the file's size (``MAX_BUNDLE_BYTES``), the
number of members, each member's size; member names must be plain relative paths (no
``..``, no absolute path, no backslash) and every member a regular file (no links, no
devices, no folders). Keys are PEM files as OpenSSL writes them
(``openssl genpkey -algorithm ed25519``, ``openssl pkey -pubout``); the key ID is
``sha256:`` and the digest of the public key's DER (``openssl pkey -pubin -outform DER |
sha256sum``). Signing and verifying need the ``cryptography`` package (the ``bundle``
extra).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from callgate_rules.documents.compiler import compile_documents
from callgate_rules.documents.source import (
    MAX_YAML_BYTES,
    SourceDocument,
    iter_yaml_files,
    parse_yaml_text,
    read_text,
)
from callgate_rules.errors import ConfigError, InputError
from callgate_rules.signing import key_id, load_public_key, verifies

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from callgate_rules.documents.model import GateConfig

FORMAT = "callgate-bundle/1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
DOCUMENTS = "documents/"
MAX_BUNDLE_BYTES = 64 * 1024 * 1024  # the whole file, read or fetched
MAX_MEMBERS = 10_000
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MAX_NAME_CHARS = 255
FETCH_TIMEOUT = 30.0  # seconds a bundle URL may take in all


class BundleError(InputError):
    """A bundle that must not be used: unreadable, unsigned, wrongly signed or tampered.
    ``problems`` names each, one a line; the message joins them."""

    exit_code = 1  # `callgate bundle verify` found the bundle bad

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__(f"bundle {source}: " + "; ".join(self.problems))


# The manifest ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleFile:
    path: str  # under documents/, as given to `bundle build`
    sha256: str
    size: int


@dataclass(frozen=True)
class BundleDocument:
    file: str
    kind: str
    name: str
    version: str


@dataclass(frozen=True)
class Manifest:
    callgate_version: str
    created: str
    key_id: str | None  # None: unsigned
    files: tuple[BundleFile, ...]
    documents: tuple[BundleDocument, ...]
    format: str = FORMAT

    def as_json(self) -> dict[str, Any]:
        return {"format": self.format, "callgate_version": self.callgate_version,
                "created": self.created, "key_id": self.key_id,
                "files": [vars(f) for f in self.files],
                "documents": [vars(d) for d in self.documents]}

    def encoded(self) -> bytes:
        return (json.dumps(self.as_json(), indent=2, sort_keys=True, ensure_ascii=False)
                + "\n").encode("utf-8")

    @classmethod
    def of(cls, data: bytes, source: str) -> Manifest:
        try:
            value = json.loads(data)
            if value.get("format") != FORMAT:
                raise BundleError(source, [f"{MANIFEST}: format {value.get('format')!r}, "
                                           f"expected {FORMAT!r} (a newer callgate?)"])
            return cls(
                callgate_version=str(value["callgate_version"]),
                created=str(value["created"]),
                key_id=None if value.get("key_id") is None else str(value["key_id"]),
                files=tuple(BundleFile(str(f["path"]), str(f["sha256"]), int(f["size"]))
                            for f in value["files"]),
                documents=tuple(BundleDocument(str(d["file"]), str(d["kind"]),
                                               str(d["name"]), str(d["version"]))
                                for d in value["documents"]))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise BundleError(source, [f"{MANIFEST} is not a bundle manifest "
                                       f"({type(error).__name__}: {error})"]) from None


def callgate_version() -> str:
    try:
        return metadata.version("callgate-rules")
    except metadata.PackageNotFoundError:
        return "unknown"


# Building -------------------------------------------------------------------------------


def _named_files(paths: Iterable[Path]) -> list[tuple[str, Path]]:
    """Each YAML file under ``paths`` with its name in the bundle: a folder's files under
    the folder's name, a file named directly by its own name."""
    named: list[tuple[str, Path]] = []
    seen: dict[str, Path] = {}
    for given in paths:
        if not given.exists():
            raise InputError(f"{given}: no such file or folder")
        for file in iter_yaml_files([given]):
            if given.is_dir():
                root = given.resolve().name
                name = ("/".join((root, *file.relative_to(given).parts)) if root
                    else file.relative_to(given).as_posix())
            else:
                name = file.name
            if name in seen:
                raise InputError(f"{file}: the bundle already holds {name} (from "
                                 f"{seen[name]}); rename one of them")
            seen[name] = file
            named.append((name, file))
    if not named:
        raise InputError("no YAML documents under " + " ".join(str(p) for p in paths))
    return named


def _document_entries(name: str, sources: Sequence[SourceDocument]) -> list[BundleDocument]:
    entries = []
    for source in sources:
        data = source.data if isinstance(source.data, Mapping) else {}
        meta = data.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        entries.append(BundleDocument(name, str(data.get("kind", "")),
                                      str(meta.get("name", "")), str(meta.get("version", ""))))
    return entries


def build_bundle(paths: Sequence[str | Path], output: str | Path,
                 private_key: Ed25519PrivateKey | None, *,
                 now: datetime | None = None) -> Manifest:
    """Write the documents under ``paths`` to the bundle ``output``, signed with
    ``private_key`` (unsigned when None). The documents must compile without errors
    (``ConfigError`` lists them otherwise); the file is written whole or not at all."""
    created = (now or datetime.now(UTC)).replace(microsecond=0)
    files, texts, documents, sources = [], {}, [], []
    for name, file in _named_files([Path(p) for p in paths]):
        text = read_text(file)
        parsed = parse_yaml_text(text, str(file))
        raw = text.encode("utf-8", "surrogatepass")
        files.append(BundleFile(name, hashlib.sha256(raw).hexdigest(), len(raw)))
        texts[name] = raw
        documents.extend(_document_entries(name, parsed))
        sources.extend(parsed)
    compilation = compile_documents(sources)
    if compilation.errors:
        raise ConfigError(list(compilation.errors))
    manifest = Manifest(
        callgate_version=callgate_version(),
        created=created.isoformat().replace("+00:00", "Z"),
        key_id=key_id(private_key.public_key()) if private_key is not None else None,
        files=tuple(files), documents=tuple(documents))
    encoded = manifest.encoded()
    members = [(MANIFEST, encoded)]
    if private_key is not None:
        members.append((SIGNATURE, private_key.sign(encoded)))
    members.extend((DOCUMENTS + name, texts[name]) for name in texts)
    _write_tar(Path(output), members, int(created.timestamp()))
    return manifest


def _write_tar(output: Path, members: Sequence[tuple[str, bytes]], mtime: int) -> None:
    """Members in order, with fixed owners and modes: the same input, the same bytes."""
    folder = output.parent if str(output.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{output.name}.")
    try:
        with (os.fdopen(handle, "wb") as raw,
              tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar):
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), mtime, 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
        os.replace(temporary, output)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# Reading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """A bundle read from ``source``; ``verify`` says whether it may be used."""

    source: str
    digest: str  # "sha256:" + the SHA-256 of the whole file
    members: Mapping[str, bytes] = field(repr=False)

    @property
    def manifest_bytes(self) -> bytes:
        if MANIFEST not in self.members:
            raise BundleError(self.source, [f"no {MANIFEST}: not a callgate bundle"])
        return self.members[MANIFEST]

    @property
    def manifest(self) -> Manifest:
        return Manifest.of(self.manifest_bytes, self.source)

    @property
    def signature(self) -> bytes | None:
        return self.members.get(SIGNATURE)

    def problems(self, public_key: Ed25519PublicKey | None, *,
                 allow_unsigned: bool = False) -> list[str]:
        """What is wrong with the bundle, first the signature, then each file; [] if
        nothing. ``allow_unsigned``: an unsigned bundle (or one without ``public_key`` to
        check it by) is accepted when its files match its manifest."""
        manifest = self.manifest
        problems: list[str] = []
        signature = self.signature
        if signature is None:
            if not allow_unsigned:
                problems.append("unsigned (no manifest.sig); sign it with `callgate bundle "
                                "build --key KEY`")
        elif public_key is None:
            if not allow_unsigned:
                problems.append(f"signed by {manifest.key_id}, but no public key was given "
                                "to check it (--public-key)")
        else:
            expected = key_id(public_key)
            if not verifies(public_key, signature, self.manifest_bytes):
                signer = (f"it names key {manifest.key_id}" if manifest.key_id != expected
                          else "the manifest or the signature was changed")
                problems.append(f"the signature does not verify with the public key "
                                f"{expected} ({signer})")
        listed = {DOCUMENTS + f.path: f for f in manifest.files}
        held = {name for name in self.members if name not in (MANIFEST, SIGNATURE)}
        for name in listed.keys() - held:
            problems.append(f"{name} is listed in the manifest but missing")
        for name in sorted(held - listed.keys()):
            problems.append(f"{name} is not in the manifest (a file added after signing)")
        for name, expected_file in listed.items():
            data = self.members.get(name)
            if data is None:
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest != expected_file.sha256:
                problems.append(f"{name} changed since it was signed (sha256 {digest[:16]}…, "
                                f"the manifest says {expected_file.sha256[:16]}…)")
        return problems

    def verify(self, public_key: Ed25519PublicKey | None, *,
               allow_unsigned: bool = False) -> Bundle:
        """The bundle, or ``BundleError`` naming every problem ``problems`` finds."""
        problems = self.problems(public_key, allow_unsigned=allow_unsigned)
        if problems:
            raise BundleError(self.source, problems)
        return self

    def sources(self) -> list[SourceDocument]:
        """The documents, in the manifest's order, each named ``SOURCE!documents/PATH``."""
        sources: list[SourceDocument] = []
        for listed in self.manifest.files:
            name = DOCUMENTS + listed.path
            try:
                text = self.members[name].decode("utf-8")
            except UnicodeDecodeError as error:
                raise BundleError(self.source, [f"{name} is not UTF-8 text ({error})"]
                                  ) from None
            sources.extend(parse_yaml_text(text, f"{self.source}!{name}"))
        return sources

    def compile(self) -> GateConfig:
        """The configuration its documents compile to (``ConfigError`` listing each
        problem, with the place in the bundle)."""
        compilation = compile_documents(self.sources())
        if compilation.errors or compilation.config is None:
            raise ConfigError(list(compilation.errors))
        return compilation.config

    def extract(self, folder: str | Path) -> Path:
        """Write the documents under ``folder``/documents (a folder the caller owns and
        removes); returns that folder."""
        root = Path(folder) / DOCUMENTS.rstrip("/")
        for listed in self.manifest.files:
            target = root.joinpath(*listed.path.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.members[DOCUMENTS + listed.path])
        return root


def _member_name_problem(name: str) -> str | None:
    if not name or len(name) > MAX_NAME_CHARS:
        return "an empty or over-long name"
    if name.startswith("/") or "\\" in name or "\0" in name or ":" in name.split("/")[0]:
        return "an absolute or non-POSIX path"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "a path with '..', '.' or an empty part"
    return None


def _member_kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "a symbolic link"
    if member.islnk():
        return "a hard link"
    if member.isdir():
        return "a folder"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    return "not a regular file"


def read_bundle_bytes(data: bytes, source: str) -> Bundle:
    """The bundle in ``data`` (read from ``source``), bounded; ``BundleError`` for anything
    that is not a plain tar of regular files with safe names."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(source, [f"{len(data):,} bytes, more than the "
                                   f"{MAX_BUNDLE_BYTES:,} a bundle may have"])
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise BundleError(source, [f"more than {MAX_MEMBERS:,} members"])
                if (problem := _member_name_problem(member.name)) is not None:
                    raise BundleError(source, [f"member {member.name!r}: {problem}"])
                if not member.isreg():
                    raise BundleError(source, [f"member {member.name}: is "
                                               f"{_member_kind(member)}; a bundle holds "
                                               "regular files only"])
                limit = MAX_MANIFEST_BYTES if member.name == MANIFEST else MAX_YAML_BYTES
                if member.size > limit:
                    raise BundleError(source, [f"member {member.name}: {member.size:,} "
                                               f"bytes, more than {limit:,}"])
                if member.name in members:
                    raise BundleError(source, [f"member {member.name} appears twice"])
                extracted = tar.extractfile(member)
                assert extracted is not None  # a regular file
                members[member.name] = extracted.read(limit + 1)
    except (tarfile.TarError, EOFError, OSError) as error:
        raise BundleError(source, [f"not a readable tar ({error}); was the file damaged "
                                   "or cut short?"]) from None
    return Bundle(source, "sha256:" + hashlib.sha256(data).hexdigest(), members)


def fetch_bundle(location: str, *, timeout: float = FETCH_TIMEOUT) -> bytes:
    """The bytes of the bundle at ``location``: an http(s) URL or a file; bounded."""
    if location.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(location, timeout=timeout) as answer:  # noqa: S310
                data: bytes = answer.read(MAX_BUNDLE_BYTES + 1)
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", None) or error
            raise InputError(f"bundle {location}: cannot fetch: {reason}") from None
        return data
    path = Path(location.removeprefix("file://"))
    if path.exists() and not path.is_file():  # never a FIFO or a device: it could hang
        raise InputError(f"bundle {location}: not a regular file")
    try:
        with path.open("rb") as file:
            return file.read(MAX_BUNDLE_BYTES + 1)
    except OSError as error:
        raise InputError(f"bundle {location}: cannot read: {error.strerror}") from None


def read_bundle(location: str | Path) -> Bundle:
    """The bundle at ``location`` (a file or an http(s) URL), read but not yet verified."""
    return read_bundle_bytes(fetch_bundle(str(location)), str(location))


def open_bundle(location: str | Path, public_key: Ed25519PublicKey | str | Path | None, *,
                allow_unsigned: bool = False) -> Bundle:
    """The bundle at ``location``, verified against ``public_key`` (a key or its PEM file);
    ``BundleError`` naming every problem when it is unsigned (unless ``allow_unsigned``),
    wrongly signed, or tampered with."""
    key = load_public_key(public_key) if isinstance(public_key, str | Path) else public_key
    return read_bundle(location).verify(key, allow_unsigned=allow_unsigned)
