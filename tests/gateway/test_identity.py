"""Who the caller is: bearer tokens over HTTP (401 when missing or invalid, the actor from
the declared claim mapping when valid) and the authentication file's errors at start."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from callgate_rules.gateway.identity import (
    IdentityConfigError,
    InvalidToken,
    identity_from_files,
    load_auth,
)

from .conftest import (
    CLAIMS,
    HttpGateway,
    Keys,
    Upstream,
    http_session,
    meta_of,
    start_http_gateway,
    stop,
    unique,
    upstream_command,
    write_auth,
)

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}


def post(url: str, token: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.post(url, headers=headers, content=json.dumps(INITIALIZE), timeout=10)


@pytest.mark.parametrize("token", [
    None, "not-a-jwt", "expired", "wrong-audience", "wrong-signature", "no-tenant-claim"])
def test_a_missing_or_invalid_token_is_401(
        token: str | None, http_gateway: tuple[HttpGateway, Upstream], keys: Keys) -> None:
    gateway, _ = http_gateway
    other = None
    if token == "wrong-signature":
        (gateway.log.parent / "other").mkdir(exist_ok=True)
        other = Keys(gateway.log.parent / "other")
    tokens = {
        "expired": keys.token(CLAIMS, exp=int(time.time()) - 60),
        "wrong-audience": keys.token(CLAIMS, aud="someone-else"),
        "wrong-signature": other.token(CLAIMS) if other else "",
        "no-tenant-claim": keys.token({"sub": "U-1", "role": "writer"}),
    }
    response = post(gateway.url, tokens.get(token or "", token))
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer realm="callgate"')
    assert response.json()["error"] in ("invalid_token", "invalid_request")


def test_a_valid_token_is_accepted(http_gateway: tuple[HttpGateway, Upstream],
                                   keys: Keys) -> None:
    gateway, _ = http_gateway
    assert post(gateway.url, keys.token(CLAIMS)).status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize("kid", ["rsa-1", "ec-1"])
async def test_the_actor_comes_from_the_claim_mapping(
        kid: str, http_gateway: tuple[HttpGateway, Upstream], keys: Keys) -> None:
    gateway, upstream = http_gateway
    title = unique("claims")
    globex = {**CLAIMS, "sub": "U-9", "org": {"tenant": "globex"}}
    async with http_session(gateway.url, keys.token(globex, kid=kid)) as session:
        theirs = await session.call_tool("createNote", {"notebookId": "NB-2", "title": title})
        ours = await session.call_tool("createNote", {"notebookId": "NB-1", "title": title})
    assert not theirs.is_error  # globex's notebook, for a globex token
    assert meta_of(ours)["callgate/error_class"] == "forbidden"  # acme's is not theirs
    assert [n["notebookId"] for n in upstream.notes(title)] == ["NB-2"]


@pytest.fixture(scope="module")
def hs256_gateway(module_tmp: Path, keys: Keys) -> Iterator[HttpGateway]:
    state = module_tmp / "hs-state"
    gateway = start_http_gateway(
        module_tmp, auth=write_auth(module_tmp, "secret_file", "secret.txt"),
        store=f"sqlite:///{module_tmp / 'hs.sqlite3'}",
        upstream_args=["--upstream-command", upstream_command(state)])
    yield gateway
    stop(gateway.process)


def test_hs256_tokens(hs256_gateway: HttpGateway, keys: Keys) -> None:
    assert post(hs256_gateway.url, keys.token(CLAIMS, kid="hs")).status_code == 200
    assert post(hs256_gateway.url, keys.token(CLAIMS)).status_code == 401  # RS256: not ours


def test_a_pem_public_key_verifies_rs256(keys: Keys, module_tmp: Path) -> None:
    verifier = load_auth(write_auth(module_tmp, "public_key", "rsa.pem"))
    identity = verifier.verify(keys.token(CLAIMS))
    assert identity.actor == {"id": "U-1", "tenant": "acme", "role": "writer"}
    assert identity.principal == "U-1"
    with pytest.raises(InvalidToken):
        verifier.verify(keys.token(CLAIMS, kid="ec-1"))  # an ES256 token: another key


@pytest.mark.parametrize("config,says", [
    ("claims: {actor: {id: sub}}\n", "give exactly one of secret_env, secret_file"),
    ("secret_env: CALLGATE_TEST_UNSET_SECRET\nclaims: {actor: {id: sub}}\n",
     "secret_env CALLGATE_TEST_UNSET_SECRET is not set"),
    ("secret_file: short.txt\nclaims: {actor: {id: sub}}\n", "use at least 32"),
    ("public_key: short.txt\nclaims: {actor: {id: sub}}\n", "is not a PEM public key"),
    ("public_key: missing.pem\nclaims: {actor: {id: sub}}\n", "No such file"),
    ("secret_file: secret.txt\n", "claims.actor must map actor fields"),
])
def test_bad_authentication_files_fail_in_one_line(config: str, says: str,
                                                   tmp_path: Path, keys: Keys) -> None:
    (tmp_path / "short.txt").write_text("too short")
    (tmp_path / "secret.txt").write_text(keys.secret)
    path = tmp_path / "auth.yaml"
    path.write_text(config)
    with pytest.raises(IdentityConfigError) as raised:
        load_auth(path)
    assert says in str(raised.value) and "\n" not in str(raised.value)
    assert str(raised.value).startswith(str(path))


def test_identity_from_files(tmp_path: Path) -> None:
    (tmp_path / "actor.yaml").write_text("id: U-1\ntenant: acme\n")
    (tmp_path / "session.json").write_text('{"authenticated": true}')
    identity = identity_from_files(tmp_path / "actor.yaml", tmp_path / "session.json")
    assert identity.actor == {"id": "U-1", "tenant": "acme"}
    assert identity.session == {"authenticated": True} and identity.principal == "U-1"
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(IdentityConfigError, match="expected a mapping"):
        identity_from_files(tmp_path / "list.yaml")
