"""The simulator: each fault does exactly what it says, and the results fit the contracts."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from callgate_rules.cel.expression import compile_expression
from callgate_rules.errors import OutcomeTimeout, RateLimited, Refused, StateConflict, Unavailable
from callgate_rules.harness.simulator import TOOLS, Faults, Simulator, faults_by_tool
from callgate_rules.pipeline.execute import ExecutionRequest

ROOT = Path(__file__).resolve().parents[2]
WORLD: dict[str, list[dict[str, Any]]] = yaml.safe_load((ROOT / "examples/world.yaml").read_text())
ACME = {"id": "U-7", "tenant": "acme"}
GLOBEX = {"id": "U-90", "tenant": "globex"}
DEADLINE = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

FOLLOW_UP = {"ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z",
             "note": "Call the customer back"}
EVENT = {"contact": "C-12", "title": "Contract renewal", "startsAt": "2026-12-10T14:00:00Z"}
EMAIL = {"to": "anna.petrova@northwind.example", "subject": "Your ticket T-1001",
         "body": "Hello Anna, ..."}
PAYMENT = {"recipientIban": "DE89370400440532013000", "amount": 1200.5, "currency": "EUR"}
WRITE_ARGUMENTS = {"createFollowUp": FOLLOW_UP, "createEvent": EVENT, "sendEmail": EMAIL,
                   "sendPayment": PAYMENT}
READ_ARGUMENTS = {
    "getTicketStatus": {"ticketId": "T-1001"},
    "searchContacts": {"name": "anna"},
    "getInvoice": {"invoiceNumber": "INV-2026-0042", "organizationId": "org-northwind"},
}


def _contracts() -> dict[str, Mapping[str, Any]]:
    contracts: dict[str, Mapping[str, Any]] = {}
    for path in (ROOT / "contracts").glob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            contracts[document["metadata"]["name"]] = document["spec"]
    return contracts


CONTRACTS = _contracts()


def request(
    tool: str,
    arguments: Mapping[str, Any] | None = None,
    operation_id: str = "op-1",
    actor: Mapping[str, Any] = ACME,
    records: Mapping[str, Any] | None = None,
) -> ExecutionRequest:
    if arguments is None:
        arguments = {**WRITE_ARGUMENTS, **READ_ARGUMENTS}[tool]
    return ExecutionRequest(tool=tool, arguments=arguments, operation_id=operation_id,
                            deadline=DEADLINE, actor=actor, records=records or {})


def run(simulator: Simulator, tool: str, operation_id: str = "op-1", **kwargs: Any) -> Any:
    return simulator.executors()[tool](request(tool, operation_id=operation_id, **kwargs))


def contract_variables(tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What the gate would hand a contract's expressions: arguments and looked-up records."""
    variables: dict[str, Any] = {"args": arguments}
    if tool == "createEvent":
        variables["contact"] = next(c for c in WORLD["contacts"] if c["id"] == arguments["contact"])
    return variables


def verifies(tool: str, result: Any) -> bool:
    expression = compile_expression(CONTRACTS[tool]["verify"]["expression"])
    arguments = {**WRITE_ARGUMENTS, **READ_ARGUMENTS}[tool]
    return bool(expression({**contract_variables(tool, arguments), "result": result}))


def reconciles(tool: str, found: Any) -> bool:
    expression = compile_expression(CONTRACTS[tool]["reconcile"]["match"])
    return bool(expression({**contract_variables(tool, WRITE_ARGUMENTS[tool]), "found": found}))


# The tools, healthy ---------------------------------------------------------------------------


def test_create_follow_up_stores_and_returns_the_record() -> None:
    simulator = Simulator(WORLD)

    result = run(simulator, "createFollowUp")

    assert result == {"id": "F-1", "ticketId": "T-1001", "assigneeId": "U-7",
                      "dueAt": "2026-12-15T09:00:00Z", "note": "Call the customer back",
                      "operationId": "op-1"}
    assert simulator.snapshot()["follow_ups"] == [result]
    assert simulator.write_count() == simulator.write_count("createFollowUp") == 1
    assert simulator.writes[0].arguments == FOLLOW_UP
    assert simulator.find("createFollowUp", "op-1") == result


def test_ids_are_sequential() -> None:
    simulator = Simulator(WORLD)

    ids = [run(simulator, "createFollowUp", f"op-{n}")["id"] for n in range(3)]

    assert ids == ["F-1", "F-2", "F-3"]
    assert run(simulator, "createEvent")["id"] == "E-1"
    assert run(simulator, "sendEmail")["messageId"] == "M-1"


def test_create_event_uses_the_contact_the_gate_resolved() -> None:
    simulator = Simulator(WORLD)
    by_name = {**EVENT, "contact": "Boris Ivanov"}

    result = run(simulator, "createEvent", arguments=by_name,
                 records={"contact": {"id": "C-14", "name": "Boris Ivanov"}})

    assert result == {"id": "E-1", "contactId": "C-14", "title": "Contract renewal",
                      "startsAt": "2026-12-10T14:00:00Z", "operationId": "op-1"}
    assert simulator.snapshot()["events"] == [result]


def test_create_event_looks_up_a_contact_id_and_refuses_an_unknown_one() -> None:
    simulator = Simulator(WORLD)

    assert run(simulator, "createEvent")["contactId"] == "C-12"
    with pytest.raises(Refused):
        run(simulator, "createEvent", "op-2", arguments={**EVENT, "contact": "C-999"})
    assert simulator.write_count() == 1


def test_send_email_returns_a_message_id() -> None:
    simulator = Simulator(WORLD)

    result = run(simulator, "sendEmail")

    assert result == {"messageId": "M-1", "to": EMAIL["to"], "subject": EMAIL["subject"]}
    assert simulator.snapshot()["emails"][0]["body"] == EMAIL["body"]
    assert simulator.write_count("sendEmail") == 1


def test_reads_answer_from_the_world_and_never_count_as_writes() -> None:
    simulator = Simulator(WORLD)

    assert run(simulator, "getTicketStatus") == {
        "id": "T-1001", "status": "open", "team": "billing",
        "subject": "Invoice shows the wrong VAT"}
    assert run(simulator, "getInvoice") == {
        "number": "INV-2026-0042", "organization": "org-northwind", "amount": 1200.50,
        "currency": "EUR"}
    assert run(simulator, "searchContacts") == [
        {"id": "C-12", "name": "Anna Petrova", "company": "Northwind"},
        {"id": "C-13", "name": "Anna Petrova", "company": "Contoso"},
    ]
    assert simulator.write_count() == 0
    assert [call.outcome for call in simulator.calls] == ["not applied"] * 3
    assert simulator.find("getTicketStatus", "op-1") is None


def test_search_contacts_stays_within_the_actors_tenant() -> None:
    simulator = Simulator(WORLD)

    assert run(simulator, "searchContacts", actor=GLOBEX) == [
        {"id": "C-40", "name": "Anna Petrova", "company": "Globex Partner"}]
    assert run(simulator, "searchContacts", actor={"id": "U-0"}) == []


@pytest.mark.parametrize(("tool", "arguments"), [
    ("getTicketStatus", {"ticketId": "T-1003"}),  # deleted
    ("getTicketStatus", {"ticketId": "T-9999"}),
    ("getInvoice", {"invoiceNumber": "INV-2026-0042", "organizationId": "org-contoso"}),
])
def test_reads_of_missing_records_are_refused(tool: str, arguments: dict[str, Any]) -> None:
    with pytest.raises(Refused):
        run(Simulator(WORLD), tool, arguments=arguments)


@pytest.mark.parametrize("tool", ["createFollowUp", "createEvent", "sendEmail",
                                  "getTicketStatus", "getInvoice"])
def test_results_satisfy_the_contracts_verify_rule(tool: str) -> None:
    assert verifies(tool, run(Simulator(WORLD), tool))


def test_the_world_is_copied_in_and_results_are_copied_out() -> None:
    world = {"tickets": [dict(WORLD["tickets"][0])]}
    simulator = Simulator(world)
    world["tickets"][0]["status"] = "closed"

    result = run(simulator, "createFollowUp")
    result["ticketId"] = "T-0000"

    assert simulator.find("createFollowUp", "op-1")["ticketId"] == "T-1001"
    assert simulator.snapshot()["tickets"][0]["status"] == "open"


# Failures before anything is applied --------------------------------------------------------


def test_fail_before_sending_raises_unavailable_n_times_then_applies() -> None:
    simulator = Simulator(WORLD, {"createFollowUp": Faults(fail_before_sending=2)})

    for _ in range(2):
        with pytest.raises(Unavailable):
            run(simulator, "createFollowUp")
        assert simulator.write_count() == 0
        assert simulator.find("createFollowUp", "op-1") is None
    run(simulator, "createFollowUp")

    assert simulator.write_count() == 1
    assert [c.outcome for c in simulator.calls] == ["Unavailable", "Unavailable", "applied"]


def test_rate_limit_raises_with_retry_after_and_applies_to_reads() -> None:
    simulator = Simulator(WORLD, {"createFollowUp": Faults(rate_limit=1, retry_after=2.5),
                                  "getTicketStatus": Faults(rate_limit=1)})

    with pytest.raises(RateLimited) as raised:
        run(simulator, "createFollowUp")
    with pytest.raises(RateLimited):
        run(simulator, "getTicketStatus")

    assert raised.value.retry_after == 2.5
    assert simulator.write_count() == 0
    assert run(simulator, "getTicketStatus")["id"] == "T-1001"
    run(simulator, "createFollowUp")
    assert simulator.write_count() == 1


@pytest.mark.parametrize(("faults", "error"), [
    (Faults(conflict=True), StateConflict),
    (Faults(refuse=True), Refused),
])
def test_conflict_and_refuse_apply_nothing_until_lifted(
    faults: Faults, error: type[Exception]
) -> None:
    simulator = Simulator(WORLD, {"createFollowUp": faults})

    for operation_id in ("op-1", "op-2"):
        with pytest.raises(error):
            run(simulator, "createFollowUp", operation_id)
    assert simulator.write_count() == 0
    assert simulator.snapshot()["follow_ups"] == []

    simulator.set_faults("createFollowUp", Faults())
    run(simulator, "createFollowUp", "op-3")
    assert simulator.write_count() == 1


def test_a_ticket_closed_after_the_check_is_a_conflict() -> None:
    simulator = Simulator(WORLD)
    run(simulator, "createFollowUp", "op-1")

    simulator.close_ticket("T-1001")

    with pytest.raises(StateConflict):
        run(simulator, "createFollowUp", "op-2")
    # The destination checks the idempotency key first: a retry of a write it already
    # applied still gets its answer.
    assert run(simulator, "createFollowUp", "op-1")["id"] == "F-1"
    assert simulator.write_count() == 1


def test_update_changes_a_record_and_names_a_missing_one() -> None:
    simulator = Simulator(WORLD)

    simulator.update("tickets", "T-1001", status="pending")

    assert run(simulator, "getTicketStatus")["status"] == "pending"
    with pytest.raises(KeyError, match="T-9999"):
        simulator.update("tickets", "T-9999", status="closed")


# Failures after sending, and what find then says ----------------------------------------------


def test_timeout_after_applying_counts_the_write_and_find_returns_it() -> None:
    simulator = Simulator(WORLD, {"createFollowUp": Faults(timeout_after_applying=1)})

    with pytest.raises(OutcomeTimeout):
        run(simulator, "createFollowUp")

    assert simulator.write_count() == 1
    assert simulator.calls[0].applied
    assert simulator.calls[0].outcome == "applied, then OutcomeTimeout"
    found = simulator.find("createFollowUp", "op-1")
    assert found == simulator.writes[0].result
    assert found["id"] == "F-1"
    # Only the next call lost its answer; a retry under the same operation ID is deduplicated.
    assert run(simulator, "createFollowUp") == found
    assert simulator.write_count() == 1


def test_confirm_late_hides_the_write_from_n_finds() -> None:
    simulator = Simulator(WORLD, {"createFollowUp": Faults(confirm_late=2)})
    result = run(simulator, "createFollowUp")

    answers = [simulator.find("createFollowUp", "op-1") for _ in range(4)]

    assert answers == [None, None, result, result]
    assert [f.found for f in simulator.finds] == [False, False, True, True]
    assert simulator.write_count() == 1


def test_honored_idempotency_returns_the_first_result_without_a_new_write() -> None:
    simulator = Simulator(WORLD, {"createFollowUp": Faults(idempotency="honor")})

    first = run(simulator, "createFollowUp")
    second = run(simulator, "createFollowUp")

    assert second == first
    assert simulator.write_count() == 1
    assert [c.outcome for c in simulator.calls] == ["applied", "not applied"]


def test_ignored_idempotency_writes_again_under_the_same_operation_id() -> None:
    simulator = Simulator(WORLD, {"createFollowUp": Faults(idempotency="ignore")})

    first = run(simulator, "createFollowUp")
    second = run(simulator, "createFollowUp")

    assert (first["id"], second["id"]) == ("F-1", "F-2")
    assert simulator.write_count() == 2
    assert len(simulator.snapshot()["follow_ups"]) == 2
    assert simulator.find("createFollowUp", "op-1") == first


@pytest.mark.parametrize("tool", ["createFollowUp", "createEvent", "sendEmail",
                                  "getTicketStatus", "getInvoice"])
def test_corrupt_result_fails_verify_but_stores_the_truth(tool: str) -> None:
    simulator = Simulator(WORLD, {tool: Faults(corrupt_result=True)})

    result = run(simulator, tool)

    assert not verifies(tool, result)
    if tool in WRITE_ARGUMENTS:
        assert simulator.write_count() == 1
        assert verifies(tool, simulator.find(tool, "op-1"))


def test_corrupt_result_changes_every_search_row() -> None:
    honest = run(Simulator(WORLD), "searchContacts")

    corrupted = run(Simulator(WORLD, {"searchContacts": Faults(corrupt_result=True)}),
                    "searchContacts")

    assert len(corrupted) == len(honest)
    assert all(bad["id"] != good["id"] for bad, good in zip(corrupted, honest, strict=True))


@pytest.mark.parametrize("tool", ["createFollowUp", "createEvent"])
def test_lookup_mismatch_fails_the_reconcile_match(tool: str) -> None:
    healthy = Simulator(WORLD)
    mismatched = Simulator(WORLD, {tool: Faults(lookup_mismatch=True)})
    run(healthy, tool)
    run(mismatched, tool)

    assert reconciles(tool, healthy.find(tool, "op-1"))
    assert not reconciles(tool, mismatched.find(tool, "op-1"))
    assert mismatched.write_count() == 1


def test_lookup_mismatch_moves_a_timestamp_and_keeps_it_a_timestamp() -> None:
    simulator = Simulator(WORLD, {"createFollowUp": Faults(lookup_mismatch=True)})
    run(simulator, "createFollowUp")

    assert simulator.find("createFollowUp", "op-1")["dueAt"] == "2026-12-16T09:00:00Z"


# Configuration --------------------------------------------------------------------------------


def test_faults_from_a_scenario_mapping() -> None:
    faults = faults_by_tool({"createFollowUp": {"timeout_after_applying": 1},
                             "getTicketStatus": {"rate_limit": 2, "retry_after": 3}})

    assert faults == {"createFollowUp": Faults(timeout_after_applying=1),
                      "getTicketStatus": Faults(rate_limit=2, retry_after=3)}


@pytest.mark.parametrize(("mapping", "message"), [
    ({"timeout_after_aplying": 1}, "unknown fault 'timeout_after_aplying'"),
    ({"rate_limit": True}, "rate_limit must be a non-negative integer"),
    ({"confirm_late": -1}, "confirm_late must be a non-negative integer"),
    ({"fail_before_sending": "2"}, "fail_before_sending must be a non-negative integer"),
    ({"conflict": "yes"}, "conflict must be true or false"),
    ({"retry_after": -0.5}, "retry_after must be a non-negative number"),
    ({"idempotency": "dedupe"}, 'idempotency must be "honor" or "ignore"'),
])
def test_faults_from_mapping_rejects_unknown_keys_and_wrong_types(
    mapping: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Faults.from_mapping(mapping)


def test_faults_by_tool_names_the_tool_at_fault() -> None:
    with pytest.raises(ValueError, match="unknown tool 'createFollowup'"):
        faults_by_tool({"createFollowup": {"refuse": True}}, TOOLS)
    # without the tools, the destination names it when it is built
    with pytest.raises(ValueError, match="unknown tool 'createFollowup'"):
        Simulator(WORLD, faults_by_tool({"createFollowup": {"refuse": True}}))
    with pytest.raises(ValueError, match="createFollowUp: unknown fault 'refused'"):
        faults_by_tool({"createFollowUp": {"refused": True}})
    with pytest.raises(ValueError, match="must be a mapping"):
        faults_by_tool({"createFollowUp": [1]})


def test_a_write_only_fault_on_a_read_is_rejected() -> None:
    with pytest.raises(ValueError, match="getTicketStatus is a read; confirm_late"):
        Simulator(WORLD, {"getTicketStatus": Faults(confirm_late=1)})


def test_wiring_mistakes_are_loud() -> None:
    simulator = Simulator(WORLD)

    with pytest.raises(ValueError, match="unknown tool"):
        simulator.find("createFollowup", "op-1")
    with pytest.raises(ValueError, match="createEvent executor was called with a request"):
        simulator.executors()["createEvent"](request("createFollowUp"))
    assert sorted(simulator.executors()) == sorted(WRITE_ARGUMENTS | READ_ARGUMENTS)


# Threads --------------------------------------------------------------------------------------


def test_concurrent_writes_are_all_counted_with_distinct_ids() -> None:
    simulator = Simulator(WORLD)
    create = simulator.executors()["createFollowUp"]
    threads, per_thread = 8, 50
    start = threading.Barrier(threads)
    results: list[dict[str, Any]] = []

    def work(worker: int) -> None:
        start.wait()
        for n in range(per_thread):
            results.append(create(request("createFollowUp", operation_id=f"op-{worker}-{n}")))

    workers = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    total = threads * per_thread
    assert simulator.write_count() == total
    assert len({r["id"] for r in results}) == total
    assert len(simulator.calls) == total
    assert {f"F-{n}" for n in range(1, total + 1)} == {r["id"] for r in results}
