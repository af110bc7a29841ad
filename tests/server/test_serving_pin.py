"""A request decides wholly by the policy it started with: ``Service.run`` pins the
``Serving`` (hosted flow and look-ups, swapped together by a bundle reload) for the whole of
its worker's work, so a swap in between reaches the next request, never half of this one."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

pytest.importorskip("starlette", reason="the service needs the server extra (starlette)")

from callgate_rules.documents.compiler import load  # noqa: E402
from callgate_rules.pipeline.hosted import HostedWrites  # noqa: E402
from callgate_rules.server.bundles import Serving  # noqa: E402
from callgate_rules.server.records import LookupRecords  # noqa: E402
from callgate_rules.server.service import Service, ServiceSettings  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_a_swap_mid_request_reaches_only_the_next_request(tmp_path: Path) -> None:
    service = Service(ServiceSettings(
        paths=(str(REPO / "contracts"), str(REPO / "policies")),
        store=f"sqlite:///{tmp_path / 'r.db'}", world=str(REPO / "examples" / "world.yaml")))
    started = service.serving
    config = load([REPO / "contracts", REPO / "policies"])
    swapped = Serving(HostedWrites(config, store=service.store), LookupRecords(config))

    def work() -> tuple[object, object, object, object]:
        before = (service.hosted, service.lookups)
        service.serving = swapped  # a reload lands while this request runs
        return (*before, service.hosted, service.lookups)

    seen = anyio.run(service.run, "decide", work)
    assert seen == (started.hosted, started.lookups, started.hosted, started.lookups)
    assert (service.hosted, service.lookups) == (swapped.hosted, swapped.lookups)
    service.store.close()
