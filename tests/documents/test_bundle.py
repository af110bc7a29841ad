"""Signed policy bundles (``callgate bundle``, ``Gate.from_bundle``, ``serve --bundle``):
keys made by the real ``openssl`` command, bundles written to real files, and every kind of
tampering — a byte flipped, a file added, a file removed, another signer, no signature —
named, and refused by the service at start."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import uuid
from io import StringIO
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("cryptography", reason="the bundle extra is not installed: "
                                           "pip install 'callgate-rules[bundle]'")

from callgate_rules.cli import main  # noqa: E402
from callgate_rules.cli.bundle import verified_bundle  # noqa: E402
from callgate_rules.decision_log import DecisionLog  # noqa: E402
from callgate_rules.documents.bundle import (  # noqa: E402
    MAX_YAML_BYTES,
    BundleError,
    open_bundle,
    read_bundle,
)
from callgate_rules.errors import InputError  # noqa: E402
from callgate_rules.pipeline.gate import Gate  # noqa: E402
from callgate_rules.signing import key_id, load_public_key  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")
DANA = {"id": "U-7", "tenant": "acme", "role": "agent", "teams": ["billing"],
        "organizations": ["org-northwind"]}


def openssl_keys(folder: Path, name: str) -> tuple[Path, Path]:
    """An Ed25519 key pair written by the openssl command itself."""
    private, public = folder / f"{name}.pem", folder / f"{name}.pub"
    subprocess.run([OPENSSL, "genpkey", "-algorithm", "ed25519", "-out", str(private)],
                   check=True, capture_output=True)
    subprocess.run([OPENSSL, "pkey", "-in", str(private), "-pubout", "-out", str(public)],
                   check=True, capture_output=True)
    return private, public


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("keys")
    return {name: openssl_keys(folder, name) for name in ("signer", "other")}


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory,
           keys: dict[str, tuple[Path, Path]]) -> Path:
    folder = tmp_path_factory.mktemp("bundle")
    shutil.copytree(REPO / "contracts", folder / "contracts")
    shutil.copytree(REPO / "policies", folder / "policies")
    output = folder / "policy.tar"
    result = CliRunner().invoke(main, ["bundle", "build", str(folder / "contracts"),
                                       str(folder / "policies"), "-o", str(output),
                                       "--key", str(keys["signer"][0])])
    assert result.exit_code == 0, result.output
    assert "signed by sha256:" in result.output
    return output


def verify(bundle: Path, public: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["bundle", "verify", str(bundle),
                                       "--public-key", str(public)])
    return result.exit_code, result.output


def members_of(bundle: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(bundle, "r:") as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]


def write_tar(path: Path, members: list[tuple[str, bytes]],
              special: tuple[tarfile.TarInfo, ...] = ()) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in special:
            tar.addfile(info)
    return path


# Build, verify, inspect --------------------------------------------------------------------


def test_a_bundle_signed_by_openssl_keys_verifies(signed: Path,
                                                  keys: dict[str, tuple[Path, Path]]) -> None:
    code, output = verify(signed, keys["signer"][1])
    digest = "sha256:" + hashlib.sha256(signed.read_bytes()).hexdigest()
    assert code == 0 and f"verified, {digest}" in output


def test_the_key_id_is_the_digest_openssl_prints(keys: dict[str, tuple[Path, Path]]) -> None:
    der = subprocess.run([OPENSSL, "pkey", "-pubin", "-in", str(keys["signer"][1]),
                          "-outform", "DER"], check=True, capture_output=True).stdout
    assert key_id(load_public_key(keys["signer"][1])) == \
        "sha256:" + hashlib.sha256(der).hexdigest()


def test_inspect_prints_the_manifest(signed: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    result = CliRunner().invoke(main, ["bundle", "inspect", str(signed)])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["signed"] is True and shown["format"] == "callgate-bundle/1"
    assert shown["key_id"] == key_id(load_public_key(keys["signer"][1]))
    assert shown["callgate_version"] and shown["created"].endswith("Z")
    contract = (REPO / "contracts" / "sendPayment.yaml").read_bytes()
    assert {"path": "contracts/sendPayment.yaml", "size": len(contract),
            "sha256": hashlib.sha256(contract).hexdigest()} in shown["files"]
    assert {"file": "contracts/sendPayment.yaml", "kind": "ToolContract",
            "name": "sendPayment", "version": "1.1.1"} in shown["documents"]


def test_the_same_documents_make_the_same_bytes(tmp_path: Path,
                                                keys: dict[str, tuple[Path, Path]]) -> None:
    from datetime import UTC, datetime

    from callgate_rules.documents.bundle import build_bundle
    from callgate_rules.signing import load_private_key

    key = load_private_key(keys["signer"][0])
    when = datetime(2026, 12, 1, tzinfo=UTC)
    paths = [REPO / "contracts", REPO / "policies"]
    build_bundle(paths, tmp_path / "a.tar", key, now=when)
    build_bundle(paths, tmp_path / "b.tar", key, now=when)
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_documents_with_errors_are_not_bundled(tmp_path: Path,
                                               keys: dict[str, tuple[Path, Path]]) -> None:
    shutil.copytree(REPO / "contracts", tmp_path / "contracts")
    broken = tmp_path / "contracts" / "sendPayment.yaml"
    broken.write_text(broken.read_text().replace("effect: write", "effect: sometimes"))
    result = CliRunner().invoke(main, ["bundle", "build", str(tmp_path / "contracts"), "-o",
                                       str(tmp_path / "x.tar"), "--key", str(keys["signer"][0])])
    assert result.exit_code == 2 and "sendPayment.yaml" in result.output
    assert not (tmp_path / "x.tar").exists()


def test_build_needs_a_key_or_says_unsigned(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bundle", "build", str(REPO / "contracts"), "-o",
                                       str(tmp_path / "x.tar")])
    assert result.exit_code == 2 and "--key" in result.output


def test_a_key_that_is_not_ed25519_is_named(tmp_path: Path) -> None:
    rsa = tmp_path / "rsa.pem"
    subprocess.run([OPENSSL, "genpkey", "-algorithm", "rsa", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-out", str(rsa)], check=True, capture_output=True)
    result = CliRunner().invoke(main, ["bundle", "build", str(REPO / "contracts"), "-o",
                                       str(tmp_path / "x.tar"), "--key", str(rsa)])
    assert result.exit_code == 2 and "not an Ed25519" in result.output


# Tampering ---------------------------------------------------------------------------------


def test_one_byte_flipped_in_a_document_names_the_file(
        signed: Path, tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    data = bytearray(signed.read_bytes())
    at = data.index(b"recipientIban")  # inside documents/contracts/sendPayment.yaml
    data[at] ^= 0x01
    tampered = tmp_path / "flipped.tar"
    tampered.write_bytes(bytes(data))
    code, output = verify(tampered, keys["signer"][1])
    assert code == 1
    assert "documents/contracts/sendPayment.yaml changed since it was signed" in output


def test_one_byte_flipped_in_the_manifest_breaks_the_signature(
        signed: Path, tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    data = bytearray(signed.read_bytes())
    at = data.index(b'"created": "') + len(b'"created": "') + 3
    data[at] = ord("9") if data[at] != ord("9") else ord("8")
    tampered = tmp_path / "manifest.tar"
    tampered.write_bytes(bytes(data))
    code, output = verify(tampered, keys["signer"][1])
    assert code == 1 and "the signature does not verify" in output
    assert "the manifest or the signature was changed" in output


def test_a_file_added_after_signing_is_named(signed: Path, tmp_path: Path,
                                             keys: dict[str, tuple[Path, Path]]) -> None:
    extra = ("documents/policies/extra.yaml", b"apiVersion: callgate/v1\n")
    tampered = write_tar(tmp_path / "added.tar", [*members_of(signed), extra])
    code, output = verify(tampered, keys["signer"][1])
    assert code == 1
    assert "documents/policies/extra.yaml is not in the manifest" in output


def test_a_file_removed_is_named(signed: Path, tmp_path: Path,
                                 keys: dict[str, tuple[Path, Path]]) -> None:
    kept = [(n, d) for n, d in members_of(signed) if not n.endswith("access.yaml")]
    tampered = write_tar(tmp_path / "removed.tar", kept)
    code, output = verify(tampered, keys["signer"][1])
    assert code == 1
    assert "documents/policies/access.yaml is listed in the manifest but missing" in output


def test_another_signers_key_is_refused(signed: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    code, output = verify(signed, keys["other"][1])
    assert code == 1 and "does not verify with the public key" in output
    assert key_id(load_public_key(keys["signer"][1])) in output  # the key it names


def test_an_unsigned_bundle_is_refused_unless_allowed(
        tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    output = tmp_path / "unsigned.tar"
    result = CliRunner().invoke(main, ["bundle", "build", str(REPO / "contracts"),
                                       str(REPO / "policies"), "-o", str(output), "--unsigned"])
    assert result.exit_code == 0 and "unsigned" in result.output
    code, shown = verify(output, keys["signer"][1])
    assert code == 1 and "unsigned (no manifest.sig)" in shown
    assert open_bundle(output, None, allow_unsigned=True).signature is None


# Bounded reading ---------------------------------------------------------------------------


@pytest.mark.parametrize("name, problem", [
    ("../escape.yaml", "'..'"),
    ("documents/../../etc/passwd", "'..'"),
    ("/etc/passwd", "absolute"),
    ("documents\\win.yaml", "non-POSIX"),
])
def test_member_names_that_leave_the_bundle_are_refused(tmp_path: Path, name: str,
                                                         problem: str) -> None:
    bundle = write_tar(tmp_path / "names.tar", [(name, b"x")])
    with pytest.raises(BundleError, match=problem):
        read_bundle(bundle)


@pytest.mark.parametrize("kind, said", [(tarfile.SYMTYPE, "a symbolic link"),
                                        (tarfile.LNKTYPE, "a hard link"),
                                        (tarfile.CHRTYPE, "a device"),
                                        (tarfile.FIFOTYPE, "a FIFO"),
                                        (tarfile.DIRTYPE, "a folder")])
def test_links_devices_and_folders_are_refused(tmp_path: Path, kind: bytes, said: str) -> None:
    info = tarfile.TarInfo("documents/contracts/x.yaml")
    info.type = kind
    info.linkname = "/etc/passwd"
    bundle = write_tar(tmp_path / "special.tar", [], (info,))
    with pytest.raises(BundleError, match=said):
        read_bundle(bundle)


def test_a_member_past_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    bundle = write_tar(tmp_path / "big.tar",
                       [("documents/big.yaml", b"#" * (MAX_YAML_BYTES + 1))])
    with pytest.raises(BundleError, match="more than"):
        read_bundle(bundle)


def test_a_file_that_is_not_a_tar_is_named(tmp_path: Path) -> None:
    (tmp_path / "junk.tar").write_bytes(b"PK\x03\x04 not a tar at all" * 40)
    with pytest.raises(BundleError, match="not a readable tar"):
        read_bundle(tmp_path / "junk.tar")


# Loading: Gate.from_bundle, callgate serve --bundle -----------------------------------------


def test_gate_from_bundle_records_the_bundle_digest(signed: Path,
                                                    keys: dict[str, tuple[Path, Path]]) -> None:
    from callgate_rules.documents.source import read_data_file
    from callgate_rules.harness.world import WorldResolvers

    stream = StringIO()
    world = read_data_file(str(REPO / "examples" / "world.yaml"), "the world")
    gate = Gate.from_bundle(signed, public_key=keys["signer"][1],
                            resolvers=WorldResolvers(world), decision_log=DecisionLog(stream),
                            executors={"getTicketStatus": lambda request: {"status": "open"}},
                            store="memory://")
    decision = gate.handle({"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}},
                           actor=DANA, request_id="r-1", session={"authenticated": True})
    assert decision.route == "return_result" and decision.allowed, decision.log
    line = json.loads(stream.getvalue().splitlines()[0])
    assert line["bundle"] == "sha256:" + hashlib.sha256(signed.read_bytes()).hexdigest()
    assert line["versions"]["ToolContract/getTicketStatus"] == "1.0.1"


def test_gate_from_a_tampered_bundle_raises(signed: Path, tmp_path: Path,
                                            keys: dict[str, tuple[Path, Path]]) -> None:
    kept = [(n, d) for n, d in members_of(signed) if not n.endswith("routing.yaml")]
    with pytest.raises(BundleError, match="routing.yaml is listed in the manifest but missing"):
        Gate.from_bundle(write_tar(tmp_path / "t.tar", kept), public_key=keys["signer"][1])


def test_the_service_records_the_bundle_on_each_decision(
        signed: Path, tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    pytest.importorskip("fastapi")
    from starlette.testclient import TestClient

    from callgate_rules.server import ServiceSettings, create_app

    log = tmp_path / "decisions.jsonl"
    settings = ServiceSettings(paths=(), store=f"sqlite:///{tmp_path / 'r.db'}",
                               world=str(REPO / "examples" / "world.yaml"),
                               decision_log=str(log),
                               bundle=open_bundle(signed, keys["signer"][1]))
    with TestClient(create_app(settings)) as client:
        answer = client.post("/v1/decide", json={
            "model_output": {"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}},
            "actor": DANA, "session": {"authenticated": True},
            "request_id": f"req-{uuid.uuid4().hex[:8]}"})
        assert answer.status_code == 200, answer.text
    line = json.loads(log.read_text().splitlines()[0])
    assert line["bundle"] == "sha256:" + hashlib.sha256(signed.read_bytes()).hexdigest()


def serve(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "callgate_rules.cli", "serve", "--no-auth",
                           "--store", f"sqlite:///{cwd / 'r.db'}", *arguments],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.integration
def test_serve_refuses_a_tampered_bundle_at_start(signed: Path, tmp_path: Path,
                                                  keys: dict[str, tuple[Path, Path]]) -> None:
    pytest.importorskip("fastapi")
    data = bytearray(signed.read_bytes())
    data[data.index(b"recipientIban")] ^= 0x01
    tampered = tmp_path / "tampered.tar"
    tampered.write_bytes(bytes(data))
    result = serve("--bundle", str(tampered), "--public-key", str(keys["signer"][1]),
                   "--http", "127.0.0.1:1", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("callgate: refusing bundle ")
    assert "sendPayment.yaml changed since it was signed" in lines[0]


@pytest.mark.integration
def test_serve_refuses_the_wrong_signer_and_unsigned_bundles(
        signed: Path, tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    pytest.importorskip("fastapi")
    wrong = serve("--bundle", str(signed), "--public-key", str(keys["other"][1]),
                  "--http", "127.0.0.1:1", cwd=tmp_path)
    assert wrong.returncode == 2 and "does not verify" in wrong.stderr
    unsigned = tmp_path / "unsigned.tar"
    CliRunner().invoke(main, ["bundle", "build", str(REPO / "contracts"),
                              str(REPO / "policies"), "-o", str(unsigned), "--unsigned"])
    refused = serve("--bundle", str(unsigned), "--public-key", str(keys["signer"][1]),
                    "--http", "127.0.0.1:1", cwd=tmp_path)
    assert refused.returncode == 2 and "unsigned" in refused.stderr
    allowed = open_bundle(unsigned, None, allow_unsigned=True)
    assert verified_bundle(str(unsigned), None, True, "127.0.0.1", ()) == allowed
    with pytest.raises(InputError, match="--allow-unsigned-bundle only on a loopback address"):
        verified_bundle(str(unsigned), None, True, "0.0.0.0", ())


@pytest.mark.integration
def test_the_gateway_serves_a_signed_bundle_and_refuses_a_tampered_one(
        tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    """A real ``callgate gateway`` over stdio in front of the gateway tests' real upstream
    MCP server, its documents from a bundle: it offers the bundle's tools."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    config = REPO / "tests" / "gateway" / "config"
    bundle = tmp_path / "gateway.tar"
    built = CliRunner().invoke(main, ["bundle", "build", str(config / "contracts"),
                                      str(config / "policies"), "-o", str(bundle),
                                      "--key", str(keys["signer"][0])])
    assert built.exit_code == 0, built.output
    upstream = (f"{sys.executable} {REPO / 'tests' / 'gateway' / 'notes_upstream.py'} "
                f"--state {tmp_path / 'state'}")
    common = ["-m", "callgate_rules.cli", "gateway", "--upstream-command", upstream,
              "--store", f"sqlite:///{tmp_path / 'g.db'}", "--actor", str(config / "actor.yaml"),
              "--public-key", str(keys["signer"][1])]

    async def tools() -> set[str]:
        parameters = StdioServerParameters(command=sys.executable,
                                           args=[*common, "--bundle", str(bundle)],
                                           cwd=str(tmp_path))
        with (tmp_path / "gateway.log").open("a") as errlog:
            async with stdio_client(parameters, errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return {tool.name for tool in (await session.list_tools()).tools}

    offered = anyio.run(tools)
    assert offered, (tmp_path / "gateway.log").read_text()
    shown = json.loads(CliRunner().invoke(main, ["bundle", "inspect", str(bundle)]).output)
    assert offered <= {d["name"] for d in shown["documents"] if d["kind"] == "ToolContract"}

    data = bytearray(bundle.read_bytes())
    data[data.index(b"spec:") + 1] ^= 0x01
    tampered = tmp_path / "tampered.tar"
    tampered.write_bytes(bytes(data))
    refused = subprocess.run([sys.executable, *common, "--bundle", str(tampered)],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert refused.returncode == 2 and "changed since it was signed" in refused.stderr


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    import time

    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within 60s: {log.read_text()}")


@pytest.mark.integration
def test_a_bundle_served_over_http_and_a_signed_log_end_to_end(
        signed: Path, tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    """A static file server publishes the bundle; a real ``callgate serve`` loads it by URL,
    decides, and at SIGTERM closes its log with a signed checkpoint that verifies."""
    pytest.importorskip("fastapi")
    import signal

    import httpx

    published = tmp_path / "published"
    published.mkdir()
    shutil.copy(signed, published / "policy.tar")
    files_port, serve_port = free_port(), free_port()
    files_log, serve_log = tmp_path / "files.log", tmp_path / "serve.log"
    with files_log.open("wb") as output:
        files = subprocess.Popen([sys.executable, "-m", "http.server", str(files_port),
                                  "--bind", "127.0.0.1"], cwd=published, stdout=output,
                                 stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{files_port}/policy.tar"
        wait_for(url, files, files_log)
        log = tmp_path / "decisions.jsonl"
        with serve_log.open("wb") as output:
            service = subprocess.Popen(
                [sys.executable, "-m", "callgate_rules.cli", "serve", "--no-auth",
                 "--http", f"127.0.0.1:{serve_port}", "--store", f"sqlite:///{tmp_path / 'r.db'}",
                 "--world", str(REPO / "examples" / "world.yaml"), "--bundle", url,
                 "--public-key", str(keys["signer"][1]), "--decision-log", str(log),
                 "--decision-log-key", str(keys["signer"][0]), "--checkpoint-every", "2"],
                cwd=tmp_path, stdout=output, stderr=subprocess.STDOUT)
        try:
            wait_for(f"http://127.0.0.1:{serve_port}/healthz", service, serve_log)
            for number in range(3):
                answer = httpx.post(f"http://127.0.0.1:{serve_port}/v1/decide", json={
                    "model_output": {"name": "getTicketStatus",
                                     "arguments": {"ticketId": "T-1001"}},
                    "actor": DANA, "session": {"authenticated": True},
                    "request_id": f"req-{number}-{uuid.uuid4().hex[:6]}"}, timeout=30)
                assert answer.status_code == 200, answer.text
        finally:
            service.send_signal(signal.SIGTERM)
            service.wait(timeout=30)
    finally:
        files.terminate()
        files.wait(timeout=10)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    digest = "sha256:" + hashlib.sha256(signed.read_bytes()).hexdigest()
    decisions = [r for r in records if "checkpoint" not in r]
    assert len(decisions) == 3 and all(r["bundle"] == digest for r in decisions)
    assert "checkpoint" in records[-1]  # written at shutdown
    verified = CliRunner().invoke(main, ["log", "verify", str(log),
                                         "--public-key", str(keys["signer"][1])])
    assert verified.exit_code == 0, verified.output
    assert "5 line(s), 2 checkpoint(s) verified" in verified.output
