"""Hot reload of ``callgate serve --bundle``: the bundle's file watched, or its URL polled
(``If-None-Match`` / ``If-Modified-Since``), every ``--bundle-poll`` seconds, in a thread of
its own — never on a decision's path.

A new bundle is read, verified and compiled there; only then is it handed to the service,
which swaps its whole policy in one assignment (``Service.use_bundle``): a request decides
wholly by the policy it started with, and each decision's log line records the digest of
that one. A bundle that fails to read, verify or compile is refused: the old one keeps
serving, and the refusal is said once per bundle in the log (``callgate.bundles``), counted
in ``callgate_bundle_reloads_total{outcome="refused"}``, and shown by ``/readyz``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from callgate_rules.documents.bundle import (
    FETCH_TIMEOUT,
    MAX_BUNDLE_BYTES,
    Bundle,
    read_bundle_bytes,
)
from callgate_rules.errors import CallgateError, ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from callgate_rules.documents.model import GateConfig
    from callgate_rules.server.service import Service

LOGGER = logging.getLogger("callgate.bundles")


@dataclass
class ReloadState:
    """What the watcher knows: the digest serving, the last refusal (None once a bundle
    loads again), and how many reloads and refusals there were."""

    serving: str
    refused: str | None = None
    refused_digest: str | None = None
    reloads: int = 0
    refusals: int = 0
    checked_at: float | None = None


class BundleWatch:
    """Polls ``location`` (a file or an http(s) URL) every ``interval`` seconds; hands each
    new bundle that verifies and compiles to ``apply``."""

    def __init__(self, location: str, public_key: Ed25519PublicKey | None, *,
                 allow_unsigned: bool, interval: float, serving: Bundle,
                 apply: Callable[[Bundle, GateConfig], None],
                 counted: Callable[[str], None] = lambda outcome: None) -> None:
        self.location = location
        self.public_key = public_key
        self.allow_unsigned = allow_unsigned
        self.interval = interval
        self.apply = apply
        self.counted = counted
        self.state = ReloadState(serving=serving.digest)
        self._validators: dict[str, str] = {}  # ETag / Last-Modified of the URL's last answer
        # None: the first look reads the file (it may have changed since the start read it)
        self._stat: tuple[int, int, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="callgate-bundle-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=FETCH_TIMEOUT + 1)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - the watcher must outlive any one poll
                LOGGER.exception("bundle %s: polling failed; still serving %s",
                                 self.location, self.state.serving)

    def poll(self) -> str:
        """Look once: ``unchanged``, ``reloaded`` or ``refused``."""
        self.state.checked_at = time.time()
        try:
            data = self._fetch()
        except CallgateError as error:
            return self._refuse(str(error), None)
        digest = None if data is None else "sha256:" + hashlib.sha256(data).hexdigest()
        if data is None or digest == self.state.serving:
            if self.state.refused_digest is None:  # it could not be fetched; now it can
                self.state.refused = None
            return "unchanged"
        if digest == self.state.refused_digest:
            return "unchanged"
        assert digest is not None
        try:
            bundle = read_bundle_bytes(data, self.location).verify(
                self.public_key, allow_unsigned=self.allow_unsigned)
            config = bundle.compile()
        except ConfigError as error:
            first = str(error.findings[0]) if error.findings else "no details"
            return self._refuse(f"bundle {self.location}: {len(error.findings)} error(s) in "
                                f"its documents, the first: {first}", digest)
        except CallgateError as error:
            return self._refuse(str(error), digest)
        self.apply(bundle, config)
        LOGGER.warning("bundle %s: now serving %s (was %s)", self.location, bundle.digest,
                       self.state.serving)
        self.state.serving, self.state.refused, self.state.refused_digest = \
            bundle.digest, None, None
        self.state.reloads += 1
        self.counted("reloaded")
        return "reloaded"

    def _refuse(self, why: str, digest: str | None) -> str:
        if why != self.state.refused:  # said once per refusal, not at every poll
            LOGGER.error("%s; still serving %s", why, self.state.serving)
            self.state.refusals += 1
            self.counted("refused")
        self.state.refused, self.state.refused_digest = why, digest
        return "refused"

    def _fetch(self) -> bytes | None:
        """The bundle's bytes when they may have changed, else None."""
        if self.location.startswith(("http://", "https://")):
            return self._fetch_url()
        stat = _stat(self.location)
        if stat is not None and stat == self._stat:
            return None
        path = Path(self.location.removeprefix("file://"))
        if stat is None or not path.is_file():
            raise CallgateError(f"bundle {self.location}: not a readable regular file")
        with path.open("rb") as file:
            data = file.read(MAX_BUNDLE_BYTES + 1)
        self._stat = stat
        return data

    def _fetch_url(self) -> bytes | None:
        request = urllib.request.Request(self.location, headers={
            name: value for name, value in (
                ("If-None-Match", self._validators.get("etag")),
                ("If-Modified-Since", self._validators.get("last-modified"))) if value})
        try:
            with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as answer:  # noqa: S310
                data: bytes = answer.read(MAX_BUNDLE_BYTES + 1)
                self._validators = {name: answer.headers[name] for name in
                                    ("etag", "last-modified") if answer.headers.get(name)}
        except urllib.error.HTTPError as error:
            if error.code == 304:
                return None
            raise CallgateError(f"bundle {self.location}: HTTP {error.code}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", None) or error
            raise CallgateError(f"bundle {self.location}: cannot fetch: {reason}") from None
        return data


def _stat(location: str) -> tuple[int, int, int] | None:
    if location.startswith(("http://", "https://")):
        return None
    try:
        found = os.stat(location.removeprefix("file://"))
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size, found.st_ino


class CurrentHosted:
    """Stands for the service's ``hosted`` flow serving now: each attribute is read from the
    one current at that moment, so a router made at start follows reloads, and one method
    call runs wholly on one policy."""

    def __init__(self, service: Any) -> None:
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service.hosted, name)


def use_bundle(service: Service, bundle: Bundle, config: GateConfig) -> None:
    """Serve ``config`` (compiled from ``bundle``) from the next request on: a new hosted
    flow over the same store, log, resolvers, observers and secret (confirmation tokens
    and sealed texts stay valid), put in place by one assignment."""
    from callgate_rules.pipeline.hosted import HostedWrites
    from callgate_rules.server.records import LookupRecords, RequestResolvers

    previous = service.hosted.gate
    lookups = LookupRecords(config)
    hosted = HostedWrites(config, store=service.store, secret=service.settings.secret,
                          resolvers=RequestResolvers(service.resolvers, lookups),
                          decision_log=service.decision_log, bundle=bundle.digest,
                          observers=service.observers)
    hosted.gate.secret, hosted.gate.sealer = previous.secret, previous.sealer
    service.lookups = lookups
    service.hosted = hosted


def watch_bundle(service: Service) -> BundleWatch:
    """The watcher of the service's ``--bundle``, counting into its /metrics, started."""
    from prometheus_client import Counter

    from callgate_rules.signing import load_public_key

    settings = service.settings
    assert settings.bundle is not None and settings.bundle_location is not None
    reloads = Counter("callgate_bundle_reloads", "Bundles loaded while serving (reloaded) "
                      "and bundles refused, the old one serving on (refused)", ["outcome"],
                      registry=service.metrics.registry)
    key = load_public_key(settings.bundle_public_key) if settings.bundle_public_key else None
    watch = BundleWatch(settings.bundle_location, key,
                        allow_unsigned=settings.allow_unsigned_bundle,
                        interval=settings.bundle_poll, serving=settings.bundle,
                        apply=lambda bundle, config: use_bundle(service, bundle, config),
                        counted=lambda outcome: reloads.labels(outcome).inc())
    watch.start()
    return watch
