"""Looking for a new policy bundle while serving: the bundle's file watched, or its URL
polled (``If-None-Match`` / ``If-Modified-Since``), every so many seconds, in a thread of its
own — never on a decision's path. One definition for ``callgate serve`` (``server.bundles``)
and ``callgate gateway`` (``gateway.reload``); it imports nothing of either.

A new bundle is read, verified and compiled in that thread; only then is it handed to
``apply``, which puts the whole policy in place in one assignment, so a decision made by it
is made wholly by one bundle. ``apply`` may refuse it too (a ``CallgateError``: the gateway
refuses a bundle whose contracts do not fit its upstream). A bundle that fails to read,
verify, compile or apply is refused: the old one keeps serving, and the refusal is said once
per bundle in the log (``callgate.bundles``) and counted (``counted("refused")``).
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
from typing import TYPE_CHECKING

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
        try:
            self.apply(bundle, config)
        except CallgateError as error:  # the service cannot serve it (e.g. the upstream's tools)
            return self._refuse(f"bundle {self.location}: cannot serve it: {error}", digest)
        LOGGER.warning("bundle %s: now serving %s (was %s)", self.location, bundle.digest,
                       self.state.serving)
        self.state.serving, self.state.refused, self.state.refused_digest = (
            bundle.digest, None, None)
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
