"""Closing: ``Gate``, ``AsyncGate`` and the receipt stores close cleanly and only once, and a
gate closes only the store it opened itself (from a URL), never one the caller passed in."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from callgate_rules.errors import StoreError
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store import open_store

REPO = Path(__file__).resolve().parents[2]


def _gate(store: object) -> Gate:
    return Gate.from_paths(REPO / "contracts", REPO / "policies", store=store)


@pytest.mark.parametrize("url", ["memory:", "sqlite:///{tmp}/r.sqlite3"])
def test_a_store_closes_at_the_end_of_its_with_block_and_twice_is_once(
        tmp_path: Path, url: str) -> None:
    with open_store(url.format(tmp=tmp_path)) as store:
        assert store.get("no-such-operation") is None
    with pytest.raises(StoreError, match="closed"):
        store.get("no-such-operation")
    store.close()  # idempotent


def test_a_gate_closes_the_store_it_opened_from_a_url(tmp_path: Path) -> None:
    with _gate(f"sqlite:///{tmp_path}/r.sqlite3") as gate:
        store = gate.store
        assert store.get("x") is None
    with pytest.raises(StoreError, match="closed"):
        store.get("x")
    gate.close()  # a second close does nothing


def test_a_gate_leaves_open_a_store_the_caller_passed_in(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/r.sqlite3")
    with _gate(store):
        pass
    assert store.get("x") is None  # still the caller's, still open
    store.close()


def test_an_async_gate_closes_with_async_with_and_aclose(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncGate.from_paths(REPO / "contracts", REPO / "policies",
                                        store=f"sqlite:///{tmp_path}/a.sqlite3") as gate:
            store = gate.gate.store
        with pytest.raises(StoreError, match="closed"):
            store.get("x")
        await gate.aclose()  # idempotent
        gate.close()
        passed = open_store("memory:")
        with AsyncGate.from_paths(REPO / "contracts", REPO / "policies", store=passed):
            pass
        assert passed.get("x") is None
    asyncio.run(scenario())


@pytest.mark.integration
def test_a_postgres_store_closes_once() -> None:
    url = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set")
    with open_store(url) as store:
        store.get("x")
    with pytest.raises(StoreError):
        store.get("x")
    store.close()


def test_the_service_closes_its_store_when_the_server_stops(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    import gc

    from starlette.testclient import TestClient

    from callgate_rules.server import ServiceSettings, create_app
    from callgate_rules.store.sqlite import SqliteStore

    url = f"sqlite:///{tmp_path / 'service.db'}"
    settings = ServiceSettings(paths=(str(REPO / "contracts"), str(REPO / "policies")),
                               store=url, world=str(REPO / "examples" / "world.yaml"))
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").status_code == 200
    [store] = [found for found in gc.get_objects()
               if isinstance(found, SqliteStore) and str(tmp_path) in found.url]
    with pytest.raises(StoreError, match="closed"):
        store.get("x")
