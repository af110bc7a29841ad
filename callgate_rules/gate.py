"""The gate: the seven steps of CALL-GATE-7, read top to bottom in ``_decide``.

    propose → parse → validate (arguments, references) → authorize → validate (rules)
            → execute → reconcile → route

Compile once (``Gate.from_paths``), then call ``check`` (steps 1–4, no side effects) or
``handle`` (all seven) once per proposal.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import authorize, parse, propose, validate
from .compiler import load
from .decision import Decision, ShadowVerdict, TraceEntry
from .documents import Contract, GateConfig
from .errors import ErrorClass, Route
from .messages import agent_message, user_message
from .outcome import Rejection
from .validate import Resolver

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Progress:
    """What the steps have learnt so far, so a rejection can still name tool and versions."""

    trace: list[TraceEntry] = field(default_factory=list)
    shadow: list[ShadowVerdict] = field(default_factory=list)
    call: parse.ParsedCall | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    permit: str | None = None
    contract_only: Contract | None = None  # known before the call fully parsed

    @property
    def contract(self) -> Contract | None:
        return self.call.contract if self.call else self.contract_only


class Gate:
    """A compiled configuration bound to the host's resolvers and clock."""

    def __init__(
        self,
        config: GateConfig,
        *,
        resolvers: Mapping[str, Resolver] | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.config = config
        self.resolvers: Mapping[str, Resolver] = dict(resolvers or {})
        self.clock = clock

    @classmethod
    def from_paths(cls, *paths: str | Path, **bindings: Any) -> Gate:
        """Load and compile every document under ``paths`` (default: contracts, policies)."""
        return cls(load(paths or ("contracts", "policies")), **bindings)

    # -- steps 1–4 ----------------------------------------------------------------------------

    def check(
        self,
        model_output: Any,
        *,
        actor: Mapping[str, Any],
        now: datetime | None = None,
        request_id: str | None = None,
    ) -> Decision:
        """Decide about one proposal without executing anything (steps 1–4 and the route)."""
        started = time.perf_counter()
        now = now or self.clock()
        request_id = request_id or uuid.uuid4().hex
        progress = _Progress()
        try:
            self._decide(model_output, actor, now, progress)
        except Rejection as rejection:
            return self._rejected(rejection, progress, actor, request_id, started)
        return self._allowed(progress, actor, request_id, started)

    def _decide(
        self, model_output: Any, actor: Mapping[str, Any], now: datetime, progress: _Progress
    ) -> None:
        limits = self.config.routing.input_limits
        trace = progress.trace

        calls = propose.read(model_output, limits)  # 1 PROPOSE
        trace.append(TraceEntry("propose", "format", calls[0].format,
                                f"{len(calls)} call(s)"))
        call = progress.call = parse.one_call(calls, self.config.contracts, limits)  # 2 PARSE
        trace.append(TraceEntry("parse", call.contract.name, "pass",
                                call.note or f"contract v{call.contract.version}"))
        contract = call.contract

        validate.arguments(contract, call.arguments, trace)  # 3 VALIDATE: schema
        variables = progress.variables = {
            "args": call.arguments, "actor": actor, "now": now, "tool": contract.name,
        }
        policies = self.config.policies
        authorize.check_actor(policies, actor)
        validate.references(  # 3 VALIDATE: referenced records, from the actor's view
            contract, variables, self.resolvers,
            authorize.may_see(policies, contract, variables), trace,
        )
        permit = authorize.authorize(  # 4 AUTHORIZE
            policies, contract, variables, trace, progress.shadow)
        progress.permit = permit.rule
        validate.business_rules(contract, variables, trace, progress.shadow)  # 3 VALIDATE: rules

    # -- building decisions -------------------------------------------------------------------

    def _allowed(
        self,
        progress: _Progress,
        actor: Mapping[str, Any],
        request_id: str,
        started: float,
    ) -> Decision:
        assert progress.call is not None
        contract = progress.call.contract
        if contract.confirmation.required:
            return self._rejected(
                Rejection(ErrorClass.CONFIRMATION_REQUIRED, "the contract requires a person's "
                          "confirmation before execution", rule=progress.permit),
                progress, actor, request_id, started,
            )
        route = Route.EXECUTE
        progress.trace.append(TraceEntry("route", "allowed", str(route)))
        return self._decision(
            route=route, error_class=None, rule=progress.permit,
            agent=f"All checks passed for {contract.name}.", user="",
            detail="allowed", progress=progress, actor=actor, request_id=request_id,
            started=started,
        )

    def _rejected(
        self,
        rejection: Rejection,
        progress: _Progress,
        actor: Mapping[str, Any],
        request_id: str,
        started: float,
    ) -> Decision:
        routing = self.config.routing
        route = rejection.route or routing.route_for(rejection.error_class)
        progress.trace.append(TraceEntry("route", str(rejection.error_class), str(route)))
        if progress.call is None and rejection.contract is not None:
            progress.contract_only = rejection.contract
        contract = progress.contract
        speaks_as = rejection.speaks_as or rejection.error_class
        advice_route = routing.route_for(speaks_as) if rejection.speaks_as else route
        variables = {
            "tool": contract.name if contract else None,
            "tools": ", ".join(sorted(self.config.contracts)),
            "detail": rejection.detail,
            **{k: v for k, v in rejection.extra.items() if isinstance(k, str)},
            "args": progress.call.arguments if progress.call else {},
        }
        return self._decision(
            route=route,
            error_class=rejection.error_class,
            rule=rejection.rule,
            agent=agent_message(speaks_as, advice_route, routing,
                                rejection.agent_message, rejection.hint, variables),
            user=user_message(speaks_as, routing, rejection.user_message, variables),
            detail=rejection.detail,
            progress=progress,
            actor=actor,
            request_id=request_id,
            started=started,
            candidates=rejection.candidates,
            extra=rejection.extra,
        )

    def _decision(
        self,
        *,
        route: Route,
        error_class: ErrorClass | None,
        rule: str | None,
        agent: str,
        user: str,
        detail: str,
        progress: _Progress,
        actor: Mapping[str, Any],
        request_id: str,
        started: float,
        candidates: tuple[Mapping[str, Any], ...] = (),
        extra: Mapping[str, Any] | None = None,
    ) -> Decision:
        contract = progress.contract
        call = progress.call
        versions = self.config.versions_for(contract.name if contract else None)
        if error_class == ErrorClass.UNKNOWN_TOOL:
            # The allowlist that refused the tool: every contract's version.
            versions = {**versions, **{c.document.key: c.version
                                       for c in self.config.contracts.values()}}
        log = {
            "ts": utc_now().isoformat(),
            "request_id": request_id,
            "tool": contract.name if contract else (extra or {}).get("proposed_tool"),
            "contract_version": contract.version if contract else None,
            "versions": versions,
            "route": str(route),
            "error_class": str(error_class) if error_class else None,
            "rule": rule,
            "detail": detail,
            "actor": _actor_summary(actor),
            "arguments": mask(call.arguments, contract.mask) if call and contract else None,
            "shadow": [v.__dict__ for v in progress.shadow],
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 3),
        }
        if extra and "evaluation_error" in extra:
            log["evaluation_error"] = extra["evaluation_error"]
        return Decision(
            route=route,
            error_class=error_class,
            tool=contract.name if contract else None,
            contract_version=contract.version if contract else None,
            rule=rule,
            agent_message=agent,
            user_message=user,
            log=log,
            versions=versions,
            trace=tuple(progress.trace),
            arguments=call.arguments if call else None,
            call_id=call.call_id if call else None,
            candidates=candidates,
            warnings=tuple(progress.shadow),
        )


def _actor_summary(actor: Mapping[str, Any]) -> dict[str, Any]:
    """Identify the actor in logs without copying everything the host knows about them."""
    return {k: actor[k] for k in ("id", "tenant", "role", "roles") if k in actor}


MASK = "***"


def mask(arguments: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    """A copy of ``arguments`` with the contract's sensitive fields replaced by ``***``."""
    masked: dict[str, Any] = dict(arguments)
    for path in paths:
        _mask_path(masked, path)
    return masked


def _mask_path(node: dict[str, Any], path: tuple[str, ...]) -> None:
    head, rest = path[0], path[1:]
    if head not in node:
        return
    if not rest:
        node[head] = MASK
    elif isinstance(node[head], dict):
        node[head] = dict(node[head])
        _mask_path(node[head], rest)
