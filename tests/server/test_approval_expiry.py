"""Expiry and single use at the moment a person decides, with the server's clock: a draft
whose confirmation expired cannot be approved, a decision is recorded once, and the host's
later claim checks both again — with the gate's injectable clock (``FakeClock``), on the
memory, SQLite and PostgreSQL stores; and the page's answer over HTTP."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.hosted import (
    Action,
    AlreadyDecided,
    ConfirmationExpired,
    HostedWrites,
)
from callgate_rules.store import MemoryStore, ReceiptState, SqliteStore, open_store
from callgate_rules.store.base import ReceiptStore
from callgate_rules.taxonomy import ErrorClass, Route

from .conftest import POSTGRES, Server, drop_schema, postgres_store, start_server
from .test_hosted import CONFIG, DANA, INJECTED, SESSION, WORLD, conversation, payment

T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def flow(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    store: ReceiptStore
    url = None
    if request.param == "memory":
        store = MemoryStore()
    elif request.param == "sqlite":
        store = SqliteStore(tmp_path / "r.db")
    else:
        if POSTGRES is None:
            pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set")
        url = postgres_store()
        store = open_store(url)
    clock = FakeClock(T0)
    hosted = HostedWrites(CONFIG, resolvers=WorldResolvers(WORLD), store=store, clock=clock,
                          sleep=clock.sleep, rng=random.Random(3), secret=b"s" * 32)
    try:
        yield hosted, clock
    finally:
        store.close()
        if url is not None:
            drop_schema(url)


def held(hosted: HostedWrites, request_id: str) -> tuple[str, datetime]:
    decided = hosted.decide(payment(INJECTED), actor=DANA, request_id=request_id,
                            session=SESSION, conversation=conversation(INJECTED))
    assert decided.route == Route.AWAIT_CONFIRMATION and decided.operation_id
    receipt = hosted.gate.store.get(decided.operation_id)
    assert receipt is not None and receipt.confirmation_expires_at is not None
    return decided.operation_id, receipt.confirmation_expires_at


def advance_to(clock: FakeClock, moment: datetime) -> None:
    clock.sleep((moment - clock()).total_seconds())
    assert clock() == moment


def test_approval_at_the_expiry_instant_is_refused(flow) -> None:  # type: ignore[no-untyped-def]
    hosted, clock = flow
    operation, expires = held(hosted, "x1")
    advance_to(clock, expires)  # exactly at the instant: expired (as the token says)
    with pytest.raises(ConfirmationExpired, match="expired at .* can no longer be approved"):
        hosted.approve(operation, approver="erin")
    receipt = hosted.gate.store.get(operation)
    assert receipt is not None and receipt.state == ReceiptState.AWAITING_CONFIRMATION
    assert receipt.confirmed_by is None
    claimed = hosted.claim_operation(operation, actor=DANA, session=SESSION)
    assert claimed.action == Action.DONE  # still only waiting: nothing runs


def test_approval_just_before_the_instant_runs_once(flow) -> None:  # type: ignore[no-untyped-def]
    hosted, clock = flow
    operation, expires = held(hosted, "x2")
    advance_to(clock, expires - timedelta(milliseconds=1))
    hosted.approve(operation, approver="erin", note="checked")
    with pytest.raises(AlreadyDecided, match="already decided: .* approved by erin"):
        hosted.approve(operation, approver="sam")
    with pytest.raises(AlreadyDecided, match="approved by erin"):
        hosted.decline(operation, by="sam")
    step = hosted.claim_operation(operation, actor=DANA, session=SESSION)
    assert step.action == Action.EXECUTE  # claimed before the expiry: executes once


def test_the_hosts_claim_after_the_expiry_never_executes(flow) -> None:  # type: ignore[no-untyped-def]
    hosted, clock = flow
    operation, expires = held(hosted, "x3")
    hosted.approve(operation, approver="erin")
    advance_to(clock, expires + timedelta(seconds=1))
    step = hosted.claim_operation(operation, actor=DANA, session=SESSION)
    assert step.action == Action.DONE and step.decision is not None
    assert step.decision.route == Route.REFUSE
    assert "before the host claimed" in step.decision.user_message
    again = hosted.claim_operation(operation, actor=DANA, session=SESSION)
    assert again.action == Action.DONE  # and never later either
    receipt = hosted.gate.store.get(operation)
    assert receipt is not None and receipt.attempts == 1  # only the page's settling claim


def test_an_approval_recorded_after_the_expiry_never_executes(flow) -> None:  # type: ignore[no-untyped-def]
    """An approval a store holds from after the expiry (written by an older instance, or
    by hand) is checked again by the claim, with the server's clock."""
    hosted, clock = flow
    operation, expires = held(hosted, "x4")
    store = hosted.gate.store
    late = expires + timedelta(minutes=20)
    claim = store.claim_confirmed(operation, confirmed_by="erin", worker="old-page",
                                  lease=timedelta(seconds=30), now=late)
    assert claim.may_execute
    store.finish(operation, worker="old-page", state=ReceiptState.FAILED, now=late,
                 error_class=str(ErrorClass.TRANSIENT), detail="confirmed by erin")
    advance_to(clock, expires - timedelta(seconds=5))  # even with the host's clock early
    step = hosted.claim_operation(operation, actor=DANA, session=SESSION)
    assert step.decision is not None and step.decision.route == Route.REFUSE
    assert "approved after its confirmation expired" in step.decision.user_message


def test_a_decline_is_recorded_once_and_never_executes(flow) -> None:  # type: ignore[no-untyped-def]
    hosted, _ = flow
    operation, _ = held(hosted, "x5")
    hosted.decline(operation, by="erin", note="not our supplier")
    with pytest.raises(AlreadyDecided, match="declined by erin"):
        hosted.approve(operation, approver="sam")
    with pytest.raises(AlreadyDecided, match="declined by erin"):
        hosted.decline(operation, by="sam")
    step = hosted.claim_operation(operation, actor=DANA, session=SESSION)
    assert step.action == Action.DONE and step.decision is not None
    assert step.decision.route == Route.REFUSE


def test_an_expired_draft_may_still_be_declined(flow) -> None:  # type: ignore[no-untyped-def]
    hosted, clock = flow
    operation, expires = held(hosted, "x6")
    advance_to(clock, expires + timedelta(hours=1))
    declined = hosted.decline(operation, by="erin", note="too late anyway")
    assert declined.state == ReceiptState.FAILED and declined.error_class == "forbidden"


# Over HTTP: the page's answers ---------------------------------------------------------------


@pytest.mark.integration
def test_the_page_says_expired_and_already_decided(
        documents: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A confirmation that lives one second: the page refuses it afterwards with a clear
    message (the server's clock), and a second decision is answered "already decided"."""
    root = tmp_path_factory.mktemp("short-expiry")
    for part in ("contracts", "policies"):
        (root / part).mkdir()
        for source in (documents / part).glob("*.yaml"):
            text = source.read_text()
            if source.name == "sendPayment.yaml":
                assert "expires:" in text
                text = "\n".join(
                    line.split("expires:")[0] + "expires: 1s" if "expires:" in line else line
                    for line in text.splitlines())
            (root / part / source.name).write_text(text)
    for name in ("auth.yaml", "users.yaml"):
        (root / name).write_text((documents / name).read_text())
    store = f"sqlite:///{root / 'receipts.db'}"
    server = start_server(root, store)
    try:
        check_page(server)
    finally:
        server.stop()


def check_page(server: Server) -> None:
    import time

    from .test_scope import signed_in

    with server.client() as host:
        expiring = host.post("/v1/decide", json={
            "model_output": payment(INJECTED), "actor": DANA, "session": SESSION,
            "request_id": "page-x1", "conversation": conversation(INJECTED)}).json()
        assert expiring["route"] == "await_confirmation", expiring
    client, csrf = signed_in(server, "erin")
    try:
        time.sleep(1.5)  # the confirmation lives 1s
        late = client.post(f"/review/confirmations/{expiring['operation_id']}/approve",
                           data={"csrf": csrf})
        assert late.status_code == 409
        assert "expired at" in late.text and "can no longer be approved" in late.text
        declined = client.post(f"/review/confirmations/{expiring['operation_id']}/decline",
                               data={"csrf": csrf, "note": "expired"})
        assert declined.status_code == 303
        again = client.post(f"/review/confirmations/{expiring['operation_id']}/approve",
                            data={"csrf": csrf})
        assert again.status_code == 409 and "already decided" in again.text
        assert "declined by erin" in again.text
    finally:
        client.close()
