"""``callgate replay --bundle FILE --public-key KEY``: a decision log replayed against a signed
bundle, verified first as ``serve`` verifies one; every line whose decision another bundle
made (or documents from folders) is named, line by line, and decided again all the same."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("cryptography", reason="the bundle extra: pip install 'callgate-rules[bundle]'")

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from callgate_rules.cli import main  # noqa: E402
from callgate_rules.decision_log import DecisionLog  # noqa: E402
from callgate_rules.documents.source import read_data_file  # noqa: E402
from callgate_rules.harness.world import WorldResolvers  # noqa: E402
from callgate_rules.pipeline.gate import Gate  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DANA = {"id": "U-7", "tenant": "acme", "role": "agent", "teams": ["billing"]}
NO_TICKETS = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: no-ticket-status, version: "1", owner: t@example.com, description: closed}
spec:
  rules: [{name: tickets-closed, effect: deny, tools: [getTicketStatus], when: "true"}]
"""


def write_key(folder: Path, name: str) -> tuple[Path, Path]:
    key = Ed25519PrivateKey.generate()
    private, public = folder / f"{name}.pem", folder / f"{name}.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def digest_of(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Keys, two signed bundles (``now``: the repository's documents; ``closed``: the same
    and a policy that denies getTicketStatus), and the log of three decisions made by
    ``now`` and one made from folders."""
    folder = tmp_path_factory.mktemp("replay-bundle")
    signer, public = write_key(folder, "signer")
    _, stranger = write_key(folder, "stranger")
    bundles = {}
    for name in ("now", "closed"):
        documents = folder / name
        shutil.copytree(REPO / "contracts", documents / "contracts")
        shutil.copytree(REPO / "policies", documents / "policies")
        if name == "closed":
            (documents / "policies" / "no-ticket-status.yaml").write_text(NO_TICKETS)
        bundles[name] = folder / f"{name}.tar"
        built = CliRunner().invoke(main, ["bundle", "build", str(documents / "contracts"),
                                          str(documents / "policies"), "-o",
                                          str(bundles[name]), "--key", str(signer)])
        assert built.exit_code == 0, built.output
    log_path = folder / "decisions.jsonl"
    log = DecisionLog(log_path)
    bindings = {"decision_log": log, "store": "memory://",
                "resolvers": WorldResolvers(read_data_file(str(REPO / "examples" / "world.yaml"),
                                                           "world")),
                "executors": {"getTicketStatus": lambda request: {"status": "open"}}}
    from_bundle = Gate.from_bundle(bundles["now"], public_key=public, **bindings)
    from_folders = Gate.from_paths(REPO / "contracts", REPO / "policies", **bindings)
    for number, gate in enumerate([from_bundle] * 3 + [from_folders]):
        gate.handle({"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}},
                    actor=DANA, request_id=f"r-{number}", session={"authenticated": True})
    log.close()
    data = bytearray(bundles["now"].read_bytes())
    data[data.index(b"spec:") + 1] ^= 0x01  # in a document, not the manifest
    tampered = folder / "tampered.tar"
    tampered.write_bytes(bytes(data))
    return {**bundles, "log": log_path, "public": public, "stranger": stranger,
            "tampered": tampered}


def replay(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["replay", *arguments])
    return result.exit_code, result.output


def test_replayed_against_its_own_bundle_only_the_line_from_folders_is_named(
        made: dict[str, Path]) -> None:
    code, output = replay(str(made["log"]), "--bundle", str(made["now"]),
                          "--public-key", str(made["public"]))
    assert code == 0, output
    assert output.splitlines()[-3:] == [
        f"made by another bundle than {digest_of(made['now'])}: 1 line(s), decided again "
        "by this one",
        "  1 × no bundle (documents from folders) (line 4)",
        "totals: 4 line(s), 4 unchanged, 0 changed, 0 not re-decided, 1 made by another "
        "bundle"]


def test_against_a_new_bundle_each_line_another_bundle_made_is_named(
        made: dict[str, Path]) -> None:
    code, output = replay(str(made["log"]), "--bundle", str(made["closed"]),
                          "--public-key", str(made["public"]), "--format", "json")
    assert code == 0, output
    found = json.loads(output)
    changed = [entry for entry in found if entry["status"] == "changed"]
    assert [entry["line"] for entry in changed] == [1, 2, 3, 4]
    assert {entry["after"]["rule"] for entry in changed} == {"no-ticket-status/tickets-closed"}
    assert [(entry["line"], entry["bundle"]) for entry in found
            if entry["status"] == "other_bundle"] == [
        (1, digest_of(made["now"])), (2, digest_of(made["now"])), (3, digest_of(made["now"])),
        (4, None)]
    code, text = replay(str(made["log"]), "--bundle", str(made["closed"]),
                        "--public-key", str(made["public"]))
    assert f"  3 × {digest_of(made['now'])} (line 1, 2, 3)" in text.splitlines()


@pytest.mark.parametrize(("given", "said"), [
    ("tampered", "changed since it was signed"),
    ("stranger", "the signature does not verify"),
    ("unsigned key", "needs --public-key"),
    ("both", "either PATHS or --bundle"),
])
def test_a_bundle_that_does_not_verify_is_refused(made: dict[str, Path], given: str,
                                                  said: str) -> None:
    arguments = [str(made["log"]), "--bundle",
                 str(made["tampered" if given == "tampered" else "now"])]
    if given == "stranger":
        arguments += ["--public-key", str(made["stranger"])]
    elif given == "both":
        arguments = [str(made["log"]), str(REPO / "contracts"), "--bundle", str(made["now"]),
                     "--public-key", str(made["public"])]
    elif given != "unsigned key":
        arguments += ["--public-key", str(made["public"])]
    result = CliRunner().invoke(main, ["replay", *arguments])
    assert result.exit_code == 2, result.output
    assert said in result.output
