"""Property-based API test generated from the service's own OpenAPI document (schemathesis):
whatever the generated requests hold, valid or not, the server never answers 5xx. Each
operation gets a bounded number of examples, derandomized, so it runs in seconds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed "
                                                          "(pip install schemathesis)")
from schemathesis.checks import not_a_server_error  # noqa: E402

from .conftest import Server, start_server, token  # noqa: E402

EXAMPLES_PER_OPERATION = 15


@pytest.fixture(scope="module")
def fuzzed_server(documents: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'receipts.db'}"
    server = start_server(documents, store)
    try:
        yield server
    finally:
        server.stop()


def test_no_generated_request_makes_the_server_fail(fuzzed_server: Server) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzzed_server.url}/openapi.json")
    headers = {"authorization": f"Bearer {token()}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9
    statuses: Counter[int] = Counter()
    for operation in operations:
        for mode in schemathesis.GenerationMode:  # valid requests, and invalid ones
            @given(operation.as_strategy(mode))
            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True,
                      database=None, suppress_health_check=list(HealthCheck))
            def check(case: schemathesis.Case) -> None:
                response = case.call(base_url=fuzzed_server.url, headers=headers, timeout=30)
                statuses[response.status_code] += 1
                case.validate_response(response, checks=[not_a_server_error])

            try:
                check()
            except Unsatisfiable:  # an operation with nothing to get wrong (no body)
                assert mode == schemathesis.GenerationMode.NEGATIVE
    assert sum(statuses.values()) >= 100 and not any(code >= 500 for code in statuses)
    assert statuses[200] > 0 and statuses[422] > 0  # both kinds reached the server
