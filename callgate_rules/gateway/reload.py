"""The policy the gateway decides by, and its hot reload (``callgate gateway --bundle``).

``Serving`` is one policy whole: the gate bound to the upstream, the tools it offers and the
confirmer over that gate. The gateway holds one and replaces it in one assignment; a call
takes the one serving when it starts and finishes on it (a confirmation it waits for
included), so no call is decided by two bundles.

``watch`` looks for a new bundle as ``callgate serve`` does (``documents.bundle_watch``: the
file's change, the URL's ETag), every ``--bundle-poll`` seconds, in a thread of its own. A new
bundle is verified and compiled there, then bound to the upstream and its tools' plans
compiled, all before the swap. One that fails — a bad signature, documents that do not
compile, contracts the upstream's tools do not fit — is refused and the old one keeps
serving; each refusal and each reload is one line on the gateway's stderr.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from callgate_rules.documents.bundle_watch import LOGGER, BundleWatch
from callgate_rules.errors import CallgateError
from callgate_rules.gateway import binding
from callgate_rules.gateway.combined import Reachable
from callgate_rules.gateway.confirm import Confirmer
from callgate_rules.pipeline.gate import Gate

if TYPE_CHECKING:
    from collections.abc import Callable

    import mcp_types as types

    from callgate_rules.decision_log import DecisionLog
    from callgate_rules.documents.bundle import Bundle
    from callgate_rules.documents.model import GateConfig
    from callgate_rules.store.base import ReceiptStore


@dataclass(frozen=True)
class Serving:
    """One policy, whole: what a call is decided, executed and confirmed by."""

    gate: Gate
    tools: list[types.Tool]
    confirmer: Confirmer


def bound_gate(config: GateConfig, upstream: Reachable, store: ReceiptStore, *,
               secret: bytes | None, decision_log: DecisionLog | None,
               bundle: str | None) -> Gate:
    """A gate over ``config`` whose executors, finder and resolvers call the upstream."""
    bindings = binding.bind(config, upstream)
    return Gate(config, executors=bindings.executors, finder=bindings.finder,
                resolvers=bindings.resolvers, store=store, secret=secret,
                decision_log=decision_log, bundle=bundle)


def serving(gate: Gate, upstream: Reachable, confirmation_timeout: float) -> Serving:
    return Serving(gate, binding.offered(gate.config, upstream),
                   Confirmer(gate, confirmation_timeout))


def successor(previous: Serving, bundle: Bundle, config: GateConfig, upstream: Reachable,
              confirmation_timeout: float) -> Serving:
    """The policy of a new bundle, ready to decide: checked against the upstream's tools
    (``UnfitBundle`` names each problem), bound, and every tool's plan compiled, so the
    first call after the swap compiles nothing. It keeps the previous gate's store, log,
    secret, sealer and worker: confirmation tokens and sealed texts stay valid."""
    bad = binding.problems(config, upstream)
    if bad:
        raise UnfitBundle("; ".join(bad))
    old = previous.gate
    gate = bound_gate(config, upstream, old.store, secret=old.secret,
                      decision_log=old.decision_log, bundle=bundle.digest)
    gate.sealer, gate.worker = old.sealer, old.worker
    for name in config.contracts:
        gate.plan(name)
    return serving(gate, upstream, confirmation_timeout)


class UnfitBundle(CallgateError):
    """A bundle that verified and compiled but that the upstream cannot serve."""


@dataclass
class Reloading:
    """A running watcher of ``--bundle`` and where it says what it does."""

    watch: BundleWatch
    said: logging.Handler

    def stop(self) -> None:
        self.watch.stop()
        LOGGER.removeHandler(self.said)


def watch(location: str, public_key_file: str | None, *, allow_unsigned: bool,
          interval: float, serving_bundle: Bundle,
          apply: Callable[[Bundle, GateConfig], None], log: TextIO) -> Reloading:
    """The watcher of ``--bundle``, started; its log lines (``callgate.bundles``: each
    bundle taken, each refused) go to ``log`` as the gateway's other lines do."""
    from callgate_rules.signing import load_public_key

    key = load_public_key(public_key_file) if public_key_file else None
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("callgate gateway: %(message)s"))
    LOGGER.addHandler(handler)
    watcher = BundleWatch(location, key, allow_unsigned=allow_unsigned, interval=interval,
                          serving=serving_bundle, apply=apply)
    watcher.start()
    return Reloading(watcher, handler)
