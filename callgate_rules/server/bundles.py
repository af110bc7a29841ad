"""Hot reload of ``callgate serve --bundle``: the bundle's file watched, or its URL polled
(``If-None-Match`` / ``If-Modified-Since``), every ``--bundle-poll`` seconds, in a thread of
its own — never on a decision's path (``documents.bundle_watch``, shared with the gateway).

A new bundle is read, verified and compiled there; only then is it handed to the service,
which swaps its whole policy in one assignment (``Service.use_bundle``): a request decides
wholly by the policy it started with, and each decision's log line records the digest of
that one. A bundle that fails to read, verify or compile is refused: the old one keeps
serving, and the refusal is said once per bundle in the log (``callgate.bundles``), counted
in ``callgate_bundle_reloads_total{outcome="refused"}``, and shown by ``/readyz``.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from callgate_rules.documents.bundle import Bundle
from callgate_rules.documents.bundle_watch import LOGGER as LOGGER
from callgate_rules.documents.bundle_watch import BundleWatch as BundleWatch
from callgate_rules.documents.bundle_watch import ReloadState as ReloadState

if TYPE_CHECKING:
    from callgate_rules.documents.model import GateConfig
    from callgate_rules.pipeline.hosted import HostedWrites
    from callgate_rules.server.records import LookupRecords
    from callgate_rules.server.service import Service


@dataclass(frozen=True)
class Serving:
    """The policy a service serves: its hosted flow and the look-ups whose records a request
    may carry, made from one configuration and swapped together, in one assignment."""

    hosted: HostedWrites
    lookups: LookupRecords


# The policy a request started with, in its worker thread: every read of ``Service.hosted``
# or ``Service.lookups`` there gets it, whatever was swapped in meanwhile.
PINNED: ContextVar[Serving | None] = ContextVar("callgate_serving", default=None)


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
    service.serving = Serving(hosted, lookups)


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
