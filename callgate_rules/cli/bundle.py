"""``callgate bundle build|verify|inspect``: signed policy bundles for a fleet; ``callgate
log verify``: a decision log's chain and signed checkpoints. Signing and verifying need the
``cryptography`` package (the ``bundle`` extra)."""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from callgate_rules.errors import InputError

if TYPE_CHECKING:
    from callgate_rules.documents.bundle import Bundle

KEY_PATH = click.Path(exists=True, dir_okay=False, path_type=Path)


def decision_log_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--decision-log``, ``--decision-log-key`` and ``--checkpoint-every``, as ``serve``
    and ``gateway`` take them."""
    for option in reversed((
        click.option("--decision-log", "decision_log", type=click.Path(path_type=Path),
                     help="Append every decision's log line to this file (JSON lines, "
                          "masked, chained), e.g. for `callgate replay` and `callgate log "
                          "verify`."),
        click.option("--decision-log-key",
                     type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="Sign a checkpoint of the decision log's chain with this Ed25519 "
                          "private key (PEM) every --checkpoint-every lines and at "
                          "shutdown."),
        click.option("--checkpoint-every", default=1000, show_default=True,
                     type=click.IntRange(min=1), help="Lines between two signed checkpoints."),
    )):
        command = option(command)
    return command


def bundle_options(*, uses: str, unsigned: str,
                   swaps: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--bundle``, ``--public-key`` and ``--allow-unsigned-bundle`` (and, for a command that
    keeps running, ``--bundle-poll``), as ``serve``, ``gateway`` and ``replay`` take them:
    ``uses`` says what the command does with the bundle's documents, ``unsigned`` when an
    unsigned one is accepted, ``swaps`` when a new one is swapped in."""
    options = [
        click.option("--bundle", "bundle_location", metavar="FILE_OR_URL",
                     help=f"{uses} the documents of this signed policy bundle (`callgate "
                          f"bundle build`) instead of PATHS."),
        click.option("--public-key", "public_key_file",
                     type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="The Ed25519 public key (PEM) the --bundle must be signed by."),
        click.option("--allow-unsigned-bundle", is_flag=True,
                     help=f"Accept an unsigned --bundle: {unsigned}."),
    ]
    if swaps is not None:
        options.append(click.option(
            "--bundle-poll", default=30.0, show_default=True, type=click.FloatRange(min=0),
            metavar="SECONDS",
            help="Look for a new --bundle this often (a file's change, a URL's ETag) and "
                 f"swap to it once it {swaps}; 0: never."))

    def decorated(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            command = option(command)
        return command
    return decorated


@click.group()
def bundle() -> None:
    """Build, verify and inspect signed policy bundles (one file for a fleet)."""


@bundle.command("build")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The bundle file to write (a tar).")
@click.option("--key", "key_file", type=KEY_PATH,
              help="The Ed25519 private key (PEM, `openssl genpkey -algorithm ed25519`) "
                   "that signs the manifest.")
@click.option("--unsigned", is_flag=True,
              help="Write an unsigned bundle (only a service on loopback loads one, with "
                   "--allow-unsigned-bundle).")
def build(paths: tuple[Path, ...], output: Path, key_file: Path | None,
          unsigned: bool) -> None:
    """Bundle the documents under PATHS (default `contracts policies`) into one file,
    signed with --key. The documents must compile without errors.

    \b
    Exit codes:
      0 written
      2 bad input: documents with errors, a key that is not an Ed25519 PEM key, no --key
        and no --unsigned
    """
    from callgate_rules.cli.served import documents_here
    from callgate_rules.documents.bundle import build_bundle
    from callgate_rules.signing import load_private_key

    if key_file is None and not unsigned:
        raise InputError("callgate bundle build needs --key KEY (an Ed25519 private key), "
                         "or --unsigned for a development bundle")
    key = load_private_key(key_file) if key_file is not None else None
    manifest = build_bundle([str(p) for p in paths] or documents_here(), output, key)
    signer = f"signed by {manifest.key_id}" if manifest.key_id else "unsigned"
    click.echo(f"{output}: {len(manifest.files)} file(s), {len(manifest.documents)} "
               f"document(s), {signer}")


@bundle.command("verify")
@click.argument("location")
@click.option("--public-key", "public_key_file", type=KEY_PATH, required=True,
              help="The signer's Ed25519 public key (PEM, `openssl pkey -pubout`).")
def verify(location: str, public_key_file: Path) -> None:
    """Check the bundle at LOCATION (a file or an http(s) URL): its signature by the
    public key, and every file against the manifest (none changed, missing or added).

    \b
    Exit codes:
      0 the bundle is signed by that key and untouched (its digest is printed)
      1 it is not: each problem on its own line
      2 bad input: a key or a bundle that cannot be read
    """
    from callgate_rules.documents.bundle import BundleError, read_bundle
    from callgate_rules.signing import load_public_key

    key = load_public_key(public_key_file)
    try:
        read_bundle(location).verify(key)
    except BundleError as error:
        for problem in error.problems:
            click.echo(f"callgate: bundle {location}: {problem}", err=True)
        sys.exit(error.exit_code)
    click.echo(f"{location}: verified, {read_bundle(location).digest}")


@bundle.command("inspect")
@click.argument("location")
def inspect(location: str) -> None:
    """Print the manifest of the bundle at LOCATION (JSON) and its digest, without
    verifying it: use `callgate bundle verify` for that.

    \b
    Exit codes:
      0 printed
      1 not a readable bundle
      2 a file or URL that cannot be read
    """
    from callgate_rules.documents.bundle import read_bundle

    read = read_bundle(location)
    shown = {"digest": read.digest, "signed": read.signature is not None,
             **read.manifest.as_json()}
    click.echo(json.dumps(shown, indent=2, ensure_ascii=False))


@click.group("log")
def log() -> None:
    """Check a decision log's chain and signed checkpoints."""


@log.command("verify")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--public-key", "public_key_file", type=KEY_PATH,
              help="The Ed25519 public key of the checkpoints' signing key (PEM).")
@click.option("--partial", is_flag=True,
              help="Accept a log whose first lines are gone (rotated files not given, or "
                   "lines purged by retention); lines dropped before the first are then "
                   "not seen.")
@click.option("--store", "store_url", metavar="URL",
              help="Also hold every executed write's line against its receipt in this "
                   "receipt store (sqlite:///path or postgresql://...): the receipt must "
                   "name the line's hash.")
def log_verify(files: tuple[Path, ...], public_key_file: Path | None, partial: bool,
               store_url: str | None) -> None:
    """Check the decision log FILES (a log and its rotated files, in any order): every
    line chains to the one before it, and every checkpoint is signed by --public-key.
    With --store, every executed write's receipt must name its line (and receipts that
    name a line not in FILES are noted).

    \b
    Exit codes:
      0 the chain holds (notes, if any, on stderr)
      1 it breaks: the first line where it does is named
      2 bad input: a file or a key that cannot be read
    """
    from callgate_rules.decision_log import verify_log
    from callgate_rules.signing import load_public_key

    key = load_public_key(public_key_file) if public_key_file is not None else None
    found = verify_log(list(files), key, partial=partial)
    for note in found.notes:
        click.echo(f"callgate: note: {note}", err=True)
    if found.broken is not None:
        click.echo(f"callgate: {found.broken}", err=True)
        click.echo(f"callgate: {found.lines} line(s) before it hold", err=True)
        sys.exit(1)
    click.echo(f"{found.lines} line(s), {found.checkpoints} checkpoint(s) verified: the "
               "chain holds")
    if store_url is not None:
        _check_receipts(list(files), store_url)


def _check_receipts(files: list[Path], store_url: str) -> None:
    """``log verify --store``: the executed writes' lines against their receipts."""
    from callgate_rules.cli.store import open_existing_store
    from callgate_rules.receipt_links import check_receipts

    store = open_existing_store(store_url)
    try:
        found = check_receipts(files, store)
    finally:
        store.close()
    for note in found.notes:
        click.echo(f"callgate: note: {note}", err=True)
    if found.broken is not None:
        click.echo(f"callgate: {found.broken}", err=True)
        sys.exit(1)
    click.echo(f"{found.linked} receipt(s) name their line in {store.url}")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def verified_bundle(location: str | None, public_key_file: Path | None,
                    allow_unsigned: bool, host: str | None,
                    paths: Sequence[Path]) -> Bundle | None:
    """The ``--bundle`` of ``serve`` or ``gateway``, verified before anything starts: a
    ``BundleError`` in one line for an unsigned, tampered or wrongly signed one.
    ``--allow-unsigned-bundle`` only when listening on loopback (``host``; None: stdio)."""
    if location is None:
        if public_key_file is not None or allow_unsigned:
            raise InputError("--public-key and --allow-unsigned-bundle go with --bundle")
        return None
    if paths:
        raise InputError("pass either PATHS or --bundle, not both")
    if allow_unsigned and host is not None and not _loopback(host):
        raise InputError(f"--allow-unsigned-bundle only on a loopback address, not {host}")
    if public_key_file is None and not allow_unsigned:
        raise InputError("--bundle needs --public-key KEY (the signer's Ed25519 public key), "
                         "or --allow-unsigned-bundle on loopback for development")
    from callgate_rules.documents.bundle import BundleError, open_bundle

    try:
        return open_bundle(location, public_key_file, allow_unsigned=allow_unsigned)
    except BundleError as error:  # refused at start: bad input (2), in one line
        raise InputError(f"refusing {error}") from None


COMMANDS = (bundle, log)
