"""``/v1/decide`` makes a decision that waits on nothing on the event loop, with no hop to a
worker thread: outside a named run, with look-ups from the request or a world file and no
decision log. A write held for a person (the hold is written to the store) and a decision
in a named run (its history is in the store) still run in a worker. And the bearer tokens
a host sends again and again are verified once, then remembered until they expire."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service needs the server extra (fastapi)")

import httpx  # noqa: E402
import jwt  # noqa: E402

from callgate_rules.integrations.identity import (  # noqa: E402
    ClaimMapping,
    Identity,
    InvalidToken,
    VerificationKey,
)
from callgate_rules.pipeline.decision import Decision  # noqa: E402
from callgate_rules.server import ServiceSettings, create_app  # noqa: E402
from callgate_rules.server.app import RememberedTokens  # noqa: E402

from .conftest import DANA as ACTOR  # noqa: E402
from .conftest import INJECTED, ON_FILE, REPO, injected_conversation, payment  # noqa: E402
from .conftest import TOKEN_SECRET as SECRET  # noqa: E402


def test_only_a_decision_that_waits_on_nothing_is_made_on_the_event_loop(
        tmp_path: Path) -> None:
    made_in: list[threading.Thread] = []

    def observe(decision: Decision) -> None:
        made_in.append(threading.current_thread())

    app = create_app(ServiceSettings(
        paths=(str(REPO / "contracts"), str(REPO / "policies")),
        store=f"sqlite:///{tmp_path / 'receipts.db'}",
        world=str(REPO / "examples" / "world.yaml")), observers=(observe,))
    bodies = [
        {"model_output": payment(ON_FILE), "request_id": "r-1"},  # allowed: on the loop
        {"model_output": payment(INJECTED), "conversation": injected_conversation(),
         "request_id": "r-2"},  # held for a person: the store is written, in a worker
        {"model_output": payment(ON_FILE), "request_id": "r-3", "run_id": "run-1"},  # a run
    ]

    async def decide_each() -> tuple[threading.Thread, list[dict[str, Any]]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            answers = [(await client.post("/v1/decide", json={
                **body, "actor": ACTOR, "session": {"authenticated": True}})).json()
                for body in bodies]
        return threading.current_thread(), answers

    loop_thread, answers = asyncio.run(decide_each())
    assert [answer["route"] for answer in answers] == [
        "execute", "await_confirmation", "execute"], answers
    assert answers[0]["operation_id"] and answers[1]["confirmation_token"]
    assert made_in[0] is loop_thread
    assert made_in[1] is not loop_thread and made_in[2] is not loop_thread


def remembering() -> RememberedTokens:
    return RememberedTokens(mapping=ClaimMapping(actor={"tenant": "tenant"}),
                            keys={None: VerificationKey(SECRET.encode(), "HS256")},
                            leeway=5.0)


def test_a_token_is_remembered_once_verified_and_only_until_it_expires() -> None:
    verifier = remembering()
    expiry = int(time.time()) + 600
    token = jwt.encode({"sub": "host", "tenant": "acme", "exp": expiry}, SECRET,
                       algorithm="HS256")
    assert verifier.verify(token).actor == {"tenant": "acme"}
    assert verifier.remembered[token][0] == expiry + 5.0  # its exp, with the leeway
    assert verifier.verify(token) is verifier.remembered[token][1]  # not verified again

    verifier.remembered[token] = (time.time() - 1, Identity(actor={"tenant": "globex"}))
    assert verifier.verify(token).actor == {"tenant": "acme"}  # past its time: verified

    forged = jwt.encode({"sub": "host", "tenant": "acme", "exp": expiry},
                        "another-secret-of-at-least-32-bytes-long!", algorithm="HS256")
    with pytest.raises(InvalidToken):
        verifier.verify(forged)
    expired = jwt.encode({"sub": "host", "tenant": "acme", "exp": int(time.time()) - 60},
                         SECRET, algorithm="HS256")
    with pytest.raises(InvalidToken, match="expired"):
        verifier.verify(expired)
    assert set(verifier.remembered) == {token}  # only what verified is remembered
