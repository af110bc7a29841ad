"""A run rebuilt from its history in the store (``pipeline.runs``) judges every proposal as
the in-process ``Run`` does: for any sequence of proposals, ``HostedWrites.decide`` with a
``run_id`` (one fresh flow per proposal, as separate requests and instances are) ends each
one as ``Gate.check`` followed by ``Run.admit`` and ``Run.ended`` on one long-lived Run."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.documents.compiler import load
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.hosted import HostedWrites
from callgate_rules.pipeline.runs import run_from_history
from callgate_rules.store import MemoryStore
from callgate_rules.store.history import HistoryEntry

REPO = Path(__file__).resolve().parents[2]
CONFIG = load([REPO / "contracts", REPO / "policies"])
WORLD = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
DANA = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text())
START = datetime(2026, 11, 29, 12, tzinfo=UTC)

PROPOSALS: dict[str, Any] = {
    "read": {"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}},
    "closed": {"name": "getTicketStatus", "arguments": {"ticketId": "T-1002"}},
    "missing": {"name": "getTicketStatus", "arguments": {"ticketId": "T-9999"}},
    "malformed": {"name": "getTicketStatus", "arguments": {"ticketId": "nope"}},
    "unknown": {"name": "noSuchTool", "arguments": {}},
    "text": "{this is not a call",
}


CLOCK = FakeClock(START)
STORE = MemoryStore()  # every example has a run of its own in it
# No run state is kept in the flow between calls: the store's history is all it reads.
FLOW = HostedWrites(CONFIG, resolvers=WorldResolvers(WORLD), store=STORE, clock=CLOCK)
GATE = Gate(CONFIG, resolvers=WorldResolvers(WORLD), store=MemoryStore(), clock=CLOCK)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(sorted(PROPOSALS)), st.integers(0, 40)),
                min_size=1, max_size=14))
def test_a_rebuilt_run_decides_as_the_run_in_process(steps: list[tuple[str, int]]) -> None:
    CLOCK.now = START
    run_id = uuid.uuid4().hex
    run = Run(started_at=START)
    budgets = CONFIG.routing.budgets
    for index, (name, seconds) in enumerate(steps):
        request_id = f"r{index}"
        hosted = FLOW.decide(PROPOSALS[name], actor=DANA, request_id=request_id,
                             run_id=run_id)
        expected = GATE.check(PROPOSALS[name], actor=DANA, request_id=request_id)
        limit = run.admit(expected, budgets, CLOCK())
        if limit is None:
            assert (hosted.route, hosted.error_class) == \
                (expected.route, expected.error_class), (name, index)
        else:
            assert hosted.error_class == "budget_exhausted", (name, index, limit)
            assert hosted.log["detail"] == limit
            expected = hosted
        run.ended(expected)
        CLOCK.sleep(seconds)
    rebuilt = run_from_history(run_id, STORE.run_history(
        run_id, since=START - timedelta(days=1)), CLOCK())
    assert (rebuilt.started_at, rebuilt.failures, rebuilt.regenerations_in_a_row,
            dict(rebuilt.calls)) == (run.started_at, run.failures,
                                     run.regenerations_in_a_row, dict(run.calls))


def test_one_write_decided_then_claimed_is_one_call() -> None:
    entry = {"run_id": "r", "tool": "sendPayment", "arguments": {}, "route": "execute",
             "error_class": None, "request_id": "q", "operation_id": "op-1"}
    entries = [HistoryEntry(at=START, **entry),
               HistoryEntry(at=START + timedelta(seconds=1), **entry),
               HistoryEntry(at=START + timedelta(seconds=2),
                            **{**entry, "route": "return_receipt"})]
    rebuilt = run_from_history("r", entries, START + timedelta(seconds=3))
    assert rebuilt.calls["sendPayment"] == 1 and rebuilt.failures == 0
    assert run_from_history("new", [], START).started_at == START


BANKING = REPO / "examples" / "banking"
HOLDER = {"id": "U-1", "role": "holder"}
PAYEES = {"payees": [{"id": "PY-1", "iban": "DE89370400440532013000", "name": "Northwind",
                       "owner": "U-1"}]}


def instalment(amount: float, subject: str) -> dict[str, Any]:
    return {"name": "sendMoney", "arguments": {
        "recipient": "DE89370400440532013000", "amount": amount, "subject": subject}}


def test_a_named_runs_history_reaches_the_rules_across_requests() -> None:
    """The banking example's daily limit per recipient over the hosted flow: each step a
    fresh flow on one store, as separate requests to separate instances are."""
    store, clock = MemoryStore(), FakeClock(START)
    banking = load([BANKING / "contracts", BANKING / "policies"])

    def flow() -> HostedWrites:
        return HostedWrites(banking, resolvers=WorldResolvers(PAYEES), store=store,
                            clock=clock, secret=b"k" * 32)

    def paid(step: Any) -> None:
        assert step.action.value == "execute", step
        done = flow().finish(step.operation_id, step.lease, actor=HOLDER,
                             result={"id": step.operation_id})
        assert done.decision is not None and done.decision.route == "return_result"

    for part in (1, 2):
        paid(flow().claim(instalment(600, f"part {part}"), actor=HOLDER,
                          request_id=f"q{part}", run_id="bank-run"))
    third = flow().decide(instalment(600, "part 3"), actor=HOLDER, request_id="q3",
                          run_id="bank-run")
    assert third.error_class == "confirmation_required"
    assert third.rule == "sendMoney/daily-limit-per-recipient"
    assert third.confirmation_token is not None
    paid(flow().confirm(third.confirmation_token, actor=HOLDER, confirmed_by="U-1"))
    fee = flow().decide(instalment(5, "fee"), actor=HOLDER, request_id="q4", run_id="bank-run")
    assert fee.rule == "sendMoney/daily-limit-per-recipient"  # the confirmed third counts
    elsewhere = flow().decide(instalment(5, "fee"), actor=HOLDER, request_id="q5",
                              run_id="another-run")
    assert elsewhere.error_class is None
