"""Tenant isolation on the service: every endpoint a caller can reach, for a caller of the
item's own tenant, of another tenant, and with no (tenant) scope — over real
``callgate serve`` processes on SQLite and PostgreSQL.

Two instances share one store: ``pinned`` verifies tokens whose ``tenant`` claim pins the
actor's tenant (hosts of ``acme`` and ``globex``); ``unpinned`` verifies tokens that pin only
the actor's ``id`` (a host token with no pinned tenant). Reviewers sign in to the page with
the users file's scopes: erin reviews ``acme``, gina ``globex``, nora declares no scope.

Another tenant's item must answer exactly as a missing one: the same status and the same
body once the asked-for ID is put in its place.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from .conftest import (
    DANA,
    REVIEWERS,
    SESSION,
    TOKEN_SECRET,
    Server,
    drop_schema,
    injected_conversation,
    payment,
    postgres_store,
    start_server,
    token,
)

pytestmark = pytest.mark.integration

GLOBEX = {**DANA, "id": "U-90", "tenant": "globex"}
ON_FILE = {"acme": "DE89370400440532013000", "globex": "GB29NWBK60161331926819"}
MISSING_OPERATION = "op-that-does-not-exist-0123456789abcdef"
MISSING_REVIEW = "00000000-0000-4000-8000-000000000000"


@dataclass
class Items:
    """What each tenant has in the shared store."""

    held: dict[str, str]  # tenant: operation ID of a payment waiting for a person
    tokens: dict[str, str]  # tenant: that payment's confirmation token
    reviews: dict[str, str]  # tenant: review item ID of a hand-over
    review_operations: dict[str, str]  # tenant: the hand-over's operation ID


@dataclass
class Tenants:
    pinned: Server
    unpinned: Server
    items: Items

    def host(self, tenant: str) -> httpx.Client:
        return httpx.Client(base_url=self.pinned.url, timeout=30, headers={
            "authorization": f"Bearer {token(f'host-{tenant}', tenant)}"})

    def unscoped_host(self) -> httpx.Client:
        """A token that pins no tenant: only the actor's id (of no actor on file)."""
        return httpx.Client(base_url=self.unpinned.url, timeout=30, headers={
            "authorization": f"Bearer {token('host-z', 'acme')}"})


def actor_of(tenant: str) -> dict[str, Any]:
    return DANA if tenant == "acme" else GLOBEX


def hold(client: httpx.Client, actor: dict[str, Any]) -> tuple[str, str]:
    held = client.post("/v1/decide", json={
        "model_output": payment("GB33BUKB20201555555555", 300), "actor": actor,
        "session": SESSION, "request_id": f"scope-{uuid.uuid4().hex[:10]}",
        "conversation": injected_conversation()}).json()
    assert held["route"] == "await_confirmation", held
    return str(held["operation_id"]), str(held["confirmation_token"])


def hand_over(client: httpx.Client, actor: dict[str, Any]) -> str:
    step = client.post("/v1/claim", json={
        "model_output": payment(ON_FILE[actor["tenant"]], amount=15), "actor": actor, "session": SESSION,
        "request_id": f"scope-{uuid.uuid4().hex[:10]}"}).json()
    assert step["action"] == "execute", step
    handed = client.post("/v1/finish", json={
        "operation_id": step["operation_id"], "lease": step["lease"], "actor": actor,
        "result": {"unexpected": True}}).json()
    assert handed["decision"]["route"] == "review", handed
    return str(step["operation_id"])


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def tenants(request: pytest.FixtureRequest, documents: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path_factory.mktemp('scope') / 'receipts.db'}"
    else:
        store = postgres_store()
    id_only = documents / "auth-id-only.yaml"
    id_only.write_text("secret_env: CALLGATE_TEST_TOKEN_SECRET\nclaims:\n  actor: {id: sub}\n"
                       "  principal: sub\n")
    pinned = start_server(documents, store)
    unpinned = start_server(documents, store, "--auth", str(id_only))
    try:
        held, tokens, operations = {}, {}, {}
        for tenant in ("acme", "globex"):
            with Tenants(pinned, unpinned, Items({}, {}, {}, {})).host(tenant) as client:
                held[tenant], tokens[tenant] = hold(client, actor_of(tenant))
                operations[tenant] = hand_over(client, actor_of(tenant))
        reviews = {}
        for tenant in ("acme", "globex"):
            with Tenants(pinned, unpinned, Items({}, {}, {}, {})).host(tenant) as client:
                listed = client.get("/v1/reviews").json()
                [reviews[tenant]] = [i["review_id"] for i in listed
                                     if i["operation_id"] == operations[tenant]]
        yield Tenants(pinned, unpinned, Items(held, tokens, reviews, operations))
    finally:
        pinned.stop()
        unpinned.stop()
        if request.param == "postgres":
            drop_schema(store)


def same_as_missing(asked: httpx.Response, missing: httpx.Response, asked_id: str,
                    missing_id: str) -> None:
    """The same status and the same body, once the asked-for ID is put in its place."""
    assert asked.status_code == missing.status_code
    assert asked.headers["content-type"] == missing.headers["content-type"]
    assert asked.text.replace(asked_id, missing_id) == missing.text


# The decision API ---------------------------------------------------------------------------


def test_pending_confirmations_are_the_callers_tenants_only(tenants: Tenants) -> None:
    items = tenants.items
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        with tenants.host(tenant) as client:
            listed = client.get("/v1/confirmations")
            assert listed.status_code == 200
            ids = {p["operation_id"] for p in listed.json()}
            assert items.held[tenant] in ids and items.held[other] not in ids
            assert {p["actor"]["tenant"] for p in listed.json()} == {tenant}
    with tenants.unscoped_host() as client:
        listed = client.get("/v1/confirmations")
        assert listed.status_code == 200 and listed.json() == []


def test_the_review_queue_lists_the_callers_tenants_only(tenants: Tenants) -> None:
    items = tenants.items
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        with tenants.host(tenant) as client:
            for status in ("", "?status=open"):
                ids = {i["review_id"] for i in client.get(f"/v1/reviews{status}").json()}
                assert items.reviews[tenant] in ids and items.reviews[other] not in ids
    with tenants.unscoped_host() as client:
        assert client.get("/v1/reviews").json() == []


@pytest.mark.parametrize("path", ["/v1/claim", "/v1/finish", "/v1/reconcile"])
def test_another_tenants_operation_reads_as_missing(tenants: Tenants, path: str) -> None:
    items = tenants.items
    own, other = items.review_operations["acme"], items.review_operations["globex"]

    def ask(client: httpx.Client, operation: str, actor: dict[str, Any]) -> httpx.Response:
        body: dict[str, Any] = {"operation_id": operation, "actor": actor, "session": SESSION}
        if path != "/v1/claim":
            body["lease"] = "host:not-the-lease:0"
        if path == "/v1/reconcile":
            body["found"] = None
        return client.post(path, json=body)

    with tenants.host("acme") as client:
        missing = ask(client, MISSING_OPERATION, DANA)
        assert missing.status_code == 404
        same_as_missing(ask(client, other, DANA), missing, other, MISSING_OPERATION)
        # naming the other tenant's actor is refused before anything is looked up
        refused = ask(client, other, GLOBEX)
        assert refused.status_code == 403
        same_as_missing(refused, ask(client, MISSING_OPERATION, GLOBEX), other,
                        MISSING_OPERATION)
        # the own tenant's operation is found (the step itself may not apply: 200 or 409)
        assert ask(client, own, DANA).status_code in (200, 409)
    with tenants.unscoped_host() as client:
        missing = ask(client, MISSING_OPERATION, {"id": "host-z"})
        same_as_missing(ask(client, own, {"id": "host-z"}), missing, own, MISSING_OPERATION)


def fake_confirmation(operation: str) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(
        {"op": operation, "exp": int(time.time()) + 600}).encode()).rstrip(b"=").decode()
    return f"{payload}.c2lnbmF0dXJl"


def test_another_tenants_confirmation_reads_as_missing(tenants: Tenants) -> None:
    items = tenants.items

    def confirm(client: httpx.Client, confirmation: str,
                actor: dict[str, Any] = DANA) -> dict[str, Any]:
        answer = client.post("/v1/confirm", json={
            "confirmation_token": confirmation, "actor": actor, "session": SESSION,
            "confirmed_by": "dana"})
        assert answer.status_code == 200
        decision: dict[str, Any] = answer.json()["decision"]
        return {key: decision[key] for key in ("route", "error_class", "agent_message",
                                               "user_message", "operation_id")}

    with tenants.host("acme") as client:
        missing = confirm(client, fake_confirmation(MISSING_OPERATION))
        assert missing["route"] == "refuse"
        assert confirm(client, items.tokens["globex"]) == missing
    with tenants.unscoped_host() as client:
        unpinned_actor = {**DANA, "id": "host-z"}
        assert confirm(client, items.tokens["acme"], unpinned_actor) == confirm(
            client, fake_confirmation(MISSING_OPERATION), unpinned_actor)
    with tenants.host("globex") as client:
        _, fresh = hold(client, GLOBEX)  # the fixture's drafts stay waiting for the page
        own = client.post("/v1/confirm", json={
            "confirmation_token": fresh, "actor": GLOBEX,
            "session": SESSION, "confirmed_by": "gus"}).json()
        assert own["action"] == "execute"


def test_take_and_resolve_stay_in_the_callers_tenant(tenants: Tenants) -> None:
    items = tenants.items
    with tenants.unscoped_host() as client:
        assert client.post("/v1/reviews/take").json() is None
        missing = client.post(f"/v1/reviews/{MISSING_REVIEW}/resolve",
                              json={"resolution": "failed", "note": "n"})
        same_as_missing(client.post(f"/v1/reviews/{items.reviews['acme']}/resolve",
                                    json={"resolution": "failed", "note": "n"}),
                        missing, items.reviews["acme"], MISSING_REVIEW)
    with tenants.host("acme") as client:
        missing = client.post(f"/v1/reviews/{MISSING_REVIEW}/resolve",
                              json={"resolution": "failed", "note": "n"})
        assert missing.status_code == 404
        crossed = client.post(f"/v1/reviews/{items.reviews['globex']}/resolve",
                              json={"resolution": "failed", "note": "n"})
        same_as_missing(crossed, missing, items.reviews["globex"], MISSING_REVIEW)
        taken = []
        while (item := client.post("/v1/reviews/take").json()) is not None:
            taken.append(item)
        assert items.reviews["acme"] in {i["review_id"] for i in taken}
        assert items.reviews["globex"] not in {i["review_id"] for i in taken}
        resolved = client.post(f"/v1/reviews/{items.reviews['acme']}/resolve",
                               json={"resolution": "failed", "note": "checked"})
        assert resolved.status_code == 200 and resolved.json()["resolved_by"] == "host-acme"
    with tenants.host("globex") as client:
        still_open = {i["review_id"] for i in client.get("/v1/reviews?status=open").json()}
        assert items.reviews["globex"] in still_open  # acme's takes never reached it
        taken_by_globex = client.post("/v1/reviews/take").json()
        assert taken_by_globex["review_id"] == items.reviews["globex"]


# The review page ------------------------------------------------------------------------------


def signed_in(server: Server, login: str) -> tuple[httpx.Client, str]:
    """A client with a session cookie for ``login``, and the session's CSRF token."""
    client = httpx.Client(base_url=server.url, timeout=30, follow_redirects=False)
    answer = client.post("/review/login", data={"login": login,
                                                 "password": REVIEWERS[login]})
    assert answer.status_code == 303, answer.text
    cookie = client.cookies["callgate_review"]
    payload = cookie.rsplit(".", 1)[0]
    csrf = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["c"]
    return client, str(csrf)


def test_the_page_shows_each_reviewer_their_scope_only(tenants: Tenants) -> None:
    items = tenants.items
    for login, tenant, other in (("erin", "acme", "globex"), ("gina", "globex", "acme")):
        client, _ = signed_in(tenants.pinned, login)
        with closing(client):
            index = client.get("/review").text
            assert items.held[tenant] in index and items.held[other] not in index
            # own: found; other: exactly the page a missing one gets
            assert client.get(f"/review/confirmations/{items.held[tenant]}").status_code == 200
            missing = client.get(f"/review/confirmations/{MISSING_OPERATION}")
            assert missing.status_code == 404
            same_as_missing(client.get(f"/review/confirmations/{items.held[other]}"),
                            missing, items.held[other], MISSING_OPERATION)
            missing_item = client.get(f"/review/items/{MISSING_REVIEW}")
            assert missing_item.status_code == 404
            same_as_missing(client.get(f"/review/items/{items.reviews[other]}"), missing_item,
                            items.reviews[other], MISSING_REVIEW)
            assert client.get(f"/review/items/{items.reviews[tenant]}").status_code == 200
    client, _ = signed_in(tenants.pinned, "nora")
    with closing(client):
        index = client.get("/review").text
        for tenant in ("acme", "globex"):
            assert items.held[tenant] not in index
            same_as_missing(client.get(f"/review/confirmations/{items.held[tenant]}"),
                            client.get(f"/review/confirmations/{MISSING_OPERATION}"),
                            items.held[tenant], MISSING_OPERATION)
            same_as_missing(client.get(f"/review/items/{items.reviews[tenant]}"),
                            client.get(f"/review/items/{MISSING_REVIEW}"),
                            items.reviews[tenant], MISSING_REVIEW)


def test_the_page_acts_only_in_the_reviewers_scope(tenants: Tenants) -> None:
    items = tenants.items
    fresh: dict[str, str] = {}
    for tenant in ("acme", "globex"):
        with tenants.host(tenant) as host:
            fresh[tenant], _ = hold(host, actor_of(tenant))
    for login in ("erin", "nora"):  # erin reviews acme only; nora has no scope
        client, csrf = signed_in(tenants.pinned, login)
        with closing(client):
            for verdict in ("approve", "decline"):
                missing = client.post(f"/review/confirmations/{MISSING_OPERATION}/{verdict}",
                                      data={"csrf": csrf, "note": "x"})
                assert missing.status_code == 404
                same_as_missing(client.post(
                    f"/review/confirmations/{fresh['globex']}/{verdict}",
                    data={"csrf": csrf, "note": "x"}), missing, fresh["globex"],
                    MISSING_OPERATION)
            missing = client.post(f"/review/items/{MISSING_REVIEW}/resolve",
                                  data={"csrf": csrf, "resolution": "failed", "note": "x"})
            same_as_missing(client.post(f"/review/items/{items.reviews['globex']}/resolve",
                                        data={"csrf": csrf, "resolution": "failed",
                                              "note": "x"}),
                            missing, items.reviews["globex"], MISSING_REVIEW)
            took = client.post("/review/take", data={"csrf": csrf})
            assert took.status_code == 303
            assert items.reviews["globex"] not in took.headers["location"]
    client, csrf = signed_in(tenants.pinned, "erin")
    with closing(client):
        approved = client.post(f"/review/confirmations/{fresh['acme']}/approve",
                               data={"csrf": csrf, "note": "ok"})
        assert approved.status_code == 303 and "approved" in approved.headers["location"]
    with tenants.host("globex") as host:  # globex's draft is still waiting, untouched
        waiting = {p["operation_id"] for p in host.get("/v1/confirmations").json()}
        assert fresh["globex"] in waiting


def test_unscoped_all_lets_a_single_tenant_deployment_see_everything(
        documents: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """``--unscoped all``: a reviewer without `scope:` sees every tenant's drafts."""
    store = f"sqlite:///{tmp_path_factory.mktemp('scope-all') / 'receipts.db'}"
    server = start_server(documents, store, "--unscoped", "all")
    try:
        held = {}
        for tenant in ("acme", "globex"):
            with httpx.Client(base_url=server.url, timeout=30, headers={
                    "authorization": f"Bearer {token('h', tenant)}"}) as host:
                held[tenant], _ = hold(host, actor_of(tenant))
        client, _ = signed_in(server, "nora")
        with closing(client):
            index = client.get("/review").text
            assert held["acme"] in index and held["globex"] in index
    finally:
        server.stop()


def test_an_id_only_token_is_scoped_to_its_own_actor(tenants: Tenants) -> None:
    """A token that pins the actor's id (no tenant) sees that actor's writes only."""
    own = jwt.encode({"sub": DANA["id"], "tenant": "acme", "exp": int(time.time()) + 600},
                     TOKEN_SECRET, algorithm="HS256")
    with httpx.Client(base_url=tenants.unpinned.url, timeout=30,
                      headers={"authorization": f"Bearer {own}"}) as client:
        ids = {p["operation_id"] for p in client.get("/v1/confirmations").json()}
        assert tenants.items.held["acme"] in ids and tenants.items.held["globex"] not in ids


def test_a_reused_request_id_never_serves_another_actors_receipt(tenants: Tenants) -> None:
    """An operation ID is made from the request ID and the call: another actor (of the
    same tenant or another) sending the same call under the same request ID is refused,
    never given the receipt, nor allowed to take the claim over."""
    request_id = f"shared-{uuid.uuid4().hex[:8]}"
    secret = f"dana-only-{uuid.uuid4().hex}"
    call = payment(ON_FILE["acme"], amount=42)
    with tenants.host("acme") as client:
        step = client.post("/v1/claim", json={"model_output": call, "actor": DANA,
                                              "session": SESSION, "request_id": request_id})
        assert step.json()["action"] == "execute"
        done = client.post("/v1/finish", json={
            "operation_id": step.json()["operation_id"], "lease": step.json()["lease"],
            "actor": DANA, "result": {"iban": ON_FILE["acme"], "id": secret}}).json()
        assert done["decision"]["route"] == "return_result"
        lee = {**DANA, "id": "U-8"}
        reused = client.post("/v1/claim", json={"model_output": call, "actor": lee,
                                                "session": SESSION, "request_id": request_id})
        assert reused.status_code == 409 and secret not in reused.text
        assert "already names another call" in reused.json()["detail"]
    with tenants.host("globex") as client:
        crossed = client.post("/v1/claim", json={"model_output": call, "actor": GLOBEX,
                                                 "session": SESSION,
                                                 "request_id": request_id})
        assert secret not in crossed.text


def test_two_tenants_with_the_same_request_id_and_call_never_meet(tenants: Tenants) -> None:
    """The same request ID and the same arguments from two tenants are two operations: each
    tenant's held write gets its own operation and token, confirms and runs once; neither
    learns of the other's (the answer is the one a tenant gets when the other never sent
    it) nor blocks it. A tenant's IDs are the same for every token of that tenant."""
    request_id = f"r1-{uuid.uuid4().hex[:8]}"
    call = payment("GB33BUKB20201555555555", 300)

    def decide(tenant: str, rid: str) -> dict[str, Any]:
        with tenants.host(tenant) as client:
            answer = client.post("/v1/decide", json={
                "model_output": call, "actor": actor_of(tenant), "session": SESSION,
                "request_id": rid, "conversation": injected_conversation()})
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def shape(decision: dict[str, Any]) -> dict[str, Any]:
        return {key: decision[key] for key in ("route", "error_class", "agent_message")} | {
            "token": bool(decision.get("confirmation_token"))}

    acme = decide("acme", request_id)
    assert acme["route"] == "await_confirmation"
    globex = decide("globex", request_id)
    fresh = decide("globex", f"never-sent-{uuid.uuid4().hex[:8]}")
    assert globex["operation_id"] != acme["operation_id"]
    assert shape(globex) == shape(fresh) == shape(acme)
    assert decide("acme", request_id)["operation_id"] == acme["operation_id"]  # stable

    # each confirms its own: both execute, once each, and finish independently
    for tenant, decided in (("globex", globex), ("acme", acme)):
        with tenants.host(tenant) as client:
            step = client.post("/v1/confirm", json={
                "confirmation_token": decided["confirmation_token"],
                "actor": actor_of(tenant), "session": SESSION, "confirmed_by": "p"}).json()
            assert step["action"] == "execute", step
            assert step["operation_id"] == decided["operation_id"]
            done = client.post("/v1/finish", json={
                "operation_id": step["operation_id"], "lease": step["lease"],
                "actor": actor_of(tenant), "result": {
                    "iban": "GB33BUKB20201555555555", "id": f"tx-{tenant}"}}).json()
            assert done["decision"]["route"] == "return_result", done
            again = client.post("/v1/claim", json={"operation_id": step["operation_id"],
                                                   "actor": actor_of(tenant),
                                                   "session": SESSION}).json()
            assert again["action"] == "done" and again["decision"]["result"]["id"] == \
                f"tx-{tenant}"

    # a write acme settled is no oracle: globex sending its request ID and call is held
    # afresh, exactly as an ID nobody sent
    settled = f"settled-{uuid.uuid4().hex[:8]}"
    held = decide("acme", settled)
    with tenants.host("acme") as client:
        step = client.post("/v1/confirm", json={
            "confirmation_token": held["confirmation_token"], "actor": DANA,
            "session": SESSION, "confirmed_by": "p"}).json()
        client.post("/v1/finish", json={"operation_id": step["operation_id"],
                                        "lease": step["lease"], "actor": DANA,
                                        "result": {"iban": "GB33BUKB20201555555555"}})
    assert decide("acme", settled).get("confirmation_token") is None  # acme's: settled
    assert shape(decide("globex", settled)) == shape(fresh)

    # the claim path: the same request ID from both tenants, each an allowed payment
    claim_id = f"c1-{uuid.uuid4().hex[:8]}"
    steps = {}
    for tenant in ("acme", "globex"):
        with tenants.host(tenant) as client:
            steps[tenant] = client.post("/v1/claim", json={
                "model_output": payment(ON_FILE[tenant], 42), "actor": actor_of(tenant),
                "session": SESSION, "request_id": claim_id}).json()
            assert steps[tenant]["action"] == "execute", steps[tenant]
    assert steps["acme"]["operation_id"] != steps["globex"]["operation_id"]
    # another token of acme's (another host, the same pinned tenant): the same operation
    with httpx.Client(base_url=tenants.pinned.url, timeout=30, headers={
            "authorization": f"Bearer {token('host-acme-2', 'acme')}"}) as client:
        replayed = client.post("/v1/claim", json={
            "model_output": payment(ON_FILE["acme"], 42), "actor": DANA, "session": SESSION,
            "request_id": claim_id}).json()
    assert replayed["operation_id"] == steps["acme"]["operation_id"]
    assert replayed["action"] != "execute"  # exactly once: acme's lease still holds it


def test_a_held_write_is_never_handed_to_another_actor_of_the_tenant(tenants: Tenants) -> None:
    """Within one tenant's namespace, a second actor deciding the same held call under the
    same request ID is refused (409): it never gets the first actor's operation or token."""
    request_id = f"held-{uuid.uuid4().hex[:8]}"
    body = {"model_output": payment("GB33BUKB20201555555555", 300), "session": SESSION,
            "request_id": request_id, "conversation": injected_conversation()}
    with tenants.host("acme") as client:
        dana = client.post("/v1/decide", json={**body, "actor": DANA}).json()
        assert dana["route"] == "await_confirmation"
        lee = client.post("/v1/decide", json={**body, "actor": {**DANA, "id": "U-8"}})
        assert lee.status_code == 409 and "already names another call" in lee.json()["detail"]
        assert dana["operation_id"] not in lee.text
        assert dana["confirmation_token"] not in lee.text
