"""The gateway's tests run the real thing: the ``callgate gateway`` command in its own
process, a real upstream MCP server process (``notes_upstream.py``) behind it, and a real
client session of the official ``mcp`` SDK in front, over stdio and streamable HTTP.

Every test uses titles and request IDs of its own, so tests may share one HTTP gateway
(started once per module) and count the writes of their own title.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the gateway extra is not installed (mcp is missing): "
                                  "pip install 'callgate-rules[gateway]'")
pytest.importorskip("jwt", reason="the gateway extra is not installed (PyJWT is missing): "
                                  "pip install 'callgate-rules[gateway]'")

import jwt  # noqa: E402
import mcp_types as types  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIG = HERE / "config"
DOCUMENTS = [str(CONFIG / "contracts"), str(CONFIG / "policies")]
ACTOR_FILE = CONFIG / "actor.yaml"
UPSTREAM = HERE / "notes_upstream.py"
PYTHON = sys.executable
GATEWAY = [PYTHON, "-m", "callgate_rules.cli", "gateway"]
TRANSPORTS = ["stdio", "http"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def upstream_command(state: Path) -> str:
    return f"{PYTHON} {UPSTREAM} --state {state}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path,
                  seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the process exited ({process.returncode}):\n"
                                 f"{log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listened on port {port} within {seconds}s:\n"
                         f"{log.read_text()}")


@dataclass
class Upstream:
    """The notes service's state directory: its writes, its calls, its faults."""

    state: Path

    def notes(self, title: str) -> list[dict[str, Any]]:
        return [n for n in self._lines("notes.jsonl") if n.get("title") == title]

    def messages(self, text: str) -> list[dict[str, Any]]:
        return [m for m in self._lines("messages.jsonl") if m.get("text") == text]

    def calls(self, tool: str, **arguments: Any) -> list[dict[str, Any]]:
        """The calls of ``tool`` whose arguments include ``arguments``."""
        return [c for c in self._lines("calls.jsonl") if c["tool"] == tool
                and all(c["arguments"].get(k) == v for k, v in arguments.items())]

    def drop_next_answer(self, how: str) -> None:
        (self.state / "drop").write_text(how)

    def slow_writes(self, seconds: float) -> None:
        (self.state / "slow").write_text(str(seconds))

    def _lines(self, name: str) -> list[dict[str, Any]]:
        path = self.state / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# Tokens ---------------------------------------------------------------------------------


@dataclass
class Keys:
    """An RSA and a P-256 key pair, published together as a JWKS file (and the RSA key as
    PEM), and an HS256 secret."""

    directory: Path
    secret: str = "s" * 40
    rsa_key: rsa.RSAPrivateKey = field(init=False)
    ec_key: ec.EllipticCurvePrivateKey = field(init=False)

    def __post_init__(self) -> None:
        self.rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec_key = ec.generate_private_key(ec.SECP256R1())
        published = []
        for kid, key in (("rsa-1", self.rsa_key), ("ec-1", self.ec_key)):
            algorithm = jwt.algorithms.RSAAlgorithm if kid.startswith("rsa") \
                else jwt.algorithms.ECAlgorithm
            jwk = json.loads(algorithm.to_jwk(key.public_key()))
            published.append({**jwk, "kid": kid, "use": "sig"})
        (self.directory / "jwks.json").write_text(json.dumps({"keys": published}))
        pem = self.rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        (self.directory / "rsa.pem").write_bytes(pem)
        (self.directory / "secret.txt").write_text(self.secret)

    def token(self, claims: dict[str, Any], kid: str = "rsa-1", **extra: Any) -> str:
        body = {"iss": "https://login.test/", "aud": "callgate-tests",
                "exp": int(time.time()) + 600, **claims, **extra}
        if kid == "hs":
            return jwt.encode(body, self.secret, algorithm="HS256")
        key = self.rsa_key if kid.startswith("rsa") else self.ec_key
        algorithm = "RS256" if kid.startswith("rsa") else "ES256"
        return jwt.encode(body, key, algorithm=algorithm, headers={"kid": kid})


CLAIMS = {"sub": "U-1", "org": {"tenant": "acme"}, "role": "writer"}


def write_auth(directory: Path, kind: str, value: str) -> Path:
    path = directory / f"auth-{kind}.yaml"
    path.write_text(
        f"{kind}: {value}\nissuer: https://login.test/\naudience: callgate-tests\n"
        "claims:\n  actor: {id: sub, tenant: org.tenant, role: role}\n  principal: sub\n")
    return path


# Gateways -------------------------------------------------------------------------------


@dataclass
class HttpGateway:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def start_http_gateway(tmp: Path, *, auth: Path, store: str, upstream_args: list[str],
                       env: dict[str, str] | None = None) -> HttpGateway:
    port = free_port()
    log = tmp / f"gateway-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*GATEWAY, *upstream_args, "--http", f"127.0.0.1:{port}", "--auth", str(auth),
             "--store", store, "--confirmation-timeout", "5", *DOCUMENTS],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, **(env or {})})
    wait_for_port(port, process, log)
    return HttpGateway(f"http://127.0.0.1:{port}/mcp", process, log)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway")


@pytest.fixture(scope="module")
def keys(module_tmp: Path) -> Keys:
    return Keys(module_tmp)


@pytest.fixture(scope="module")
def http_gateway(module_tmp: Path, keys: Keys) -> Iterator[tuple[HttpGateway, Upstream]]:
    """One HTTP gateway (JWKS tokens, SQLite store) over one stdio upstream, per module."""
    state = module_tmp / "http-state"
    gateway = start_http_gateway(
        module_tmp, auth=write_auth(module_tmp, "jwks", "jwks.json"),
        store=f"sqlite:///{module_tmp / 'http.sqlite3'}",
        upstream_args=["--upstream-command", upstream_command(state)])
    yield gateway, Upstream(state)
    stop(gateway.process)


@dataclass
class Connection:
    """A client session through a gateway, the upstream's state behind it, and the URL of
    the gateway's receipt store."""

    session: ClientSession
    upstream: Upstream
    store: str


@asynccontextmanager
async def stdio_gateway(tmp: Path, *, elicitation: Any = None) -> AsyncIterator[Connection]:
    state = tmp / "stdio-state"
    store = f"sqlite:///{tmp / 'stdio.sqlite3'}"
    parameters = StdioServerParameters(command=GATEWAY[0], args=[
        *GATEWAY[1:], "--upstream-command", upstream_command(state), "--store", store,
        "--actor", str(ACTOR_FILE), "--confirmation-timeout", "5", *DOCUMENTS],
        cwd=str(REPO))
    with (tmp / "stdio-gateway.log").open("a") as errlog:
        async with stdio_client(parameters, errlog) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation) as session:
                await session.initialize()
                yield Connection(session, Upstream(state), store)


@asynccontextmanager
async def http_session(url: str, token: str | None, *,
                       elicitation: Any = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def connected(transport: str, tmp: Path, request: pytest.FixtureRequest, *,
                    elicitation: Any = None) -> AsyncIterator[Connection]:
    """A session through a gateway over ``transport``, the actor being acme's writer U-1."""
    if transport == "stdio":
        async with stdio_gateway(tmp, elicitation=elicitation) as connection:
            yield connection
        return
    gateway, upstream = request.getfixturevalue("http_gateway")
    keys: Keys = request.getfixturevalue("keys")
    store = f"sqlite:///{request.getfixturevalue('module_tmp') / 'http.sqlite3'}"
    async with http_session(gateway.url, keys.token(CLAIMS), elicitation=elicitation) as s:
        yield Connection(s, upstream, store)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def meta_of(result: types.CallToolResult) -> dict[str, Any]:
    return dict(result.meta or {})
