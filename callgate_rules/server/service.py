"""What one service instance holds: its settings, the hosted flow over the compiled
documents and the receipt store, its metrics, and the bound on concurrent gate work."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import anyio
import anyio.to_thread

from callgate_rules.documents.compiler import load
from callgate_rules.documents.source import read_data_file
from callgate_rules.errors import InputError, StoreError
from callgate_rules.harness.world import WorldResolvers, check_world
from callgate_rules.integrations.decision_log import open_decision_log
from callgate_rules.integrations.identity import TokenVerifier
from callgate_rules.integrations.telemetry import log_decision
from callgate_rules.pipeline.hosted import HostedWrites, Observer, UnknownOperation
from callgate_rules.server.metrics import Metrics, TimedStore
from callgate_rules.server.problems import Problem
from callgate_rules.server.records import (
    HttpResolver,
    LookupRecords,
    RequestResolvers,
    with_records,
)
from callgate_rules.server.users import Users
from callgate_rules.store import open_store
from callgate_rules.store.base import ReceiptStore, ReviewItem, ReviewStatus

T = TypeVar("T")
READINESS_PROBE = "callgate-readiness-probe"  # an operation ID no gate ever makes


@dataclass(frozen=True)
class ServiceSettings:
    """How ``callgate serve`` runs; every field has the command-line option of its name."""

    paths: tuple[str, ...] = ("contracts", "policies")
    store: str = "sqlite:///callgate.sqlite3"
    verifier: TokenVerifier | None = None  # None: no bearer tokens (loopback only)
    users: Users | None = None  # who may sign in to the review page
    review_verifier: TokenVerifier | None = None  # people's bearer tokens for the page
    secret: bytes | None = None  # confirmation tokens and page sessions across instances
    world: str | None = None  # records for the look-ups (a world file), if any
    decision_log: str | None = None  # every decision's log line, masked (JSON lines)
    resolver_url: str | None = None  # the host's endpoint answering look-ups over HTTP
    resolver_timeout: float = 5.0
    resolver_token: str | None = None  # a bearer token for that endpoint
    max_body_bytes: int = 256 * 1024
    request_timeout: float = 30.0
    concurrency: int = 16  # gate calls running at once; more wait their turn
    otel: str | None = None  # "console" or "otlp": export decision spans
    secure_cookies: bool = False  # page cookies only over HTTPS


class Service:
    def __init__(self, settings: ServiceSettings, *,
                 observers: tuple[Observer, ...] = ()) -> None:
        self.settings = settings
        config = load(settings.paths)
        self.metrics = Metrics(config.contracts)
        self.store = cast(ReceiptStore, TimedStore(open_store(settings.store),
                                                   self.metrics.store))
        self.metrics.watch(self.store)
        self.lookups = LookupRecords(config)
        self.resolvers = _resolvers(settings)
        self.decision_log = open_decision_log(settings.decision_log)
        self.hosted = HostedWrites(config, store=self.store, secret=settings.secret,
                                   resolvers=RequestResolvers(self.resolvers, self.lookups),
                                   decision_log=self.decision_log,
                                   observers=(self.metrics.observe, log_decision, *observers))
        self.limiter = anyio.CapacityLimiter(settings.concurrency)

    async def run(self, endpoint: str, work: Callable[[], T],
                  records: Mapping[str, Any] | None = None) -> T:
        """``work`` in a worker thread, timed under ``endpoint``, with the look-ups' records
        the request passed (``server.records``). A request that runs out of time is
        answered while its thread finishes: the receipt keeps what it did."""
        started = time.perf_counter()
        def checked() -> T:  # the records are checked in the worker too, off the event loop
            return with_records(self.lookups.by_collection(records), work)()

        try:
            return await anyio.to_thread.run_sync(checked, limiter=self.limiter,
                                                  abandon_on_cancel=True)
        finally:
            self.metrics.requests.labels(endpoint).observe(time.perf_counter() - started)

    def resolve(self, review_id: str, resolution: str, note: str, by: str) -> ReviewItem:
        """Close a review item; 404 for an unknown one, 409 for one already resolved."""
        store = self.hosted.gate.store
        item = next((i for i in store.list_reviews() if i.review_id == review_id), None)
        if item is None:
            raise UnknownOperation(f"no review item {review_id!r}")
        if item.status == ReviewStatus.RESOLVED:
            raise Problem(409, "Already resolved", f"review item {review_id!r} was resolved "
                          f"by {item.resolved_by}")
        return store.resolve_review(review_id, resolution=resolution, note=note, by=by,
                                    now=self.hosted.gate.clock())

    def ready(self) -> str | None:
        """``None`` when the store answers, else why not."""
        try:
            self.store.get(READINESS_PROBE)
        except StoreError as error:
            return str(error)
        return None

    def close(self) -> None:
        self.store.close()
        if self.decision_log is not None:
            self.decision_log.close()
        if isinstance(self.resolvers, HttpResolver):
            self.resolvers.close()


def _resolvers(settings: ServiceSettings) -> WorldResolvers | HttpResolver | None:
    """The look-ups' records from a world file, as ``callgate check --world`` reads one, or
    from the host's endpoint over HTTP."""
    if settings.world is not None and settings.resolver_url is not None:
        raise InputError("give --world or --resolver-url, not both")
    if settings.resolver_url is not None:
        if not settings.resolver_url.startswith(("http://", "https://")):
            raise InputError(f"--resolver-url {settings.resolver_url}: expected an http:// "
                             "or https:// URL")
        return HttpResolver(settings.resolver_url, settings.resolver_timeout,
                            settings.resolver_token)
    if settings.world is None:
        return None
    world = settings.world
    return WorldResolvers(check_world(read_data_file(world, "the world"), world))


