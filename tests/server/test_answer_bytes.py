"""``DecisionOut.json_of`` writes a decision's fields as they are and makes them
``answerable`` only when ``to_json`` refuses them: whatever a decision carries (any JSON
value as its result or candidates, non-finite numbers, big integers, lone surrogates in
text and keys), its bytes are the route's, ``DecisionOut.of(...).model_dump_json()``. And
the scoped request IDs keep their definition: ``p`` + 24 hex digits of the SHA-256 of the
pinned actor's canonical JSON, worked out once per identity."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi", reason="the service needs the server extra (fastapi)")

from callgate_rules.canonical import canonical_json  # noqa: E402
from callgate_rules.integrations.identity import Identity  # noqa: E402
from callgate_rules.pipeline.decision import Decision  # noqa: E402
from callgate_rules.server import ServiceSettings  # noqa: E402
from callgate_rules.server.api import scoped_by  # noqa: E402
from callgate_rules.server.models import DecisionOut  # noqa: E402
from callgate_rules.server.service import Service  # noqa: E402

from .conftest import ON_FILE  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ACTOR = {"id": "U-7", "tenant": "acme", "role": "agent", "teams": ["billing"],
         "organizations": ["org-northwind"]}

TEXT = st.text(max_size=8) | st.sampled_from(["\ud800", "a\udfffb", "é😀", "\x00\u2028"])
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(2**63, 2**70)
           | st.floats() | TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(TEXT, inner, max_size=3), max_leaves=12)


@pytest.fixture(scope="module")
def decision(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Decision]:
    store = tmp_path_factory.mktemp("answers") / "receipts.db"
    service = Service(ServiceSettings(
        paths=(str(REPO / "contracts"), str(REPO / "policies")), store=f"sqlite:///{store}",
        world=str(REPO / "examples" / "world.yaml")))
    try:
        yield service.hosted.decide(
            {"name": "sendPayment", "arguments": {"recipientIban": ON_FILE, "amount": 120.0,
                                                  "currency": "EUR"}},
            actor=ACTOR, request_id="r-1", session={"authenticated": True})
    finally:
        service.close()


@settings(max_examples=300, deadline=None)
@given(result=VALUES, candidates=st.lists(st.dictionaries(TEXT, VALUES, max_size=3),
                                          max_size=2),
       tool=TEXT, retry_after=st.none() | st.floats())
def test_the_answer_is_the_routes_whatever_the_decision_carries(
        decision: Decision, result: Any, candidates: list[dict[str, Any]], tool: str,
        retry_after: float | None) -> None:
    carried = decision.replace(result=result, candidates=tuple(candidates), tool=tool,
                               retry_after=retry_after)
    assert DecisionOut.json_of(carried) == DecisionOut.of(carried).model_dump_json().encode()


def test_a_scoped_id_is_namespaced_by_the_digest_of_the_pinned_actor() -> None:
    identity = Identity({"tenant": "acme", "region": "eu"})
    digest = hashlib.sha256(canonical_json({"tenant": "acme", "region": "eu"}).encode())
    assert scoped_by(identity, "r-1") == f"p{digest.hexdigest()[:24]}:r-1"
    assert scoped_by(Identity({"region": "eu", "tenant": "acme"}), "r-1") == \
        scoped_by(identity, "r-1")  # the same actor, whatever the order of its claims
    assert scoped_by(Identity({"tenant": "globex"}), "r-1") != scoped_by(identity, "r-1")
    assert scoped_by(Identity({}), "r-1") == scoped_by(None, "r-1") == "r-1"
    assert "actor_digest" in vars(identity)  # worked out once, then kept with the identity
