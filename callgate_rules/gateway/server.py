"""The MCP server the clients talk to: one gate in front of one upstream MCP server, or of
several as one (``combined``: their tools namespaced ``NAME__tool``).

``serve(settings)`` loads the documents, opens the receipt store, starts (or reaches) the
upstream, checks every contract against the upstream's tools — each problem one line, and
none served until all are fixed — and then serves MCP over stdio (a desktop client
launches the gateway in place of the server) or streamable HTTP (``--http``, every request
with a verified bearer token).

Each ``tools/call`` runs the gate's seven steps in a worker thread (the gate is
synchronous); the executors, the finder and the resolvers hand their upstream calls back
to this event loop (``upstream.Upstream.call_blocking``).

**Request IDs.** The operation ID of a write is derived from the request ID, the tool and
the arguments, so the request ID decides what counts as "the same call again":

- the client's ``_meta["callgate/request_id"]`` when it sends one (one per user request:
  the same call re-sent after a lost answer gets the receipt; a new request writes again);
- otherwise the MCP session (the stdio connection, or the HTTP ``Mcp-Session-Id``) and the
  JSON-RPC id of the ``tools/call``: each ``tools/call`` is an operation of its own (two
  identical calls write twice), and the same JSON-RPC request sent again in the session is
  the same operation (it gets the receipt). A stateless HTTP call without either is a
  request of its own.

Either is prefixed with a digest of the caller's actor, so two callers never share an
operation.

**A deduplication window** (a write contract's ``spec.deduplication_window``, off by
default) covers what a session cannot: a client that reconnects and sends the write again.
A call without a client request ID is then the same operation as the same write (same
actor, same canonical arguments) made within the window, in any session: it gets that
receipt. The trade-off: a legitimate repeat within the window is not executed either.

**Runs.** A client names the agent run a call belongs to with ``_meta["callgate/run_id"]``,
or over HTTP with the ``Callgate-Run-Id`` header for every call of its connection (the
``_meta`` key wins). The run's ID is that name prefixed with the digest of the caller's
actor, so a caller never reads or adds to another caller's run; every gateway instance on
one shared store then reads and writes one ``history`` under it, and the run's lease
(``pipeline.runs``) makes their decisions over it take turns. The budgets (calls per tool,
failures, the run deadline) are counted by each instance, from its first call of the run.
Without a name, each request ID has a run of its own, known to this instance only; without
a client request ID a session's run starts afresh when its run deadline has passed.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from callgate_rules.canonical import operation_keys
from callgate_rules.decision_log import CHECKPOINT_EVERY, DecisionLog, open_decision_log
from callgate_rules.documents.compiler import load
from callgate_rules.errors import CallgateError, StoreError
from callgate_rules.gateway import binding, reload
from callgate_rules.gateway.combined import Reachable, supervised_all
from callgate_rules.gateway.confirm import unseal
from callgate_rules.gateway.passthrough import PassedThrough, PassThrough
from callgate_rules.gateway.results import (
    CONVERSATION_META,
    INTENT_META,
    REQUEST_ID_META,
    RUN_ID_HEADER,
    RUN_ID_META,
    error_result,
    result_of,
)
from callgate_rules.gateway.upstream import (
    Upstream,
    UpstreamLimits,
    UpstreamSpec,
    sole_error,
    supervised,
)
from callgate_rules.integrations.identity import BearerAuth, Identity, TokenVerifier, identity_of
from callgate_rules.intent import IntentError
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store import open_store
from callgate_rules.taxonomy import Route

if TYPE_CHECKING:
    from callgate_rules.documents.bundle import Bundle
    from callgate_rules.documents.model import GateConfig

SERVER_NAME = "callgate-gateway"
RUNS_KEPT = 4096
RUN_NAME_LIMIT = 200  # characters of a client's run name
DEFAULT_CONFIRMATION_TIMEOUT = 300.0
CALL_MARK = ":call:"  # between a session and the JSON-RPC id in a request ID


class GatewayConfigError(CallgateError):
    """The gateway cannot serve: each line of ``problems`` says one thing to fix."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Settings:
    """Everything ``serve`` needs; the CLI fills it from its options."""

    upstream: UpstreamSpec | None  # one upstream; or ``upstreams``, named
    paths: tuple[str, ...] = ("contracts", "policies")
    store: str = "sqlite:///callgate.sqlite3"
    identity: Identity | None = None  # stdio: from --actor/--session
    verifier: TokenVerifier | None = None  # HTTP: bearer tokens
    http: tuple[str, int] | None = None  # (host, port); None: stdio
    confirmation_timeout: float = DEFAULT_CONFIRMATION_TIMEOUT
    secret: bytes | None = None
    limits: UpstreamLimits = field(default_factory=UpstreamLimits)  # answer size, restarts
    passthrough: PassThrough = field(default_factory=PassThrough)  # resources, prompts
    # several upstreams, each (name, where): their tools offered as NAME__tool (``combined``)
    upstreams: tuple[tuple[str, UpstreamSpec], ...] = ()
    log: TextIO = field(default=sys.stderr, compare=False)
    # a verified policy bundle (documents.bundle), in place of paths; each decision's log
    # line records its digest, and its location is looked at for a new one (``reload``)
    bundle: Bundle | None = None
    bundle_location: str | None = None
    bundle_public_key: str | None = None  # the PEM file a new bundle must be signed by
    allow_unsigned_bundle: bool = False
    bundle_poll: float = 0.0  # seconds between two looks for a new bundle; 0: never
    decision_log: str | None = None  # every decision's log line, chained (decision_log)
    decision_log_key: str | None = None  # an Ed25519 PEM key signing its checkpoints
    checkpoint_every: int = CHECKPOINT_EVERY

    def check(self) -> None:
        """The upstreams and the identity each transport needs, before anything starts."""
        if (self.upstream is None) == (not self.upstreams):
            raise GatewayConfigError(["give one upstream (--upstream-command or "
                                      "--upstream-url) or several (--upstream NAME=CMD_OR_URL, "
                                      "repeated), not both"])
        if self.upstreams and (self.passthrough.resources or self.passthrough.prompts):
            raise GatewayConfigError(["--pass-resource and --pass-prompt pass through from "
                                      "a single upstream only, not from several --upstream"])
        if self.http is None and self.identity is None:
            raise GatewayConfigError(["over stdio the actor comes from --actor FILE "
                                      "(and --session FILE); the model never supplies it"])
        if self.http is not None and self.verifier is None:
            raise GatewayConfigError(["over --http every caller needs a verified bearer "
                                      "token: give --auth FILE"])


async def serve(settings: Settings) -> None:
    """Run the gateway until the client goes away (stdio) or it is stopped (HTTP)."""
    settings.check()
    config = settings.bundle.compile() if settings.bundle else load(settings.paths)
    decision_log = open_decision_log(settings.decision_log,
                                     signing_key=settings.decision_log_key,
                                     checkpoint_every=settings.checkpoint_every)
    try:
        store = open_store(settings.store)
    except BaseException:
        if decision_log is not None:
            decision_log.close()
        raise
    reloading = None
    try:
        # kept running: started again when it stops, UpstreamGone when it keeps stopping
        async with _upstreams(settings) as upstream:
            gateway = Gateway.start(config, upstream, store, settings, decision_log)
            if (settings.bundle is not None and settings.bundle_location is not None
                    and settings.bundle_poll > 0):
                reloading = reload.watch(
                    settings.bundle_location, settings.bundle_public_key,
                    allow_unsigned=settings.allow_unsigned_bundle,
                    interval=settings.bundle_poll, serving_bundle=settings.bundle,
                    apply=partial(gateway.use_bundle, log=settings.log), log=settings.log)
            async with anyio.create_task_group() as group:
                group.start_soon(gateway.stop_when_given_up, group.cancel_scope)
                if settings.http is None:
                    await gateway.serve_stdio()
                else:
                    await gateway.serve_http(*settings.http, log=settings.log)
                group.cancel_scope.cancel()
            if upstream.given_up is not None:  # exits non-zero: its client starts it again
                raise upstream.given_up
    except BaseExceptionGroup as group:
        # The transports' task groups wrap what the gateway raised; show it as itself.
        error = sole_error(group)
        if isinstance(error, CallgateError | KeyboardInterrupt):
            raise error from None
        raise
    finally:
        if reloading is not None:
            reloading.stop()
        store.close()
        if decision_log is not None:
            decision_log.close()  # its last signed checkpoint


def _upstreams(settings: Settings) -> AbstractAsyncContextManager[Reachable]:
    """The one upstream, or several as one (``combined``), supervised."""
    if settings.upstream is not None:
        return supervised(settings.upstream, settings.limits, log=settings.log)
    return supervised_all(settings.upstreams, settings.limits, log=settings.log)


class Runs:
    """The run of each run name or request ID (its budgets), the most recent
    ``RUNS_KEPT``."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, Run] = OrderedDict()

    def get(self, key: str, now: datetime, deadline_seconds: float, *,
            named: bool = False) -> Run:
        """The run of ``key``: a named run's ID is its key (what other instances name
        it), a request's own run has an ID of its own."""
        run = self._runs.pop(key, None)
        if run is None or (":session:" in key and
                           now - run.started_at > timedelta(seconds=deadline_seconds)):
            run = Run(started_at=now, run_id=key) if named else Run(started_at=now)
        self._runs[key] = run
        while len(self._runs) > RUNS_KEPT:
            self._runs.popitem(last=False)
        return run


class Gateway:
    """The MCP handlers over one gate and one upstream. The gate, the tools offered and the
    confirmer are one ``reload.Serving``, replaced whole by a new bundle (``use_bundle``);
    a call decides, executes and confirms on the one serving when it started."""

    def __init__(self, gate: Gate, upstream: Reachable, *, identity: Identity | None = None,
                 confirmation_timeout: float = DEFAULT_CONFIRMATION_TIMEOUT,
                 verifier: TokenVerifier | None = None,
                 passthrough: PassThrough | None = None, log: TextIO = sys.stderr) -> None:
        self.serving = reload.serving(gate, upstream, confirmation_timeout)
        self.confirmation_timeout = confirmation_timeout
        self.upstream = upstream
        self.identity = identity
        self.verifier = verifier
        self.runs = Runs()
        self.stdio_session = uuid.uuid4().hex  # a stdio gateway has one connection
        self.http_server: Any = None  # the uvicorn server, once serving HTTP
        passed = PassedThrough(passthrough or PassThrough(), self.single_upstream,
                               self.principal_of, log)
        self.server: Server[Any] = Server(SERVER_NAME, on_list_tools=self.list_tools,
                                          on_call_tool=self.call_tool, **passed.handlers())

    @property
    def gate(self) -> Gate:
        """The gate serving now (a call keeps the one it started with)."""
        return self.serving.gate

    @property
    def tools(self) -> list[types.Tool]:
        return self.serving.tools

    @classmethod
    def start(cls, config: Any, upstream: Reachable, store: Any, settings: Settings,
              decision_log: DecisionLog | None = None) -> Gateway:
        """Check the contracts against the upstream, bind the gate, say what is hidden."""
        bad = binding.problems(config, upstream)
        if bad:
            raise GatewayConfigError(bad)
        gate = reload.bound_gate(config, upstream, store, secret=settings.secret,
                                 decision_log=decision_log,
                                 bundle=settings.bundle.digest if settings.bundle else None)
        gateway = cls(gate, upstream, identity=settings.identity, verifier=settings.verifier,
                      confirmation_timeout=settings.confirmation_timeout,
                      passthrough=settings.passthrough, log=settings.log)
        gateway.announce(settings.log)
        return gateway

    def announce(self, log: TextIO) -> None:
        names = ", ".join(tool.name for tool in self.tools) or "none"
        print(f"callgate gateway: offering {len(self.tools)} tool(s) of the upstream "
              f"{self.upstream.describe()}: {names}", file=log)
        hidden = binding.hidden(self.gate.config, self.upstream)
        if hidden:
            print(f"callgate gateway: hiding {len(hidden)} upstream tool(s) without a "
                  f"contract: {', '.join(hidden)}", file=log)
        for note in binding.notes(self.gate.config, self.upstream):
            print(f"callgate gateway: {note}", file=log)
        log.flush()

    def use_bundle(self, bundle: Bundle, config: GateConfig, *, log: TextIO) -> None:
        """Decide by ``config`` (compiled from ``bundle``) from the next call on, in one
        assignment; ``reload.UnfitBundle`` when the upstream cannot serve it (the watcher
        refuses it and the old policy serves on). Runs in the watcher's thread."""
        self.serving = reload.successor(self.serving, bundle, config, self.upstream,
                                        self.confirmation_timeout)
        self.announce(log)

    # -- the handlers

    async def list_tools(self, ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def call_tool(self, ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams
                        ) -> types.CallToolResult | types.InputRequiredResult:
        serving = self.serving  # the call decides, executes and confirms by this one
        identity = self.caller(ctx)
        if identity is None:  # BearerAuth stops these first; this is the last guard
            return error_result("The caller is not authenticated.", {})
        meta: Mapping[str, Any] = params.meta or {}
        request_id = self.request_id(ctx, params, identity)
        run_key = self.session_run(request_id)
        window = self.deduplication_window(params.name, serving.gate)
        if run_key is not None and window is not None:  # no client request ID: the window
            request_id = await anyio.to_thread.run_sync(partial(
                self.windowed_request_id, params, identity, window, serving.gate))
        run_name = self.run_name(ctx, params)
        if run_name is not None and not run_name:
            return error_result(
                f"{params.name} was not run: the call names its run ({RUN_ID_META} or the "
                f"Callgate-Run-Id header) with a value that is not a name of 1 to "
                f"{RUN_NAME_LIMIT} characters; send a string of that length, or none.", {})
        if meta.get(INTENT_META) is not None:
            refused = await self.declared(serving.gate, params, identity, run_name, meta)
            if refused is not None:
                return refused
        decision = await self.decide(params, identity, request_id, meta.get(CONVERSATION_META),
                                     None if run_name is None else
                                     f"mcp:{self.caller_digest(identity)}:run:{run_name}",
                                     run_key=run_key, gate=serving.gate)
        if decision.route == Route.AWAIT_CONFIRMATION and decision.confirmation_token:
            settled = await serving.confirmer.settle(ctx, params, decision, identity,
                                                     request_id)
            if not isinstance(settled, Decision):
                return settled
            decision = settled
        return result_of(decision)

    async def declared(self, gate: Gate, params: types.CallToolRequestParams,
                       identity: Identity, run_name: str | None,
                       meta: Mapping[str, Any]) -> types.CallToolResult | None:
        """Declare (or narrow to) the intent a call carries, on its named run; the error
        result when it cannot be (no run named, an intent that is not valid or widens)."""
        if run_name is None:
            return error_result(
                f"{params.name} was not run: {INTENT_META} bounds a run, and the call names "
                f"none; send {RUN_ID_META} (or the Callgate-Run-Id header) with it.", {})
        run_id = f"mcp:{self.caller_digest(identity)}:run:{run_name}"
        try:
            await anyio.to_thread.run_sync(partial(
                gate.declare_intent, run_id, meta[INTENT_META],
                declared_by=f"MCP client {identity.principal}",
                conversation=meta.get(CONVERSATION_META)))
        except IntentError as error:
            return error_result(f"{params.name} was not run: {error}", {})
        except StoreError:
            return error_result(f"{params.name} was not run: the receipt store is "
                                "unavailable right now; try again shortly.", {})
        return None

    async def decide(self, params: types.CallToolRequestParams, identity: Identity,
                     request_id: str, conversation: Any, run_id: str | None = None, *,
                     run_key: str | None = None, gate: Gate | None = None) -> Decision:
        """One call through ``gate`` (the one serving); its run is the named run
        (``run_id``), else ``run_key`` (the session's), else the request's own."""
        gate = gate or self.gate
        now = gate.clock()
        run = self.runs.get(run_id or run_key or request_id, now,
                            gate.config.routing.budgets.run_deadline_seconds,
                            named=run_id is not None)
        call = {"name": params.name, "arguments": params.arguments or {}}
        decision = await anyio.to_thread.run_sync(partial(
            gate.handle, call, actor=identity.actor, request_id=request_id, run=run,
            now=now, session=identity.session, conversation=conversation))
        return decision

    def single_upstream(self) -> Upstream:
        """The upstream resources and prompts come from (``Settings.check``: only one)."""
        assert isinstance(self.upstream, Upstream)
        return self.upstream

    def principal_of(self, ctx: ServerRequestContext[Any, Any]) -> str:
        identity = self.caller(ctx)
        return identity.principal if identity is not None else "an unauthenticated caller"

    def caller(self, ctx: ServerRequestContext[Any, Any]) -> Identity | None:
        request = ctx.request
        if request is not None and hasattr(request, "scope"):
            return identity_of(request.scope)
        return self.identity

    def request_id(self, ctx: ServerRequestContext[Any, Any],
                   params: types.CallToolRequestParams, identity: Identity) -> str:
        """The request ID of this call (see the module's docstring)."""
        state = unseal(self.gate.secret, params.request_state)
        if state is not None and isinstance(state.get("request_id"), str):
            return str(state["request_id"])  # the retry of an input_required round trip
        caller = self.caller_digest(identity)
        supplied = (params.meta or {}).get(REQUEST_ID_META)
        if (isinstance(supplied, str | int) and not isinstance(supplied, bool)
                and str(supplied)):
            return f"mcp:{caller}:request:{supplied}"
        return f"mcp:{caller}:session:{self.session_of(ctx)}{CALL_MARK}{ctx.request_id!r}"

    def deduplication_window(self, tool: str, gate: Gate | None = None) -> float | None:
        """The contract's ``deduplication_window`` in seconds, for a write that has one."""
        contract = (gate or self.gate).config.contracts.get(tool)
        if contract is None or not contract.is_write:
            return None
        return contract.deduplication_window_seconds

    def windowed_request_id(self, params: types.CallToolRequestParams, identity: Identity,
                            window: float, gate: Gate | None = None) -> str:
        """The request ID of a write under a deduplication window (a worker thread's: it
        reads the store). Time is cut into spans of the window's length; the call's request
        ID is its span's, unless the previous span holds the same write by the same actor
        from within the window, whose request ID it then takes (so it gets that receipt).
        An earlier write within the window lies in one of the two spans, so the window
        slides exactly."""
        gate = gate or self.gate
        now = gate.clock()
        span = int(now.timestamp() // window)
        base = f"mcp:{self.caller_digest(identity)}:window:{params.name}:"
        earlier = f"{base}{span - 1}"
        call = {"name": params.name, "arguments": params.arguments or {}}
        checked = gate.check(call, actor=identity.actor, session=identity.session,
                             now=now)  # its validated arguments make the operation ID
        contract = gate.config.contracts.get(params.name)
        if checked.arguments is not None and contract is not None:
            operation_id, _ = operation_keys(earlier, contract.name, contract.document.name,
                                             checked.arguments)
            receipt = gate.store.get(operation_id)
            if receipt is not None and now - receipt.created_at <= timedelta(seconds=window):
                return earlier
        return f"{base}{span}"

    @staticmethod
    def session_run(request_id: str) -> str | None:
        """A session's calls share one run (its budgets): the request ID without the
        JSON-RPC id; ``None`` for a client's request ID (a run of its own)."""
        session, mark, _ = request_id.partition(CALL_MARK)
        return session if mark and ":session:" in session else None

    @staticmethod
    def caller_digest(identity: Identity) -> str:
        return hashlib.sha256(identity.digest_source().encode()).hexdigest()[:16]

    @staticmethod
    def run_name(ctx: ServerRequestContext[Any, Any],
                 params: types.CallToolRequestParams) -> str | None:
        """The run the client names (``_meta``, else the HTTP header); ``None`` when it
        names none, ``""`` when what it sent is not a name."""
        named = (params.meta or {}).get(RUN_ID_META)
        request = ctx.request
        if named is None and request is not None and hasattr(request, "headers"):
            named = request.headers.get(RUN_ID_HEADER)
        if named is None:
            return None
        if isinstance(named, bool) or not isinstance(named, str | int):
            return ""
        name = str(named)
        return name if 0 < len(name) <= RUN_NAME_LIMIT else ""

    def session_of(self, ctx: ServerRequestContext[Any, Any]) -> str:
        request = ctx.request
        if request is None or not hasattr(request, "headers"):
            return self.stdio_session
        session = request.headers.get("mcp-session-id")
        return str(session) if session else f"stateless-{uuid.uuid4().hex}"

    # -- the transports

    async def stop_when_given_up(self, serving: anyio.CancelScope) -> None:
        """Stop serving once the upstream is given up: an HTTP server as Ctrl-C stops it
        (its requests answered, its lifespan ended), stdio by cancelling its loop."""
        await self.upstream.wait_given_up()
        if self.http_server is not None:
            self.http_server.should_exit = True
        else:
            serving.cancel()

    async def serve_stdio(self) -> None:
        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    def http_app(self, host: str) -> BearerAuth:
        """The streamable HTTP application at ``/mcp``, behind bearer-token checks."""
        assert self.verifier is not None
        return BearerAuth(self.server.streamable_http_app(host=host), self.verifier)

    async def serve_http(self, host: str, port: int, log: TextIO = sys.stderr) -> None:
        import uvicorn  # only the HTTP gateway needs it

        config = uvicorn.Config(self.http_app(host), host=host, port=port,
                                log_level="warning", lifespan="on")
        print(f"callgate gateway: serving MCP at http://{host}:{port}/mcp", file=log,
              flush=True)
        self.http_server = uvicorn.Server(config)
        await self.http_server.serve()
