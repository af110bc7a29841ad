"""The look-ups' records a host passes with a request (``records`` in the body), by look-up
name, instead of (or before) the service's ``--world`` file.

A host that keeps its records in its own database reads the ones a call needs and sends
them: ``"records": {"ticket": {"id": "T-1", ...}}`` (one record, a list of them, or
``null`` for "there is none"). Each name must be a look-up some contract declares, and each
record is checked against the ``schema`` every contract declares for that look-up, so a
host's mistake is a 422 naming the field, never a decision made on a malformed record.

The gate asks its resolvers by collection; ``RequestResolvers`` answers a collection from
the records the current request passed for a look-up of that collection, and from the
service's own resolvers for every other collection: the world file, or ``HttpResolver``
(``--resolver-url``), which asks the host's endpoint for the records over HTTP. The
request's records travel in a context variable set in the worker thread that runs the
call (``run_with_records``), so concurrent requests never see each other's records.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import httpx
from jsonschema import Draft202012Validator

from callgate_rules.documents.model import GateConfig
from callgate_rules.harness.world import CollectionResolver
from callgate_rules.pipeline.validate import Record, Resolver
from callgate_rules.server.problems import Problem

T = TypeVar("T")
# Records by collection for the request running in this thread; None: none were passed.
_REQUEST_RECORDS: contextvars.ContextVar[Mapping[str, Sequence[Record]] | None] = (
    contextvars.ContextVar("callgate_request_records", default=None))
MAX_RECORDS_PER_LOOKUP = 1000


class LookupRecords:
    """What each look-up name means across the configuration: its collections and the
    record schemas the body's records must match."""

    def __init__(self, config: GateConfig) -> None:
        self.collections: dict[str, set[str]] = {}
        self.validators: dict[str, list[Draft202012Validator]] = {}
        self.schemas: dict[str, list[dict[str, Any]]] = {}
        for contract in config.contracts.values():
            for lookup in contract.lookups:
                self.collections.setdefault(lookup.name, set()).add(lookup.collection)
                validators = self.validators.setdefault(lookup.name, [])
                schemas = self.schemas.setdefault(lookup.name, [])
                if lookup.record_schema is not None:
                    validators.append(Draft202012Validator(lookup.record_schema))
                    schemas.append(dict(lookup.record_schema))

    def json_schema(self) -> dict[str, Any]:
        """The body's ``records`` exactly as ``by_collection`` accepts them, for the OpenAPI
        document: only the look-up names some contract has, each a record, a list of at
        most ``MAX_RECORDS_PER_LOOKUP`` of them, or null; a record an object matching
        every schema the contracts declare for that look-up."""
        names: dict[str, Any] = {}
        for name, schemas in sorted(self.schemas.items()):
            record = {"allOf": [{"type": "object"}, *schemas]}
            names[name] = {"anyOf": [record, {"type": "array", "items": record,
                                              "maxItems": MAX_RECORDS_PER_LOOKUP},
                                     {"type": "null"}]}
        return {"anyOf": [{"type": "object", "properties": names,
                           "additionalProperties": False}, {"type": "null"}]}

    def by_collection(self, given: Mapping[str, Any] | None,
                      field: str = "body.records") -> dict[str, list[Record]] | None:
        """The body's records checked and grouped by collection; ``None`` when none were
        given. A 422 problem names every field that is wrong."""
        if given is None:
            return None
        errors: list[dict[str, str]] = []
        grouped: dict[str, list[Record]] = {}
        for name, value in given.items():
            records = self._records(name, value, f"{field}.{name}", errors)
            for collection in self.collections.get(name, ()):
                grouped.setdefault(collection, []).extend(records)
        if errors:
            raise Problem(422, "Bad records", "the records passed for the look-ups do not "
                          "match their schemas", errors)
        return grouped

    def _records(self, name: str, value: Any, field: str,
                 errors: list[dict[str, str]]) -> list[Record]:
        if name not in self.collections:
            known = ", ".join(sorted(self.collections)) or "none"
            errors.append({"field": field, "message": f"no contract has a look-up {name!r} "
                                                      f"(look-ups: {known})"})
            return []
        listed = [] if value is None else value if isinstance(value, list) else [value]
        if len(listed) > MAX_RECORDS_PER_LOOKUP:
            errors.append({"field": field, "message": f"at most {MAX_RECORDS_PER_LOOKUP} "
                                                      "records per look-up"})
            return []
        records: list[Record] = []
        for index, record in enumerate(listed):
            where = f"{field}[{index}]" if isinstance(value, list) else field
            if not isinstance(record, Mapping):
                errors.append({"field": where, "message": "a record must be a JSON object"})
                continue
            for validator in self.validators[name]:
                for error in sorted(validator.iter_errors(record), key=lambda e: list(e.path)):
                    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                                   for p in error.path)
                    errors.append({"field": f"{where}{path}", "message": error.message[:300]})
            records.append(record)
        return records


class Resolvers(Protocol):
    def get(self, collection: str, default: Any = None) -> Any: ...


class RequestResolvers(Mapping[str, Resolver]):
    """The gate's resolvers in the service: the current request's records for the
    collections it passed records for, else the service's own (world file or HTTP)."""

    def __init__(self, world: Resolvers | None, lookups: LookupRecords) -> None:
        self.world = world
        self.lookups = lookups

    def __getitem__(self, collection: str) -> Resolver:
        found: Resolver | None = self.get(collection)
        if found is None:
            raise KeyError(collection)
        return found

    def get(self, collection: str, default: Any = None) -> Any:
        passed = _REQUEST_RECORDS.get()
        if passed is not None and collection in passed:
            return CollectionResolver(passed[collection])
        if self.world is not None:
            return self.world.get(collection, default)
        # Nowhere to read them from: the host's request is missing them, said as such (a
        # look-up that cannot be made is not an internal error of the service).
        names = sorted(name for name, collections in self.lookups.collections.items()
                       if collection in collections)
        raise Problem(422, "Records missing", f"no records for the collection {collection!r}: "
                      "pass them in the body's records, or start the service with --world or "
                      "--resolver-url", [{"field": f"body.records.{name}",
                                          "message": "the call's look-up needs these records"}
                                         for name in names])

    def __iter__(self) -> Iterator[str]:
        return iter(self.world) if isinstance(self.world, Mapping) else iter(())

    def __len__(self) -> int:
        return len(self.world) if isinstance(self.world, Mapping) else 0


def run_with_records(records: Mapping[str, Sequence[Record]] | None,
                     work: Callable[[], T]) -> T:
    """``work`` run now, with ``records`` as the request's (in whatever thread it runs)."""
    token = _REQUEST_RECORDS.set(records)
    try:
        return work()
    finally:
        _REQUEST_RECORDS.reset(token)


MAX_RESOLVER_BYTES = 1024 * 1024


@dataclass
class HttpResolver:
    """The look-ups' records from the host's endpoint (``--resolver-url``): for each look-up
    the service POSTs ``{"collection", "field", "value"}`` as JSON and reads back a JSON
    list of records. A failure — no whole answer in time, a status other than 200, an
    answer over 1 MiB or not a list of objects — is the resolver failing, which the gate
    routes as ``transient`` (nothing is decided on a guess); the endpoint's words stay in
    the log.

    Each look-up has one total deadline — connecting, every byte of the headers and the
    body, and the whole answer — of ``timeout`` seconds, or the contract's own timeout when
    that is shorter (``deadlines``, by collection). Per-read timeouts alone would let an
    endpoint that trickles a byte a second hold the look-up forever, so the requests run
    as coroutines on an event loop of their own (one thread, one connection pool), each
    under ``asyncio.timeout``; the worker thread that asked waits for its answer only."""

    url: str
    timeout: float = 5.0
    token: str | None = None  # sent as a bearer token, when the endpoint wants one
    deadlines: Mapping[str, float] = field(default_factory=dict)  # collection → seconds
    client: httpx.AsyncClient = field(init=False, repr=False)
    loop: asyncio.AbstractEventLoop = field(init=False, repr=False)
    thread: threading.Thread = field(init=False, repr=False)

    def __post_init__(self) -> None:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        self.client = httpx.AsyncClient(timeout=self.timeout, headers=headers,
                                        follow_redirects=False)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="callgate-resolver-url")
        self.thread.start()

    def deadline(self, collection: str) -> float:
        """Seconds a look-up in ``collection`` may take, all of it."""
        return min(self.timeout, self.deadlines.get(collection, self.timeout))

    def get(self, collection: str, default: Any = None) -> Resolver:
        return lambda field, value: self.records(collection, field, value)

    def records(self, collection: str, field: str, value: Any) -> list[Record]:
        body = json.dumps({"collection": collection, "field": field, "value": value},
                          default=str)
        seconds = self.deadline(collection)
        asked = asyncio.run_coroutine_threadsafe(self._ask(body, seconds), self.loop)
        try:
            # The coroutine ends by its own deadline; this wait is only a backstop.
            read = asked.result(seconds + 1.0)
        except concurrent.futures.TimeoutError:
            asked.cancel()
            raise LookupError(f"{self.url} gave no whole answer within {seconds:g}s") from None
        try:
            found = json.loads(read)
        except ValueError:
            raise LookupError(f"{self.url} did not answer JSON") from None
        if not isinstance(found, list) or not all(isinstance(r, dict) for r in found):
            raise LookupError(f"{self.url} did not answer a list of records")
        return found

    async def _ask(self, body: str, seconds: float) -> bytes:
        try:
            async with asyncio.timeout(seconds):
                async with self.client.stream("POST", self.url, content=body) as answer:
                    if answer.status_code != 200:
                        raise LookupError(f"{self.url} answered {answer.status_code}")
                    read = bytearray()
                    async for chunk in answer.aiter_bytes():
                        read += chunk
                        if len(read) > MAX_RESOLVER_BYTES:
                            raise LookupError(f"{self.url} answered more than 1 MiB")
                    return bytes(read)
        except TimeoutError:
            raise LookupError(f"{self.url} gave no whole answer within {seconds:g}s "
                              "(connect, headers and body together)") from None
        except httpx.HTTPError as error:
            raise LookupError(f"{self.url}: {type(error).__name__}: {error}") from None

    def close(self) -> None:
        if not self.loop.is_running():
            return
        asyncio.run_coroutine_threadsafe(self.client.aclose(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def lookup_deadlines(config: GateConfig) -> dict[str, float]:
    """The shortest contract timeout among the look-ups of each collection: an answer
    later than that could not decide the call anyway."""
    deadlines: dict[str, float] = {}
    for contract in config.contracts.values():
        for lookup in contract.lookups:
            deadlines[lookup.collection] = min(deadlines.get(lookup.collection, math.inf),
                                               contract.timeout_seconds)
    return deadlines
