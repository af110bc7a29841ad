"""The generic simulated destination: a new domain's tools (``callgate init``'s refunds)
through the gate with every fault, declared answers, and the host's own executors.

Nothing here knows the support desk: the configuration is the one ``callgate init`` writes,
read from the package's templates.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from callgate_rules.documents.compiler import load
from callgate_rules.errors import InputError
from callgate_rules.harness.destination import SimulatedTool, filled
from callgate_rules.harness.scenarios import (
    DEFAULT_NOW,
    FakeClock,
    load_scenarios,
    run_scenarios,
)
from callgate_rules.harness.simulator import Faults, Simulator, simulated_tools
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.execute import ExecutionRequest
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store import open_store

TEMPLATE = Path(str(resources.files("callgate_rules.authoring") / "templates" / "project"))
CONFIG = load([TEMPLATE / "contracts", TEMPLATE / "policies"])
WORLD = yaml.safe_load((TEMPLATE / "examples/world.yaml").read_text())
AGENT = {"id": "U-1", "shop": "north", "role": "agent"}
REFUND = {"name": "issueRefund",
          "arguments": {"orderId": "O-1001", "amount": 20, "reason": "Damaged parcel"}}


def bound(faults: dict[str, Faults] | None = None,
          results: dict[str, Any] | None = None) -> tuple[Gate, Simulator, FakeClock]:
    simulator = Simulator(WORLD, faults, simulated_tools(CONFIG, results=results))
    clock = FakeClock(DEFAULT_NOW)
    gate = Gate(CONFIG, resolvers=WorldResolvers(WORLD), executors=simulator.executors(),
                finder=simulator.find, store=open_store("memory://"), clock=clock,
                sleep=clock.sleep, secret=b"test")
    return gate, simulator, clock


def refund(faults: Faults | None = None, **options: Any) -> tuple[Any, Simulator, FakeClock]:
    gate, simulator, clock = bound({"issueRefund": faults} if faults else None, **options)
    return gate.handle(REFUND, actor=AGENT, request_id="r-1"), simulator, clock


def test_every_contract_gets_a_simulated_tool_of_its_effect() -> None:
    tools = simulated_tools(CONFIG)
    assert {name: tool.effect for name, tool in tools.items()} == {
        "issueRefund": "write", "getOrder": "read"}


def test_a_healthy_write_answers_with_its_arguments_and_keeps_the_record() -> None:
    decision, simulator, _ = refund()
    assert (str(decision.route), decision.error_class) == ("return_result", None)
    assert decision.result == simulator.writes[0].result
    assert simulator.write_count("issueRefund") == 1
    write = simulator.writes[0]
    assert write.result == {"id": "issueRefund-1", **REFUND["arguments"],
                            "operationId": write.operation_id}
    assert simulator.snapshot()["issueRefund"] == [write.result]
    assert simulator.find("issueRefund", write.operation_id) == write.result


def test_a_read_answers_with_the_record_it_looked_up() -> None:
    gate, simulator, _ = bound()
    decision = gate.handle({"name": "getOrder", "arguments": {"orderId": "O-1001"}},
                           actor=AGENT, request_id="r-1")
    assert str(decision.route) == "return_result"
    assert decision.result == WORLD["orders"][0]  # verify: result.id == args.orderId
    assert simulator.write_count() == 0
    assert [(call.tool, call.applied) for call in simulator.calls] == [("getOrder", False)]


@pytest.mark.parametrize(("faults", "route", "error_class", "writes"), [
    (Faults(fail_before_sending=1), "return_result", None, 1),
    (Faults(rate_limit=1, retry_after=2.0), "return_result", None, 1),
    (Faults(fail_before_sending=10), "review", "budget_exhausted", 0),
    (Faults(timeout_after_applying=1), "return_result", None, 1),
    (Faults(timeout_after_applying=1, confirm_late=1), "return_result", None, 1),
    (Faults(timeout_after_applying=1, confirm_late=1, idempotency="ignore"),
     "return_result", None, 2),
    (Faults(timeout_after_applying=1, lookup_mismatch=True), "review", "reconcile_failed", 1),
    (Faults(corrupt_result=True), "review", "reconcile_failed", 1),
    (Faults(refuse=True), "refuse", "permanent", 0),
    (Faults(conflict=True), "refuse", "conflict", 0),
], ids=["unavailable", "rate-limited", "unavailable-for-good", "timeout", "confirm-late",
        "no-dedup", "edited-after", "corrupt", "refused", "conflict"])
def test_every_fault_on_a_new_domains_write(faults: Faults, route: str,
                                           error_class: str | None, writes: int) -> None:
    decision, simulator, _ = refund(faults)
    assert str(decision.route) == route
    assert (str(decision.error_class) if decision.error_class else None) == error_class
    assert simulator.write_count() == writes


def test_a_rate_limit_waits_as_long_as_the_destination_asked() -> None:
    decision, simulator, clock = refund(Faults(rate_limit=1, retry_after=2.5))
    assert str(decision.route) == "return_result"
    assert (clock.now - DEFAULT_NOW).total_seconds() >= 2.5
    assert [call.outcome for call in simulator.calls] == ["RateLimited", "applied"]


def test_a_lost_answer_is_found_by_operation_id() -> None:
    decision, simulator, _ = refund(Faults(timeout_after_applying=1))
    assert decision.log.get("detail") == "late confirmation"
    assert [call.outcome for call in simulator.calls] == ["applied, then OutcomeTimeout"]
    assert [find.found for find in simulator.finds] == [True]


def test_a_declared_answer_fills_its_placeholders_with_their_types() -> None:
    decision, simulator, _ = refund(results={"issueRefund": {
        "id": "R-{id}", "orderId": "{args.orderId}", "amount": "{args.amount}",
        "receipt": "refund of {args.amount} for {args.orderId}", "ref": "{operation_id}"}})
    assert str(decision.route) == "return_result"  # verify holds: amount stays a number
    result = simulator.writes[0].result
    assert result["amount"] == 20 and result["receipt"] == "refund of 20 for O-1001"
    assert result["id"] == "R-issueRefund-1" and result["ref"] == simulator.writes[0].operation_id


def test_a_declared_wrong_answer_fails_verify() -> None:
    decision, _, _ = refund(results={"issueRefund": {"id": "R-1", "orderId": "O-1",
                                                     "amount": 20}})
    assert (str(decision.route), str(decision.error_class)) == ("review", "reconcile_failed")


def test_write_only_faults_on_a_read_are_refused() -> None:
    with pytest.raises(ValueError, match="getOrder is a read; timeout_after_applying"):
        Simulator(WORLD, {"getOrder": Faults(timeout_after_applying=1)},
                  simulated_tools(CONFIG))


def test_results_and_destinations_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown tool 'issueRefnd'; the simulated destination "
                                         "runs getOrder, issueRefund"):
        simulated_tools(CONFIG, results={"issueRefnd": {}})
    with pytest.raises(ValueError, match="unknown destination 'shop'"):
        simulated_tools(CONFIG, "shop")


# Declared answers -----------------------------------------------------------------------------

REQUEST = ExecutionRequest("t", {"n": 3, "s": "x", "nested": {"a": [1]}}, "op-9",
                           DEFAULT_NOW, {})


def test_filled_keeps_a_whole_placeholders_value_and_writes_out_an_embedded_one() -> None:
    ids = iter(["t-1", "t-2"])
    made = filled({"n": "{args.n}", "text": "n={args.n}", "nested": "{args.nested}",
                   "missing": "{args.nope}", "ids": ["{id}", "{id}"], "op": "{operation_id}",
                   "literal": "{not a placeholder}", "number": 7}, REQUEST, lambda: next(ids))
    assert made == {"n": 3, "text": "n=3", "nested": {"a": [1]}, "missing": None,
                    "ids": ["t-1", "t-1"], "op": "op-9", "literal": "{not a placeholder}",
                    "number": 7}


@given(st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda k: k not in
                                                             ("id", "operationId")),
                       st.one_of(st.integers(), st.text(max_size=12), st.booleans(),
                                 st.floats(allow_nan=False, allow_infinity=False)),
                       max_size=6))
def test_a_corrupted_answer_differs_in_every_field_that_echoes_the_call(
        arguments: dict[str, Any]) -> None:
    tools = {"t": SimulatedTool("write")}
    healthy = Simulator({}, None, tools)
    corrupt = Simulator({}, {"t": Faults(corrupt_result=True)}, tools)
    request = ExecutionRequest("t", arguments, "op-1", DEFAULT_NOW, {})
    honest = healthy.executors()["t"](request)
    wrong = corrupt.executors()["t"](request)
    assert all(honest[key] == value for key, value in arguments.items())
    if arguments:
        assert all(wrong.get(key) != value or type(wrong.get(key)) is not type(value)
                   for key, value in arguments.items())
    else:
        assert wrong == {}  # nothing echoes the call: the answer is empty
    assert corrupt.snapshot()["t"] == [{**honest}]  # what it stores stays right


# Scenario files -----------------------------------------------------------------------------


def _scenario_file(tmp_path: Path, **fields: Any) -> Path:
    document = {"name": "refund", "actor": AGENT, "world": WORLD,
                "steps": [{"propose": REFUND, "expect": {"route": "return_result"}}], **fields}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_a_scenario_on_a_new_domain_runs_without_python(tmp_path: Path) -> None:
    path = _scenario_file(tmp_path, faults={"issueRefund": {"timeout_after_applying": 1}},
                          expect={"writes": 1, "late_confirmation": True})
    [result] = run_scenarios(load_scenarios([path]), CONFIG)
    assert result.passed, result.failures


def test_a_scenarios_mistakes_name_the_file(tmp_path: Path) -> None:
    path = _scenario_file(tmp_path, results={"issueRefnd": {"id": 1}})
    with pytest.raises(InputError, match=r"s\.yaml:1:1: unknown tool 'issueRefnd'"):
        run_scenarios(load_scenarios([path]), CONFIG)
    path = _scenario_file(tmp_path, faults={"getOrdr": {"refuse": True}})
    with pytest.raises(InputError, match=r"s\.yaml:1:1: unknown tool 'getOrdr'"):
        run_scenarios(load_scenarios([path]), CONFIG)
    path = _scenario_file(tmp_path, destination="support_desk")
    with pytest.raises(InputError, match="unknown destination 'support_desk'; known: "
                                         "generic, support-desk"):
        load_scenarios([path])
    path = _scenario_file(tmp_path, results=["issueRefund"])
    with pytest.raises(InputError, match="results must map tool names"):
        load_scenarios([path])


def test_a_host_binds_its_own_executor_for_one_tool(tmp_path: Path) -> None:
    seen: list[str] = []

    def issue_refund(request: ExecutionRequest) -> dict[str, Any]:
        seen.append(request.operation_id)
        return {"id": "R-1", "orderId": request.arguments["orderId"],
                "amount": request.arguments["amount"]}

    path = _scenario_file(tmp_path, expect={"writes": 0})  # the simulator saw no write
    [result] = run_scenarios(load_scenarios([path]), CONFIG,
                             executors={"issueRefund": issue_refund})
    assert result.passed, result.failures
    assert len(seen) == 1


def test_load_takes_one_path_as_one_path() -> None:
    """A plain string is one directory, not its characters (issue 19)."""
    one = load(str(TEMPLATE / "contracts"))
    assert sorted(one.contracts) == ["getOrder", "issueRefund"]
    assert sorted(load(TEMPLATE / "contracts").contracts) == sorted(one.contracts)


# What coverage counts -------------------------------------------------------------------------


def test_coverage_counts_what_the_new_domain_can_reach() -> None:
    from callgate_rules.harness.reachable import reachable

    possible = reachable(CONFIG)
    assert sorted(possible.left_out) == [
        "error class ambiguous", "error class answer_too_large",
        "error class confirmation_required", "route await_confirmation", "route clarify"]
    assert possible.left_out["route clarify"] == "only ambiguous is routed to it, and left out"
    assert {"duplicate", "reconcile_failed", "unexpected_argument", "not_found"} <= \
        possible.error_classes
    assert {"reconcile", "return_receipt", "retry", "review"} <= possible.routes


def test_a_one_read_domain_is_not_asked_for_writes(tmp_path: Path) -> None:
    from callgate_rules.harness.reachable import reachable

    (tmp_path / "ping.yaml").write_text(yaml.safe_dump({
        "apiVersion": "callgate/v1", "kind": "ToolContract",
        "metadata": {"name": "ping", "version": "1.0.0", "owner": "o@example.com",
                     "description": "Ping."},
        "spec": {"effect": "read", "arguments": {"type": "object"},
                 "examples": [{"arguments": {}}]}}))
    possible = reachable(load(tmp_path))
    for missing in ("duplicate", "reconcile_failed", "not_found", "invalid_argument",
                    "unexpected_argument", "confirmation_required"):
        assert f"error class {missing}" in possible.left_out, missing
    assert "route return_receipt" in possible.left_out
    assert "route reconcile" in possible.left_out  # a read's lost answer is retried
    assert possible.left_out["error class duplicate"] == "no write tool"


def test_the_reference_configuration_leaves_nothing_out() -> None:
    from callgate_rules.harness.reachable import reachable

    repository = Path(__file__).resolve().parents[2]
    left_out = reachable(load([repository / "contracts", repository / "policies"])).left_out
    assert list(left_out) == ["error class answer_too_large"]  # no world answers too much
