"""``reading_locals``: inlined code that reads variables a tool's plan holds in locals gives
what the code reading ``variables`` gives, value for value and error for error, and never
touches a string literal that only looks like a read."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from callgate_rules.cel.compiler import reading_locals
from tests.cel.test_differential import (
    SETTINGS,
    assert_agrees_with_the_function,
    expressions,
    inlined,
    typed_data,
    untyped_data,
)


@SETTINGS
@given(source=expressions, data=st.one_of(typed_data, untyped_data))
def test_locals_read_as_the_variables_do(source: str, data: dict[str, Any]) -> None:
    run = inlined(source, held=sorted(data))
    if run is None:  # a top-level macro: the plan calls the function
        return
    assert_agrees_with_the_function(source, data, run)


def test_both_spellings_of_a_read_are_rewritten_and_literals_are_not() -> None:
    body = ["_t = variables.get('actor', _ABSENT)",
            "if variables['args']['x'] == \"variables['args']\":",
            "    return _helper(variables, variables['other'])"]
    assert reading_locals(body, {"actor": "actor", "args": "arguments"}) == [
        "_t = actor",
        "if arguments['x'] == \"variables['args']\":",
        "    return _helper(variables, variables['other'])"]


def test_a_plan_reads_its_own_variables_from_locals() -> None:
    from callgate_rules import Gate
    from tests.conftest import CONTRACTS, POLICIES

    source = Gate.from_paths(CONTRACTS, POLICIES).plan("createFollowUp").source
    assert "variables['args'][" not in source and "variables['ticket'][" not in source
    assert "record0['tenant']" in source and "arguments['dueAt']" in source
