"""The commands over the receipt store: ``receipts`` (purge, migrate) and the ``review`` queue
(list, take, resolve) of outcomes handed over to a person."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from callgate_rules.cli.paths import DEFAULT_DOCUMENTS, document_paths, sort_paths
from callgate_rules.confirmation.drafts import shown
from callgate_rules.documents.compiler import build_routing, load
from callgate_rules.documents.durations import parse_duration
from callgate_rules.errors import InputError
from callgate_rules.store import (
    SQLITE_PREFIX,
    SQLITE_SUFFIXES,
    ReceiptStore,
    ReviewItem,
    ReviewStatus,
    open_store,
)

STORE_OPTION = click.option(
    "--store", "store_url", envvar="CALLGATE_STORE", default="sqlite:///callgate.sqlite3",
    show_default=True, help="Receipt store URL (sqlite:///path or postgresql://...); "
                            "also read from CALLGATE_STORE.")
BY_OPTION = click.option("--by", "by", envvar="USER", default="reviewer", show_default=True)


# receipts -----------------------------------------------------------------------------------


@click.group()
def receipts() -> None:
    """The receipt store: show a receipt, purge old receipts, run migrations.

    \b
    Exit codes:
      0 done
      2 bad input: a store that cannot be opened, a bad duration or option
    """


@receipts.command("purge")
@document_paths
@STORE_OPTION
@click.option("--older-than", "older_than", default=None,
              help="A duration such as 720h, 30d or P30D (default: the RoutingTable's retention).")
def receipts_purge(paths: tuple[Path, ...], contracts_dir: Path | None,
                   policies_dir: Path | None, store_url: str, older_than: str | None) -> None:
    """Delete finished receipts and resolved reviews older than the retention.

    The retention is --older-than, else the RoutingTable's among the documents in PATHS
    (default: contracts policies), else the built-in one when there are no documents.
    """
    seconds = (_retention_seconds(paths, contracts_dir, policies_dir) if older_than is None
        else _duration_seconds(older_than))
    store = open_store(store_url)
    try:
        removed = store.purge(older_than=_utc_now() - timedelta(seconds=seconds))
    finally:
        store.close()
    click.echo(f"purged {removed} record(s) older than {seconds / 3600:g}h from "
               f"{store.url}")


def _retention_seconds(paths: tuple[Path, ...], contracts_dir: Path | None,
                       policies_dir: Path | None) -> float:
    """The RoutingTable's retention, or the built-in one when there is no table. Documents
    with errors stop the purge: the wrong retention would delete what should be kept."""
    named = paths or contracts_dir is not None or policies_dir is not None
    if not named and not any(Path(name).exists() for name in DEFAULT_DOCUMENTS):
        return build_routing({}, None).retention_seconds
    documents = sort_paths("receipts purge", paths, contracts_dir, policies_dir).documents
    return load(documents).routing.retention_seconds


def _duration_seconds(text: str) -> float:
    """``--older-than``: any duration the documents accept (``720h``, ``30d``, ``P30D``)."""
    try:
        return parse_duration(text)
    except ValueError as error:
        raise InputError(f"--older-than: {error}") from None


@receipts.command("show")
@click.argument("operation_id")
@STORE_OPTION
def receipts_show(operation_id: str, store_url: str) -> None:
    """Print the receipt of OPERATION_ID as JSON: its state, arguments, result, attempts,
    and `log_line`, the hash of the decision log line of the decision that executed it."""
    store = open_existing_store(store_url)
    try:
        receipt = store.get(operation_id)
    finally:
        store.close()
    if receipt is None:
        raise InputError(f"no receipt {operation_id!r} in {store.url} (purged, or another "
                         "store: pass --store with the URL your gate writes to)")
    shown = {k: (str(v) if isinstance(v, datetime) else v) for k, v in asdict(receipt).items()}
    click.echo(json.dumps(shown, indent=2, ensure_ascii=True, default=str))


@receipts.command("migrate")
@STORE_OPTION
def receipts_migrate(store_url: str) -> None:
    """Create or upgrade the store's schema (stores also do this when they open)."""
    store = open_store(store_url)
    migrate = getattr(store, "migrate", None)
    if callable(migrate):
        migrate()
    store.close()
    click.echo(f"{store.url}: schema is up to date")


# review -------------------------------------------------------------------------------------


@click.group()
def review() -> None:
    """The review queue: outcomes handed over to a person.

    \b
    Exit codes:
      0 done
      2 bad input: a store that cannot be opened, no such item, an item already resolved
    """


@review.command("list")
@STORE_OPTION
@click.option("--all", "show_all", is_flag=True, help="Include resolved items.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def review_list(store_url: str, show_all: bool, output_format: str) -> None:
    """List open (and taken) review items, oldest first."""
    store = open_existing_store(store_url)
    try:
        items = [i for i in store.list_reviews()
                 if show_all or i.status != ReviewStatus.RESOLVED]
    finally:
        store.close()
    if output_format == "json":
        click.echo(json.dumps([_review_dict(i) for i in items], indent=2, default=str))
        return
    if not items:
        click.echo("the review queue is empty")
        return
    for line in review_table(items):
        click.echo(line)


def review_table(items: list[ReviewItem]) -> list[str]:
    """The review items as a table with a header: one line each, times in UTC."""
    rows = [(item.review_id, str(item.status), item.reason,
             f"{item.created_at.astimezone(UTC):%Y-%m-%d %H:%M}", item.taken_by or "-",
             shown(item.summary) + (f" -> {item.resolution} by {item.resolved_by}"
                             if item.resolution else ""))
            for item in items]
    header = ("REVIEW ID", "STATUS", "REASON", "CREATED (UTC)", "TAKEN BY", "SUMMARY")
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(5)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True))
            + "  " + row[5] for row in (header, *rows)]


@review.command("take")
@BY_OPTION
@STORE_OPTION
def review_take(by: str, store_url: str) -> None:
    """Take the oldest open item for yourself; two reviewers never get the same one."""
    store = open_existing_store(store_url)
    try:
        item = store.take_review(reviewer=by, now=_utc_now())
    finally:
        store.close()
    if item is None:
        click.echo("no open review item")
        return
    click.echo(f"{item.review_id} taken by {item.taken_by}: {item.reason}: "
               f"{shown(item.summary)}")
    for line in item_lines(item):
        click.echo(line)


def item_lines(item: ReviewItem) -> list[str]:
    """What ``take`` shows of an item: a confirmation's draft as the one renderer of
    drafts writes it (``confirmation.drafts``), then the rest of its payload as JSON in
    which every character outside ASCII is escaped, so nothing in it can pass unseen."""
    payload = dict(item.payload)
    lines = []
    if isinstance(payload.get("draft"), str):
        lines.extend(["What a person is asked to confirm:", payload.pop("draft")])
        payload.pop("arguments", None)  # the draft shows each of them
    if payload:
        lines.append(json.dumps(payload, indent=2, ensure_ascii=True, default=str))
    return lines


@review.command("resolve")
@click.argument("review_id")
@click.option("--as", "resolution", type=click.Choice(["succeeded", "failed"]), required=True)
@click.option("--note", required=True, help="What the person found, for the record.")
@click.option("--by", "by", default=None,
              help="Who resolves it [default: the person who took the item, else $USER].")
@STORE_OPTION
def review_resolve(review_id: str, resolution: str, note: str, by: str | None,
                   store_url: str) -> None:
    """Close a review item; its receipt takes the state you give."""
    store = open_existing_store(store_url)
    try:
        resolver = by or resolved_by(store.list_reviews(), review_id)
        item = store.resolve_review(review_id, resolution=resolution, note=note, by=resolver,
                                    now=_utc_now())
    finally:
        store.close()
    click.echo(f"{item.review_id} resolved as {item.resolution} by {item.resolved_by}")


def resolved_by(items: list[ReviewItem], review_id: str) -> str:
    """Who resolves an item when ``--by`` is not given: whoever took it, else ``$USER``."""
    taken_by = next((item.taken_by for item in items if item.review_id == review_id), None)
    person = taken_by or os.environ.get("USER")
    if not person:
        raise InputError(f"review item {review_id!r} was not taken by anyone and $USER is "
                         "not set: say who resolves it with --by NAME")
    return person


def open_existing_store(url: str) -> ReceiptStore:
    """The store ``url`` names, refusing an SQLite file that is not there: reading the
    review queue must never create an empty store where the gate's is expected."""
    path = sqlite_path(url)
    if path is not None and not Path(path).exists():
        raise InputError(f"no receipt store at {path}: pass --store with the URL your gate "
                         "writes to, or set CALLGATE_STORE (nothing was created)")
    return open_store(url)


def sqlite_path(url: str) -> str | None:
    """The file an SQLite store URL names, or None for any other store."""
    if url.startswith(SQLITE_PREFIX):
        return url.removeprefix(SQLITE_PREFIX)
    if "://" not in url and url.lower().endswith(SQLITE_SUFFIXES):
        return url
    return None


def _review_dict(item: ReviewItem) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, datetime) else v) for k, v in asdict(item).items()}


def _utc_now() -> datetime:
    return datetime.now(UTC)


COMMANDS = (receipts, review)
