"""The gate for async hosts: ``AsyncGate`` with ``acheck``, ``ahandle``, ``aconfirm``,
``apreview``, ``aapprove``, ``adeclare_intent`` and ``aintent_of``.

One definition of the behaviour, not a copy: ``AsyncGate`` holds a ``Gate`` and drives its
one synchronous pipeline — every step, the write machine, the receipt store, the routes — in
a worker thread, so the event loop never blocks on a step, a backoff sleep or the store.
The host's resolvers, executors and finder may be plain functions or async ones (an MCP
session, an async HTTP client): each is called where the pipeline calls it, and when it
returns an awaitable, that is awaited back on the caller's own event loop
(``asyncio.run_coroutine_threadsafe``) while the worker thread waits for it. The decisions,
the receipts and exactly-once are the synchronous gate's, line for line.

What this does not do (yet): the receipt store is driven synchronously from the worker
thread; there is no async store driver (psycopg's async pool) underneath. Cancelling an
``ahandle`` does not stop a call in flight: the pipeline finishes in its thread and records
its receipt, so that a write is never left half-known.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.intent import BoundIntent, IntentSource
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.execute import DeadlineKeeping, keeps_deadline
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.preview import Preview, approve
from callgate_rules.store.history import HistoryEntry

P = ParamSpec("P")
T = TypeVar("T")

# The event loop of the ``a…`` call a pipeline runs for: set in the context the worker
# thread runs in, which the executor's thread copies (``execute.send``).
_CALLER_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = (
    contextvars.ContextVar("callgate_caller_loop", default=None))
_workers = concurrent.futures.ThreadPoolExecutor(max_workers=32,
                                                 thread_name_prefix="callgate-async")


class AsyncBindingError(RuntimeError):
    """An async resolver, executor or finder was called where no event loop can run it."""


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _on_caller_loop(awaitable: Awaitable[T]) -> T:
    """The awaitable's value, awaited on the loop of the ``a…`` call being served."""
    loop = _CALLER_LOOP.get()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is None or running is loop or loop.is_closed():
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # never awaited, on purpose: no warning about it
        raise AsyncBindingError(
            "an async resolver, executor or finder was called by the synchronous Gate; "
            "bind async functions to AsyncGate and call acheck/ahandle/aconfirm")
    return asyncio.run_coroutine_threadsafe(_awaited(awaitable), loop).result()


def bridged(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as the synchronous pipeline calls it: a plain result as it is, an
    awaitable awaited on the caller's event loop."""
    if getattr(function, "__callgate_bridged__", False):
        return function
    if isinstance(function, DeadlineKeeping):  # still called in the pipeline's own thread
        return keeps_deadline(bridged(function.function))

    def call(*arguments: Any) -> Any:
        result = function(*arguments)
        return _on_caller_loop(result) if inspect.isawaitable(result) else result

    call.__callgate_bridged__ = True  # type: ignore[attr-defined]
    call.__wrapped__ = function  # type: ignore[attr-defined]
    return call


class BridgedResolvers(Mapping[str, Callable[..., Any]]):
    """The host's resolvers by collection, each bridged when the pipeline looks it up (a
    resolver mapping may be computed, as ``WorldResolvers`` is)."""

    def __init__(self, resolvers: Mapping[str, Callable[..., Any]]) -> None:
        self.resolvers = resolvers

    def __getitem__(self, collection: str) -> Callable[..., Any]:
        return bridged(self.resolvers[collection])

    def get(self, collection: str, default: Any = None) -> Any:
        found = self.resolvers.get(collection)
        return default if found is None else bridged(found)

    def __iter__(self) -> Iterator[str]:
        return iter(self.resolvers)

    def __len__(self) -> int:
        return len(self.resolvers)


class AsyncGate:
    """A ``Gate`` for async hosts; every keyword ``Gate`` takes, with async or plain
    resolvers, executors and finder. ``gate`` is the synchronous gate underneath (its
    ``config``, ``store``, ``counters``); call its plain methods only from a thread with no
    running event loop, and only with plain bindings."""

    def __init__(self, config: GateConfig, *,
                 resolvers: Mapping[str, Callable[..., Any]] | None = None,
                 executors: Mapping[str, Callable[..., Any]] | None = None,
                 finder: Callable[..., Any] | None = None, **bindings: Any) -> None:
        self.gate = Gate(
            config, resolvers=BridgedResolvers(resolvers) if resolvers is not None else None,
            executors={tool: bridged(executor) for tool, executor in (executors or {}).items()},
            finder=bridged(finder) if finder is not None else None, **bindings)

    @classmethod
    def from_paths(cls, *paths: str | Path, **bindings: Any) -> AsyncGate:
        """Load and compile every document under ``paths`` (default: contracts, policies)."""
        return cls(load(paths or ("contracts", "policies")), **bindings)

    async def acheck(self, model_output: Any, *, actor: Mapping[str, Any],
                     now: datetime | None = None, request_id: str | None = None,
                     session: Mapping[str, Any] | None = None,
                     conversation: Any = None, run: Run | None = None,
                     history: Sequence[HistoryEntry] | None = None) -> Decision:
        """``Gate.check``, awaited."""
        return await self._run(self.gate.check, model_output, actor=actor, now=now,
                               request_id=request_id, session=session,
                               conversation=conversation, run=run, history=history)

    async def ahandle(self, model_output: Any, *, actor: Mapping[str, Any], request_id: str,
                      run: Run | None = None, now: datetime | None = None,
                      session: Mapping[str, Any] | None = None,
                      conversation: Any = None,
                      history: Sequence[HistoryEntry] | None = None) -> Decision:
        """``Gate.handle``, awaited."""
        return await self._run(self.gate.handle, model_output, actor=actor,
                               request_id=request_id, run=run, now=now, session=session,
                               conversation=conversation, history=history)

    async def aconfirm(self, token: str, *, actor: Mapping[str, Any], confirmed_by: str,
                       now: datetime | None = None,
                       session: Mapping[str, Any] | None = None) -> Decision:
        """``Gate.confirm``, awaited."""
        return await self._run(self.gate.confirm, token, actor=actor,
                               confirmed_by=confirmed_by, now=now, session=session)

    async def apreview(self, model_output: Any, *, actor: Mapping[str, Any], request_id: str,
                       now: datetime | None = None, session: Mapping[str, Any] | None = None,
                       conversation: Any = None, run: Run | None = None,
                       history: Sequence[HistoryEntry] | None = None) -> Preview:
        """``Gate.preview``, awaited."""
        return await self._run(self.gate.preview, model_output, actor=actor,
                               request_id=request_id, now=now, session=session,
                               conversation=conversation, run=run, history=history)

    async def aapprove(self, model_output: Any, token: str, *, actor: Mapping[str, Any],
                       request_id: str, confirmed_by: str, run: Run | None = None,
                       session: Mapping[str, Any] | None = None,
                       conversation: Any = None) -> Decision:
        """``preview.approve``, awaited: run a call a person approved from its preview."""
        return await self._run(approve, self.gate, model_output, token, actor=actor,
                               request_id=request_id, confirmed_by=confirmed_by, run=run,
                               session=session, conversation=conversation)

    async def adeclare_intent(self, run: Run | str, intent: IntentSource, *, declared_by: str,
                              now: datetime | None = None,
                              conversation: Any = None) -> BoundIntent:
        """``Gate.declare_intent``, awaited."""
        return await self._run(self.gate.declare_intent, run, intent, declared_by=declared_by,
                               now=now, conversation=conversation)

    async def aintent_of(self, run: Run | str) -> BoundIntent | None:
        """``Gate.intent_of``, awaited (it reads the store)."""
        return await self._run(self.gate.intent_of, run)

    # -- closing: the synchronous gate's rule (``Gate.close``), from sync or async code ----

    def close(self) -> None:
        """Close the receipt store the gate opened itself (not one passed in); idempotent."""
        self.gate.close()

    async def aclose(self) -> None:
        """``close``, in a worker thread: closing a pool may wait for its connections."""
        await asyncio.get_running_loop().run_in_executor(_workers, self.gate.close)

    def __enter__(self) -> AsyncGate:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        self.close()

    async def __aenter__(self) -> AsyncGate:
        return self

    async def __aexit__(self, kind: object, error: object, traceback: object) -> None:
        await self.aclose()

    async def _run(self, function: Callable[P, T], *arguments: P.args,
                   **keywords: P.kwargs) -> T:
        """``function`` in a worker thread, in a copy of the caller's context that names the
        caller's loop, so async bindings are awaited there."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        context.run(_CALLER_LOOP.set, loop)
        return await loop.run_in_executor(
            _workers, functools.partial(context.run, function, *arguments, **keywords))
