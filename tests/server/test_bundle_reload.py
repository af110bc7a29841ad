"""Hot reload of ``callgate serve --bundle``: a new bundle is verified and compiled off the
decision path and swapped in whole; a broken one keeps the old one serving (log, metric,
/readyz); under load no request fails and no decision mixes two bundles; two real
instances behind one bundle URL converge within a poll interval."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("cryptography", reason="the bundle extra: pip install 'callgate-rules[bundle]'")
pytest.importorskip("fastapi", reason="the server extra: pip install 'callgate-rules[server]'")

import httpx  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from callgate_rules.cli import main  # noqa: E402
from callgate_rules.documents.bundle import (  # noqa: E402
    DOCUMENTS,
    MANIFEST,
    SIGNATURE,
    BundleFile,
    Manifest,
    _write_tar,
    open_bundle,
)
from callgate_rules.server import ServiceSettings, create_app  # noqa: E402
from callgate_rules.signing import load_private_key  # noqa: E402
from tests.documents.test_bundle import free_port, wait_for  # noqa: E402  (the same server helpers)

REPO = Path(__file__).resolve().parents[2]
OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")
DANA = {"id": "U-7", "tenant": "acme", "role": "agent", "teams": ["billing"],
        "organizations": ["org-northwind"]}
TICKET = {"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}}


def digest_of(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("keys")
    private, public = folder / "signer.pem", folder / "signer.pub"
    subprocess.run([OPENSSL, "genpkey", "-algorithm", "ed25519", "-out", str(private)],
                   check=True, capture_output=True)
    subprocess.run([OPENSSL, "pkey", "-in", str(private), "-pubout", "-out", str(public)],
                   check=True, capture_output=True)
    return private, public


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory,
             keys: tuple[Path, Path]) -> dict[str, Path]:
    """Two signed bundles that differ in getTicketStatus's version (1.0.1, 1.0.2)."""
    made = {}
    for version in ("1.0.1", "1.0.2"):
        folder = tmp_path_factory.mktemp(f"v{version}")
        shutil.copytree(REPO / "contracts", folder / "contracts")
        shutil.copytree(REPO / "policies", folder / "policies")
        contract = folder / "contracts" / "getTicketStatus.yaml"
        contract.write_text(contract.read_text().replace('version: "1.0.1"',
                                                         f'version: "{version}"'))
        output = folder / "policy.tar"
        result = CliRunner().invoke(main, ["bundle", "build", str(folder / "contracts"),
                                           str(folder / "policies"), "-o", str(output),
                                           "--key", str(keys[0])])
        assert result.exit_code == 0, result.output
        made[version] = output
    return made


def publish(source: Path, target: Path) -> None:
    """As a publisher should: a new file renamed over the old one."""
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:6]}")
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)


def signed_but_broken(keys: tuple[Path, Path], target: Path) -> None:
    """A correctly signed bundle whose documents do not compile (as a bundle built by
    another callgate version could be)."""
    key = load_private_key(keys[0])
    text = (REPO / "contracts" / "getTicketStatus.yaml").read_text().replace(
        "effect: read", "effect: sometimes").encode()
    name = "contracts/getTicketStatus.yaml"
    from callgate_rules.signing import key_id

    manifest = Manifest("0.1.0", "2026-12-05T00:00:00Z", key_id(key.public_key()),
                        (BundleFile(name, hashlib.sha256(text).hexdigest(), len(text)),), ())
    encoded = manifest.encoded()
    _write_tar(target, [(MANIFEST, encoded), (SIGNATURE, key.sign(encoded)),
                        (DOCUMENTS + name, text)], 0)


def decide(client: TestClient | httpx.Client) -> dict[str, object]:
    answer = client.post("/v1/decide", json={
        "model_output": TICKET, "actor": DANA, "session": {"authenticated": True},
        "request_id": f"req-{uuid.uuid4().hex[:10]}"})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.fixture
def served(tmp_path: Path, keys: tuple[Path, Path],
           versions: dict[str, Path]) -> Iterator[tuple[TestClient, Path, Path]]:
    """The service on bundle 1.0.1, published at a path; polled by hand (``poll()``)."""
    published = tmp_path / "policy.tar"
    publish(versions["1.0.1"], published)
    log = tmp_path / "decisions.jsonl"
    settings = ServiceSettings(
        paths=(), store=f"sqlite:///{tmp_path / 'r.db'}",
        world=str(REPO / "examples" / "world.yaml"), decision_log=str(log),
        bundle=open_bundle(published, keys[1]), bundle_location=str(published),
        bundle_public_key=str(keys[1]), bundle_poll=3600)  # the test polls, not the thread
    with TestClient(create_app(settings)) as client:
        yield client, published, log


def test_a_new_bundle_is_swapped_in_and_recorded(
        served: tuple[TestClient, Path, Path], versions: dict[str, Path]) -> None:
    client, published, log = served
    watch = service_of(client).bundle_watch  # type: ignore[attr-defined]
    assert decide(client)["contract_version"] == "1.0.1"
    assert watch.poll() == "unchanged"
    publish(versions["1.0.2"], published)
    assert watch.poll() == "reloaded"
    assert decide(client)["contract_version"] == "1.0.2"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["contract_version"], line["bundle"]) for line in lines] == [
        ("1.0.1", digest_of(versions["1.0.1"])), ("1.0.2", digest_of(versions["1.0.2"]))]
    ready = client.get("/readyz").json()
    assert ready == {"status": "ready", "bundle": digest_of(versions["1.0.2"])}
    assert 'callgate_bundle_reloads_total{outcome="reloaded"} 1.0' in client.get("/metrics").text


def service_of(client: TestClient) -> object:
    app = client.app
    while not hasattr(app, "state"):  # the guards around the FastAPI application
        app = app.app  # type: ignore[attr-defined]
    return app.state.service


@pytest.mark.parametrize("breakage", ["tampered", "wrong documents", "not a bundle"])
def test_a_broken_bundle_keeps_the_old_one_serving(
        served: tuple[TestClient, Path, Path], versions: dict[str, Path],
        keys: tuple[Path, Path], tmp_path: Path, breakage: str,
        caplog: pytest.LogCaptureFixture) -> None:
    client, published, _ = served
    watch = service_of(client).bundle_watch  # type: ignore[attr-defined]
    broken = tmp_path / "broken.tar"
    if breakage == "tampered":
        data = bytearray(versions["1.0.2"].read_bytes())
        data[data.index(b"recipientIban")] ^= 0x01
        broken.write_bytes(bytes(data))
        said = "changed since it was signed"
    elif breakage == "wrong documents":
        signed_but_broken(keys, broken)
        said = "error(s) in its documents"
    else:
        broken.write_bytes(b"<html>502 Bad Gateway</html>")
        said = "not a readable tar"
    publish(broken, published)
    with caplog.at_level("ERROR", logger="callgate.bundles"):
        assert watch.poll() == "refused"
        assert watch.poll() == "unchanged"  # said once, not at every poll
    assert [r.getMessage() for r in caplog.records if said in r.getMessage()] and \
        len(caplog.records) == 1
    assert "still serving " + digest_of(versions["1.0.1"]) in caplog.records[0].getMessage()
    assert decide(client)["contract_version"] == "1.0.1"
    ready = client.get("/readyz")
    assert ready.status_code == 200 and said in ready.json()["bundle_refused"]
    assert 'callgate_bundle_reloads_total{outcome="refused"} 1.0' in client.get("/metrics").text
    publish(versions["1.0.2"], published)  # a good one again: taken, the refusal cleared
    assert watch.poll() == "reloaded" and "bundle_refused" not in client.get("/readyz").json()


def test_under_load_no_request_fails_and_no_decision_mixes_two_bundles(
        served: tuple[TestClient, Path, Path], versions: dict[str, Path]) -> None:
    client, published, log = served
    watch = service_of(client).bundle_watch  # type: ignore[attr-defined]
    done, failures, answered = threading.Event(), [], []

    def hammer() -> None:
        while not done.is_set():
            try:
                answered.append(decide(client)["contract_version"])
            except AssertionError as error:  # a failed request
                failures.append(str(error))

    workers = [threading.Thread(target=hammer) for _ in range(4)]
    for worker in workers:
        worker.start()
    try:
        for round_ in range(6):
            publish(versions["1.0.2" if round_ % 2 == 0 else "1.0.1"], published)
            assert watch.poll() == "reloaded"
            time.sleep(0.05)
    finally:
        done.set()
        for worker in workers:
            worker.join()
    assert not failures
    assert {"1.0.1", "1.0.2"} <= set(answered)
    expected = {digest_of(versions[v]): v for v in versions}
    for line in map(json.loads, log.read_text().splitlines()):
        assert expected[line["bundle"]] == line["contract_version"]
        assert line["versions"]["ToolContract/getTicketStatus"] == line["contract_version"]


# Two real instances behind one bundle URL ---------------------------------------------------


POLL = 0.5


@pytest.mark.integration
def test_two_instances_behind_one_url_converge_within_a_poll_interval(
        tmp_path: Path, keys: tuple[Path, Path], versions: dict[str, Path]) -> None:
    published = tmp_path / "site"
    published.mkdir()
    publish(versions["1.0.1"], published / "policy.tar")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        files_port = free_port()
        with (tmp_path / "files.log").open("wb") as output:
            files = subprocess.Popen([sys.executable, "-m", "http.server", str(files_port),
                                      "--bind", "127.0.0.1"], cwd=published, stdout=output,
                                     stderr=subprocess.STDOUT)
        processes.append(files)
        url = f"http://127.0.0.1:{files_port}/policy.tar"
        wait_for(url, files, tmp_path / "files.log")
        instances = []
        for number in range(2):
            port, log = free_port(), tmp_path / f"serve-{number}.log"
            with log.open("wb") as output:
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "callgate_rules.cli", "serve", "--no-auth",
                     "--http", f"127.0.0.1:{port}",
                     "--store", f"sqlite:///{tmp_path / 'shared.db'}",
                     "--world", str(REPO / "examples" / "world.yaml"), "--bundle", url,
                     "--public-key", str(keys[1]), "--bundle-poll", str(POLL)],
                    cwd=tmp_path, stdout=output, stderr=subprocess.STDOUT))
            wait_for(f"http://127.0.0.1:{port}/healthz", processes[-1], log)
            instances.append(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30))
        assert [decide(i)["contract_version"] for i in instances] == ["1.0.1", "1.0.1"]
        time.sleep(1.1)  # the static server's Last-Modified counts whole seconds
        publish(versions["1.0.2"], published / "policy.tar")
        published_at = time.monotonic()
        switched: dict[int, float] = {}
        while len(switched) < 2 and time.monotonic() - published_at < 30:
            for number, instance in enumerate(instances):
                if number not in switched and decide(instance)["contract_version"] == "1.0.2":
                    switched[number] = time.monotonic() - published_at
            time.sleep(0.02)
        slowest = max(switched.values(), default=float("inf"))
        print(f"published → every instance deciding by it: {slowest:.3f}s (poll {POLL}s)")
        assert len(switched) == 2
        # one poll interval, and the time a loaded machine takes to fetch and compile
        assert slowest < POLL + 2.0, switched
        for instance in instances:
            assert instance.get("/readyz").json()["bundle"] == digest_of(versions["1.0.2"])
    finally:
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
