"""Hot reload of ``callgate gateway --bundle``, end to end: a real gateway process over stdio
(the official MCP SDK's client in front, the notes upstream behind), its bundle a file the
test publishes anew. A new signed bundle decides the next call; a call in flight finishes on
the bundle it started with; a tampered bundle is refused on stderr and the old one serves
on; every decision's log line records the digest of the bundle that made it, and the chain
verifies."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters, stdio_client

from callgate_rules.cli import main
from callgate_rules.decision_log import line_hash
from callgate_rules.store import open_store

from .conftest import ACTOR_FILE, CONFIG, GATEWAY, Upstream, meta_of, unique, upstream_command

OPENSSL = shutil.which("openssl")
pytestmark = [pytest.mark.anyio, pytest.mark.integration,
              pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")]
POLL = 0.2  # seconds between two looks at the bundle file


def digest_of(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("signer")
    private, public = folder / "signer.pem", folder / "signer.pub"
    subprocess.run([OPENSSL or "openssl", "genpkey", "-algorithm", "ed25519", "-out",
                    str(private)], check=True, capture_output=True)
    subprocess.run([OPENSSL or "openssl", "pkey", "-in", str(private), "-pubout", "-out",
                    str(public)], check=True, capture_output=True)
    return private, public


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory,
            signer: tuple[Path, Path]) -> dict[str, Path]:
    """``open``: the gateway tests' documents; ``readers-only``: the same, except that only
    a reader may use a notebook (so the writer U-1 is refused createNote and getNotebook);
    ``unfit``: ``open`` and a contract for a tool the upstream does not have;
    ``tampered``: ``open`` with one byte of a document flipped after signing."""
    made = {}
    for name in ("open", "readers-only", "unfit"):
        folder = tmp_path_factory.mktemp(name)
        shutil.copytree(CONFIG / "contracts", folder / "contracts")
        shutil.copytree(CONFIG / "policies", folder / "policies")
        if name == "readers-only":
            access = folder / "policies" / "access.yaml"
            access.write_text(access.read_text().replace(
                "when: notebook.tenant == actor.tenant",
                'when: notebook.tenant == actor.tenant && actor.role == "reader"'))
        if name == "unfit":
            create = (folder / "contracts" / "createNote.yaml").read_text()
            (folder / "contracts" / "archiveNote.yaml").write_text(
                create.replace("name: createNote", "name: archiveNote"))
        output = folder / "policy.tar"
        built = CliRunner().invoke(main, ["bundle", "build", str(folder / "contracts"),
                                          str(folder / "policies"), "-o", str(output),
                                          "--key", str(signer[0])])
        assert built.exit_code == 0, built.output
        made[name] = output
    data = bytearray(made["open"].read_bytes())
    data[data.index(b"description: Create a note")] ^= 0x01
    tampered = made["open"].with_name("tampered.tar")
    tampered.write_bytes(bytes(data))
    made["tampered"] = tampered
    return made


def publish(source: Path, target: Path) -> None:
    """As a publisher should: a new file renamed over the old one."""
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:6]}")
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)


class Served:
    """A gateway process on a published bundle, and what it leaves behind."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.published = tmp / "policy.tar"
        self.log = tmp / "decisions.jsonl"
        self.stderr = tmp / "gateway.log"
        self.store = f"sqlite:///{tmp / 'gateway.sqlite3'}"
        self.upstream = Upstream(tmp / "state")
        self.session: ClientSession

    def said(self) -> str:
        return self.stderr.read_text() if self.stderr.exists() else ""

    async def create(self, title: str) -> Any:
        return await self.session.call_tool(
            "createNote", {"notebookId": "NB-1", "title": title},
            meta={"callgate/request_id": unique("r")})

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@asynccontextmanager
async def gateway(tmp: Path, signer: tuple[Path, Path], first: Path) -> AsyncIterator[Served]:
    served = Served(tmp)
    publish(first, served.published)
    parameters = StdioServerParameters(command=GATEWAY[0], args=[
        *GATEWAY[1:], "--upstream-command", upstream_command(served.upstream.state),
        "--store", served.store, "--actor", str(ACTOR_FILE), "--bundle", str(served.published),
        "--public-key", str(signer[1]), "--bundle-poll", str(POLL),
        "--decision-log", str(served.log), "--decision-log-key", str(signer[0]),
        "--checkpoint-every", "1000"], cwd=str(tmp))
    with served.stderr.open("a") as errlog:
        async with stdio_client(parameters, errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                served.session = session
                yield served


async def until(check: Any, seconds: float = 30.0) -> float:
    """Seconds until ``await check()`` is true (fails after ``seconds``)."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if await check():
            return time.monotonic() - started
        await anyio.sleep(0.02)
    raise AssertionError(f"not within {seconds}s")


async def test_a_new_bundle_decides_the_next_call_and_a_tampered_one_is_refused(
        tmp_path: Path, signer: tuple[Path, Path], bundles: dict[str, Path]) -> None:
    async with gateway(tmp_path, signer, bundles["open"]) as served:
        allowed = await served.create(unique("before"))
        assert not allowed.is_error, served.said()

        publish(bundles["readers-only"], served.published)
        published_at = time.monotonic()

        async def refused() -> bool:
            result = await served.create(unique("after"))
            return bool(result.is_error and
                        meta_of(result).get("callgate/error_class") == "forbidden")

        await until(refused)
        elapsed = time.monotonic() - published_at
        print(f"published → the gateway deciding by it: {elapsed:.3f}s (poll {POLL}s)")
        assert elapsed < POLL + 2.0
        assert f"now serving {digest_of(bundles['readers-only'])}" in served.said()

        publish(bundles["tampered"], served.published)
        await until(lambda: anyio.to_thread.run_sync(
            lambda: "changed since it was signed" in served.said()))
        still = await served.create(unique("tampered"))
        assert meta_of(still)["callgate/error_class"] == "forbidden"  # readers-only serves on
        refusal = next(line for line in served.said().splitlines()
                       if "changed since it was signed" in line)
        assert refusal.startswith("callgate gateway: bundle ")
        assert f"still serving {digest_of(bundles['readers-only'])}" in refusal
        assert served.said().count("changed since it was signed") == 1  # once, not per poll

    decisions = [line for line in served.lines() if "checkpoint" not in line]
    by_bundle = {digest_of(bundles[name]): name for name in ("open", "readers-only")}
    made_by = [(by_bundle[line["bundle"]], line["route"]) for line in decisions]
    assert made_by[0] == ("open", "return_result")
    assert made_by[-1] == ("readers-only", "refuse")
    assert all(route == "refuse" for name, route in made_by if name == "readers-only")
    assert "checkpoint" in served.lines()[-1]  # the gateway's shutdown closed the log
    verified = CliRunner().invoke(main, ["log", "verify", str(served.log), "--public-key",
                                         str(signer[1])])
    assert verified.exit_code == 0, verified.output


async def test_a_call_in_flight_finishes_on_the_bundle_it_started_with(
        tmp_path: Path, signer: tuple[Path, Path], bundles: dict[str, Path]) -> None:
    async with gateway(tmp_path, signer, bundles["open"]) as served:
        served.upstream.slow_writes(0.8)  # the write is under way while the bundle changes
        title = unique("in-flight")
        results: list[Any] = []
        async with anyio.create_task_group() as group:
            async def call() -> None:
                results.append(await served.create(title))

            group.start_soon(call)
            await until(lambda: anyio.to_thread.run_sync(
                lambda: bool(served.upstream.calls("createNote", title=title))))
            publish(bundles["readers-only"], served.published)
            await until(lambda: anyio.to_thread.run_sync(
                lambda: "now serving" in served.said()))
            assert not results, "the write ended before the new bundle was taken"
        (served.upstream.state / "slow").unlink()
        assert not results[0].is_error, served.said()
        after = await served.create(unique("after"))
        assert meta_of(after)["callgate/error_class"] == "forbidden"
    first = next(line for line in served.lines() if line.get("route") == "return_result")
    assert first["bundle"] == digest_of(bundles["open"])
    assert len(served.upstream.notes(title)) == 1


async def test_the_receipt_of_an_executed_write_names_its_log_line(
        tmp_path: Path, signer: tuple[Path, Path], bundles: dict[str, Path]) -> None:
    async with gateway(tmp_path, signer, bundles["open"]) as served:
        written = await served.create(unique("linked"))
        again = await served.session.call_tool(
            "createNote", {"notebookId": "NB-1", "title": unique("other")})
    operation = meta_of(written)["callgate/operation_id"]
    text = [line for line in served.log.read_text().splitlines()
            if json.loads(line).get("operation_id") == operation]
    assert len(text) == 1
    with open_store(served.store) as store:
        receipt = store.get(operation)
        assert receipt is not None and receipt.log_line == line_hash(text[0])
        other = store.get(meta_of(again)["callgate/operation_id"])
        assert other is not None and other.log_line is not None
    checked = CliRunner().invoke(main, ["log", "verify", str(served.log), "--public-key",
                                        str(signer[1]), "--store", served.store])
    assert checked.exit_code == 0, checked.output
    assert "2 receipt(s) name their line" in checked.output


async def test_a_bundle_the_upstream_cannot_serve_keeps_the_old_one(
        tmp_path: Path, signer: tuple[Path, Path], bundles: dict[str, Path]) -> None:
    async with gateway(tmp_path, signer, bundles["open"]) as served:
        publish(bundles["unfit"], served.published)
        await until(lambda: anyio.to_thread.run_sync(
            lambda: "cannot serve it" in served.said()))
        still = await served.create(unique("still"))
        assert not still.is_error, served.said()
        offered = {tool.name for tool in (await served.session.list_tools()).tools}
    refusal = next(line for line in served.said().splitlines() if "cannot serve it" in line)
    assert "the upstream has no tool 'archiveNote'" in refusal
    assert f"still serving {digest_of(bundles['open'])}" in refusal
    assert "archiveNote" not in offered
