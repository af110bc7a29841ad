"""The write path's specialisations in the stores, each held to the general way it stands for:
a finish with no error class and no detail (every success) spells them NULL in its statement
instead of binding two None parameters; the pool's check keeps one poller per descriptor; a
jsonb store proves its JSON text with the read jsonb gives back."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.store import ReceiptState, ReceiptStore, postgres
from callgate_rules.store.base import AS_WRITTEN, stored_json
from callgate_rules.store.postgres import JSONB
from callgate_rules.store.sql import SqlReceiptStore
from tests.store.test_store_contract import LEASE, T0, operation
from tests.store.test_write_path import JSON_VALUES, as_jsonb_reads


@pytest.mark.parametrize("store", ["sqlite", "sqlite without RETURNING", "postgres"],
                         indirect=True)  # the SQL stores' statements
@pytest.mark.parametrize("state", [ReceiptState.SUCCEEDED, ReceiptState.FAILED,
                                   ReceiptState.OUTCOME_UNKNOWN])
def test_a_finish_without_an_error_writes_what_one_with_none_parameters_writes(
    store: ReceiptStore, state: ReceiptState,
) -> None:
    assert isinstance(store, SqlReceiptStore)
    rows = []
    for query in (store._sql.finish_held, store._sql.finish_held_without_error):
        operation_id = f"op-{uuid.uuid4().hex[:10]}"
        claimed = store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
        parameters = {"operation_id": operation_id, "worker": "w1", "state": str(state),
                      "result": "[1]", "error_class": None, "detail": None,
                      "now": store._time_parameter(T0 + LEASE),
                      "attempts": claimed.receipt.attempts}
        assert store._sent(query, parameters)[0] == 1
        rows.append(store.get(operation_id))
    general, special = rows
    assert general is not None and special is not None
    assert vars(general) | {"operation_id": None, "request_id": None} == vars(special) | {
        "operation_id": None, "request_id": None}


@pytest.mark.parametrize(("error_class", "detail"), [(None, None), ("transient", None),
                                                     (None, "why"), ("permanent", "why")])
def test_a_finish_keeps_its_error_class_and_detail_either_way(
    store: ReceiptStore, error_class: str | None, detail: str | None,
) -> None:
    operation_id = f"op-{uuid.uuid4().hex[:10]}"
    store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
    done = store.finish(operation_id, worker="w1", state=ReceiptState.FAILED, now=T0,
                        error_class=error_class, detail=detail)
    read = store.get(operation_id)
    assert done == read
    assert read is not None and (read.error_class, read.detail) == (error_class, detail)


def test_a_kept_poller_answers_for_whichever_socket_has_its_descriptor() -> None:
    """A poller per descriptor, made once: it says what a fresh one says, also once the
    socket it was made for is closed and another is given the same number."""
    for _ in range(3):
        near, far = socket.socketpair()
        try:
            assert not postgres._readable(near.fileno())
            far.send(b"x")
            assert postgres._readable(near.fileno())
            near.recv(1)
            assert not postgres._readable(near.fileno())
            far.close()  # the end of the stream is readable, as a server's goodbye is
            assert postgres._readable(near.fileno())
        finally:
            near.close()
            far.close()


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES | st.sampled_from([-0.0, 1e16, 1e23, 1e300, [-0.5, 2.5e-7],
                                            {"n": -0.0}, (1, 2), {1: "x"}]))
def test_jsonb_proves_its_text_as_a_plain_read_does(value: Any) -> None:
    """The text a jsonb store writes stands for the value as the plain store's does, and
    what it gives back is jsonb's reading of that text (proven by that reading, or
    written by the standard library where the reading differs)."""
    text, read = stored_json(value, JSONB)
    plain_text, plain_read = stored_json(value, AS_WRITTEN)
    assert repr(read) == repr(as_jsonb_reads(text))
    assert read == plain_read or repr(as_jsonb_reads(plain_text)) == repr(read)
