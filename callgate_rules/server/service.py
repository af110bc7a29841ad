"""What one service instance holds: its settings, the hosted flow over the compiled
documents and the receipt store, its metrics, and the bound on concurrent gate work."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.to_thread

from callgate_rules.decision_log import CHECKPOINT_EVERY, open_decision_log
from callgate_rules.documents.compiler import load
from callgate_rules.documents.source import read_data_file
from callgate_rules.errors import InputError, StoreError
from callgate_rules.harness.world import WorldResolvers, check_world
from callgate_rules.integrations.identity import TokenVerifier
from callgate_rules.integrations.telemetry import log_decision
from callgate_rules.pipeline.hosted import HostedWrites, Observer, UnknownOperation
from callgate_rules.server.bundles import PINNED, Serving
from callgate_rules.server.metrics import Metrics, TimedStore
from callgate_rules.server.problems import Problem
from callgate_rules.server.records import (
    HttpResolver,
    LookupRecords,
    RequestResolvers,
    lookup_deadlines,
    run_with_records,
)
from callgate_rules.server.users import IDLE_SECONDS, SESSION_SECONDS, LoginLimits, Users
from callgate_rules.store import open_store
from callgate_rules.store.base import Receipt, ReceiptStore, ReviewItem, ReviewStatus
from callgate_rules.store.scoping import NOTHING, Scope

if TYPE_CHECKING:
    from callgate_rules.documents.bundle import Bundle
    from callgate_rules.server.bundles import BundleWatch

T = TypeVar("T")


UNSCOPED = ("none", "all")
LOGIN_QUEUE = 8  # sign-ins waiting per one hashing at once; more are refused (429)
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
    decision_log_key: str | None = None  # an Ed25519 PEM key signing the log's checkpoints
    checkpoint_every: int = CHECKPOINT_EVERY  # lines between two signed checkpoints
    # a verified policy bundle (documents.bundle), in place of paths: each decision's log
    # line records its digest
    bundle: Bundle | None = None
    bundle_location: str | None = None  # where it came from: watched for a new one
    bundle_public_key: str | None = None  # the PEM file a new one must be signed by
    allow_unsigned_bundle: bool = False
    bundle_poll: float = 0.0  # seconds between two looks for a new bundle; 0: never
    resolver_url: str | None = None  # the host's endpoint answering look-ups over HTTP
    resolver_timeout: float = 5.0
    resolver_token: str | None = None  # a bearer token for that endpoint
    max_body_bytes: int = 256 * 1024
    request_timeout: float = 30.0
    header_timeout: float = 10.0  # the request's headers complete within (uvicorn protocol)
    body_timeout: float = 10.0  # the whole body arrives within, after the headers (408)
    client_concurrency: int = 32  # unfinished requests per client address (429 past it)
    readiness_timeout: float = 2.0  # /readyz answers within, whatever the store does
    concurrency: int = 16  # gate calls running at once; more wait their turn
    otel: str | None = None  # "console" or "otlp": export decision spans
    # page cookies only over HTTPS; `callgate serve` turns it off on a loopback address
    # unless --secure-cookies is given (cli.serve.cookie_security)
    secure_cookies: bool = True
    # what a caller with no scope sees (a token pinning no actor field, a reviewer without
    # `scope:`): "none" (nothing) or "all" (a single-tenant deployment)
    unscoped: str = "none"
    session_idle: float = IDLE_SECONDS  # a page session ends when unused this long
    session_lifetime: float = SESSION_SECONDS  # and at the latest this long after sign-in
    login_limits: LoginLimits = LoginLimits()
    login_concurrency: int = 2  # passwords hashed at once, on a budget of their own


class Service:
    def __init__(self, settings: ServiceSettings, *,
                 observers: tuple[Observer, ...] = ()) -> None:
        self.settings = settings
        config = settings.bundle.compile() if settings.bundle else load(settings.paths)
        self.metrics = Metrics(config.contracts)
        self.store = cast(ReceiptStore, TimedStore(open_store(settings.store),
                                                   self.metrics.store))
        self.metrics.watch(self.store)
        lookups = LookupRecords(config)
        self.resolvers = _resolvers(settings, lookup_deadlines(config))
        self.decision_log = open_decision_log(settings.decision_log,
                                              signing_key=settings.decision_log_key,
                                              checkpoint_every=settings.checkpoint_every)
        self.observers = (self.metrics.observe, log_decision, *observers)
        self.serving = Serving(HostedWrites(
            config, store=self.store, secret=settings.secret,
            resolvers=RequestResolvers(self.resolvers, lookups),
            decision_log=self.decision_log,
            bundle=settings.bundle.digest if settings.bundle else None,
            observers=self.observers), lookups)
        self.bundle_watch: BundleWatch | None = None
        if settings.bundle and settings.bundle_poll:  # a new bundle swaps self.serving
            from callgate_rules.server.bundles import watch_bundle

            self.bundle_watch = watch_bundle(self)
        self.limiter = anyio.CapacityLimiter(settings.concurrency)
        # Sign-ins hash passwords (PBKDF2, deliberately slow) on their own bounded budget,
        # so a flood of them never queues the decision API behind it.
        self.login_limiter = anyio.CapacityLimiter(settings.login_concurrency)
        self.logins_waiting = 0
        if settings.unscoped not in UNSCOPED:
            raise InputError(f"--unscoped {settings.unscoped}: expected one of "
                             f"{', '.join(UNSCOPED)}")

    @property
    def hosted(self) -> HostedWrites:
        """The hosted flow of the policy serving now (or of the request's, in its worker)."""
        return (PINNED.get() or self.serving).hosted

    @property
    def lookups(self) -> LookupRecords:
        return (PINNED.get() or self.serving).lookups

    @property
    def blocks_on_nothing(self) -> bool:
        """Whether a decision outside a named run waits on nothing: its look-ups answered
        from the request or a world file (not over HTTP), no decision log file to write.
        Then ``/v1/decide`` runs on the event loop (``run_here``): the hop to a worker
        thread costs more than such a decision, and at 8 connections the loop and the
        workers handing the GIL back and forth made the p99 many times a plain app's."""
        return self.settings.resolver_url is None and self.decision_log is None

    async def run(self, endpoint: str, work: Callable[[], T],
                  records: Mapping[str, Any] | None = None) -> T:
        """``work`` in a worker thread (``in_worker``) on the policy serving now, timed
        under ``endpoint``."""
        with self.metrics.timed(endpoint):
            return await self.in_worker(work, records, self.serving)

    async def in_worker(self, work: Callable[[], T], records: Mapping[str, Any] | None,
                        serving: Serving) -> T:
        """``work`` in a worker thread, on ``serving``, with the look-ups' records the
        request passed (``server.records``; checked in the worker too, off the event loop).
        A request that runs out of time is answered while its thread finishes: the receipt
        keeps what it did."""
        return await anyio.to_thread.run_sync(self.pinned(work, records, serving),
                                              limiter=self.limiter, abandon_on_cancel=True)

    async def run_here(self, work: Callable[[], T], records: Mapping[str, Any] | None,
                       serving: Serving) -> T:
        """``work`` in this thread (the event loop's: it must block on nothing, and take a
        bounded time), as ``run`` runs it, holding a place under the concurrency limit as
        a worker does; when none is free now, it waits for one in a worker (``in_worker``)
        like any other work."""
        place = object()  # the borrower: the task may hold a worker's place too
        try:
            self.limiter.acquire_on_behalf_of_nowait(place)
        except anyio.WouldBlock:
            return await self.in_worker(work, records, serving)
        try:
            return self.run_pinned(work, records, serving)
        finally:
            self.limiter.release_on_behalf_of(place)

    @classmethod
    def pinned(cls, work: Callable[[], T], records: Mapping[str, Any] | None,
               serving: Serving) -> Callable[[], T]:
        """``work``, to be run on one policy for the whole request (``run_pinned``)."""
        return functools.partial(cls.run_pinned, work, records, serving)

    @staticmethod
    def run_pinned(work: Callable[[], T], records: Mapping[str, Any] | None,
                   serving: Serving) -> T:
        """``work`` run now on one policy for the whole request, should a bundle swap
        meanwhile (``PINNED``), with the request's records checked against its look-ups."""
        pinned = PINNED.set(serving)
        try:
            return run_with_records(serving.lookups.by_collection(records), work)
        finally:
            PINNED.reset(pinned)

    async def run_login(self, work: Callable[[], T]) -> T:
        """A sign-in's password check, on the sign-ins' own budget: at most
        ``login_concurrency`` at once and a bounded queue (429 past it)."""
        if self.logins_waiting >= LOGIN_QUEUE * self.settings.login_concurrency:
            raise Problem(429, "Too many sign-ins", "too many sign-ins at once; try again in "
                          "a few seconds")
        self.logins_waiting += 1
        started = time.perf_counter()
        try:
            return await anyio.to_thread.run_sync(work, limiter=self.login_limiter,
                                                  abandon_on_cancel=True)
        finally:
            self.logins_waiting -= 1
            self.metrics.requests.labels("login").observe(time.perf_counter() - started)

    async def run_session(self, work: Callable[[], T]) -> T:
        """A page session's store work (open, check, revoke) for a cookie whose signature
        already holds, on the sign-ins' budget: never queued behind, nor queuing, the
        decision API."""
        started = time.perf_counter()
        try:
            return await anyio.to_thread.run_sync(work, limiter=self.login_limiter,
                                                  abandon_on_cancel=True)
        finally:
            self.metrics.requests.labels("session").observe(time.perf_counter() - started)

    def unscoped(self) -> Scope:
        """The scope of a caller that has none: as ``--unscoped`` says."""
        return Scope() if self.settings.unscoped == "all" else NOTHING

    def review_item(self, review_id: str, scope: Scope) -> ReviewItem | None:
        """The review item, if it exists and is in ``scope`` (else it reads as missing)."""
        items = self.hosted.gate.store.list_reviews(scope=scope)
        return next((i for i in items if i.review_id == review_id), None)

    def visible_receipt(self, operation_id: str, scope: Scope) -> Receipt | None:
        """The receipt, if it exists and is in ``scope`` (else it reads as missing)."""
        receipt = self.hosted.gate.store.get(operation_id)
        if receipt is None or not scope.admits(receipt.tool, receipt.actor):
            return None
        return receipt

    def resolve(self, review_id: str, resolution: str, note: str, by: str,
                scope: Scope | None = None) -> ReviewItem:
        """Close a review item; 404 for an unknown one (or one out of ``scope``), 409 for
        one already resolved."""
        store = self.hosted.gate.store
        item = self.review_item(review_id, scope or Scope())
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
        if self.bundle_watch is not None:
            self.bundle_watch.stop()
        self.store.close()
        if self.decision_log is not None:
            self.decision_log.close()
        if isinstance(self.resolvers, HttpResolver):
            self.resolvers.close()


def _resolvers(settings: ServiceSettings,
               deadlines: Mapping[str, float]) -> WorldResolvers | HttpResolver | None:
    """The look-ups' records from a world file, as ``callgate check --world`` reads one, or
    from the host's endpoint over HTTP."""
    if settings.world is not None and settings.resolver_url is not None:
        raise InputError("give --world or --resolver-url, not both")
    if settings.resolver_url is not None:
        if not settings.resolver_url.startswith(("http://", "https://")):
            raise InputError(f"--resolver-url {settings.resolver_url}: expected an http:// "
                             "or https:// URL")
        return HttpResolver(settings.resolver_url, settings.resolver_timeout,
                            settings.resolver_token, deadlines)
    if settings.world is None:
        return None
    world = settings.world
    return WorldResolvers(check_world(read_data_file(world, "the world"), world))


