"""A dialect driver's errors raised as ``StoreError``: the context manager every cursor and
connection of ``store.sql.SqlReceiptStore`` is opened in."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:  # a type only: store.sql uses this module
    from callgate_rules.store.sql import SqlReceiptStore

Opened = TypeVar("Opened")


class DriverErrors(Generic[Opened]):
    """``with DriverErrors(store, opened) as value``: ``value`` is ``opened()``, and any
    error of the store's driver, opening it or in the block, is raised as ``StoreError``.
    A class rather than a generator (``contextlib.contextmanager``): a write enters one per
    statement, and a generator's context costs about four times as much. It keeps nothing
    of one use, so one made once may be entered by any thread, and again inside itself."""

    __slots__ = ("store", "opened")

    def __init__(self, store: SqlReceiptStore, opened: Callable[[], Opened]) -> None:
        self.store, self.opened = store, opened

    def __enter__(self) -> Opened:
        try:
            return self.opened()
        except self.store._driver_error as error:
            raise self.store._store_error(error) from error

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if isinstance(error, self.store._driver_error):
            raise self.store._store_error(error) from error

