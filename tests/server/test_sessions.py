"""Review-page sessions a security review would pass: sign-out revokes the session on every
instance sharing the store, idle and absolute timeouts end it, sign-ins are throttled per
source address and per login on a budget of their own (a flood of them never queues the
decision API), and failed sign-ins are logged without the password and counted."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from callgate_rules.server.users import (
    LoginLimits,
    LoginThrottle,
    Sessions,
    User,
    hash_password,
)
from callgate_rules.store import MemoryStore, SqliteStore, open_store
from callgate_rules.store.sessions import PageSessions

from .conftest import (
    DANA,
    POSTGRES,
    REVIEWERS,
    SESSION,
    Server,
    drop_schema,
    payment,
    postgres_store,
    start_server,
    token,
)

COOKIE = "callgate_review"


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def page_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PageSessions]:
    if request.param == "memory":
        store: Any = MemoryStore()
        url = None
    elif request.param == "sqlite":
        store, url = SqliteStore(tmp_path / "s.db"), None
    else:
        if POSTGRES is None:
            pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set")
        url = postgres_store()
        store = open_store(url)
    try:
        yield store
    finally:
        store.close()
        if url is not None:
            drop_schema(url)


ERIN = User("erin", "unused", "Erin")


def test_idle_timeout_ends_a_session(page_store: PageSessions) -> None:
    clock = Clock()
    sessions = Sessions(b"k" * 32, page_store, idle=60, lifetime=3600, clock=clock)
    cookie = sessions.issue(ERIN)
    clock.now += 59
    assert sessions.read(cookie) is not None  # used: the idle clock starts again
    clock.now += 59
    assert sessions.read(cookie) is not None
    clock.now += 60  # unused for the whole idle timeout
    assert sessions.read(cookie) is None


def test_absolute_timeout_ends_a_busy_session(page_store: PageSessions) -> None:
    clock = Clock()
    sessions = Sessions(b"k" * 32, page_store, idle=60, lifetime=300, clock=clock)
    cookie = sessions.issue(ERIN)
    for _ in range(9):  # used every 30 s: never idle
        clock.now += 30
        assert sessions.read(cookie) is not None
    clock.now += 30  # 300 s after sign-in
    assert sessions.read(cookie) is None


def test_revocation_and_tampering(page_store: PageSessions) -> None:
    clock = Clock()
    sessions = Sessions(b"k" * 32, page_store, clock=clock)
    cookie, other = sessions.issue(ERIN), sessions.issue(ERIN)
    assert sessions.revoke(cookie) is True
    assert sessions.read(cookie) is None and sessions.read(other) is not None
    assert sessions.revoke(cookie) is False
    payload, signature = cookie.rsplit(".", 1)
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**data, "u": "sam"}).encode()).decode()
    assert sessions.read(f"{forged.rstrip('=')}.{signature}") is None
    # another instance (another Sessions over the same store) agrees
    assert Sessions(b"k" * 32, page_store, clock=clock).read(other) is not None
    assert Sessions(b"k" * 32, page_store, clock=clock).read(cookie) is None


def test_the_throttle_counts_per_address_and_per_login() -> None:
    clock = Clock(0.0)
    throttle = LoginThrottle(LoginLimits(per_address=3, failures_per_login=2, window=60),
                             clock=clock)
    assert [throttle.admit("10.0.0.1", f"u{i}") for i in range(3)] == [None] * 3
    assert throttle.admit("10.0.0.1", "u9") is not None  # the address's budget is spent
    assert throttle.admit("10.0.0.2", "u9") is None  # another address has its own
    throttle.failed("erin")
    throttle.failed("erin")
    wait = throttle.admit("10.0.0.3", "erin")  # erin's failures, from any address
    assert wait is not None and 0 < wait <= 60
    assert throttle.admit("10.0.0.3", "sam") is None
    clock.now += 61  # the window moved on
    assert throttle.admit("10.0.0.1", "u1") is None and throttle.admit("10.0.0.4", "erin") is None


# Over HTTP, against real `callgate serve` processes --------------------------------------


def sign_in(server: Server, login: str = "erin") -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=server.url, timeout=30, follow_redirects=False)
    answer = client.post("/review/login", data={"login": login,
                                                 "password": REVIEWERS[login]})
    assert answer.status_code == 303, answer.text
    payload = client.cookies[COOKIE].rsplit(".", 1)[0]
    csrf = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["c"]
    return client, str(csrf)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def two_instances(request: pytest.FixtureRequest, documents: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path_factory.mktemp('sessions') / 'receipts.db'}"
    else:
        store = postgres_store()
    first = start_server(documents, store)
    second = start_server(documents, store)
    try:
        yield first, second
    finally:
        first.stop()
        second.stop()
        if request.param == "postgres":
            drop_schema(store)


@pytest.mark.integration
def test_sign_out_revokes_the_cookie_on_every_instance(
        two_instances: tuple[Server, Server]) -> None:
    first, second = two_instances
    client, csrf = sign_in(first)
    cookie = client.cookies[COOKIE]
    with closing(client):
        assert client.get("/review").status_code == 200
    for server in (first, second):  # any instance sharing the store accepts it
        again = httpx.get(f"{server.url}/review", cookies={COOKIE: cookie})
        assert again.status_code == 200 and "Waiting for your confirmation" in again.text
    # a sign-out without the session's CSRF token is refused and revokes nothing
    forged = httpx.post(f"{first.url}/review/logout", cookies={COOKIE: cookie},
                        data={"csrf": "guessed"}, follow_redirects=False)
    assert forged.status_code == 403
    assert httpx.get(f"{second.url}/review", cookies={COOKIE: cookie}).status_code == 200
    out = httpx.post(f"{first.url}/review/logout", cookies={COOKIE: cookie},
                     data={"csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/review/login"
    for server in (first, second):  # the same cookie, reused: refused at once everywhere
        reused = httpx.get(f"{server.url}/review", cookies={COOKIE: cookie},
                           follow_redirects=False)
        assert reused.status_code == 303 and reused.headers["location"] == "/review/login"
        take = httpx.post(f"{server.url}/review/take", cookies={COOKIE: cookie},
                          data={"csrf": csrf}, follow_redirects=False)
        assert take.status_code == 303 and take.headers["location"] == "/review/login"


@pytest.mark.integration
def test_idle_timeout_over_http(documents: Path,
                                tmp_path_factory: pytest.TempPathFactory) -> None:
    store = f"sqlite:///{tmp_path_factory.mktemp('idle') / 'receipts.db'}"
    server = start_server(documents, store, "--session-idle", "1")
    try:
        client, _ = sign_in(server)
        with closing(client):
            assert client.get("/review").status_code == 200
            threading.Event().wait(2.0)  # unused for longer than the idle timeout
            ended = client.get("/review")
            assert ended.status_code == 303 and ended.headers["location"] == "/review/login"
    finally:
        server.stop()


def metric(server: Server, name: str, **labels: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v
                                           for k, v in labels.items()):
                return float(sample.value)
    return 0.0


@pytest.mark.integration
def test_sign_ins_are_rate_limited_logged_and_counted(
        documents: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    store = f"sqlite:///{tmp_path_factory.mktemp('throttle') / 'receipts.db'}"
    server = start_server(documents, store, "--login-failures", "3", "--login-attempts", "8",
                          "--log-level", "warning")
    try:
        secret = "w4ntt0b3-l0gg3d-" + uuid.uuid4().hex
        for _ in range(3):
            wrong = httpx.post(f"{server.url}/review/login",
                               data={"login": "erin", "password": secret})
            assert wrong.status_code == 401
        # erin's failures are spent: refused before the password is checked, even the
        # right one; sam, from the same address, is not affected
        locked = httpx.post(f"{server.url}/review/login",
                            data={"login": "erin", "password": REVIEWERS["erin"]})
        assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
        assert "Too many sign-in attempts" in locked.text
        sam = httpx.post(f"{server.url}/review/login", data={
            "login": "sam", "password": REVIEWERS["sam"]}, follow_redirects=False)
        assert sam.status_code == 303
        # the address's own budget (8 attempts in the window): erin's 3 and sam's 1 used (a
        # refused attempt is not one), 4 left
        for index in range(4):
            answer = httpx.post(f"{server.url}/review/login",
                                data={"login": f"nobody-{index}", "password": "x"})
            assert answer.status_code == 401
        spent = httpx.post(f"{server.url}/review/login", data={
            "login": "gina", "password": REVIEWERS["gina"]})
        assert spent.status_code == 429
        assert metric(server, "callgate_login_failures_total",
                      reason="bad_credentials") == 7
        assert metric(server, "callgate_login_failures_total", reason="rate_limited") == 2
        log = server.log.read_text()
        assert "failed sign-in to the review page: login 'erin' from 127.0.0.1" in log
        assert secret not in log and REVIEWERS["erin"] not in log
    finally:
        server.stop()


@pytest.mark.integration
def test_a_login_flood_never_queues_the_decision_api(
        documents: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Sign-ins of unknown logins each hash a real 600,000-iteration PBKDF2 (as a wrong
    password does), one at a time on the sign-ins' own budget. While they are in flight the
    decision API answers: /v1/decide completes before the flood does. (Before, they shared
    the decision API's limit: with --concurrency 2 a decide waited behind the logins.)"""
    root = tmp_path_factory.mktemp("flood")
    store = f"sqlite:///{root / 'receipts.db'}"
    assert hash_password("x").startswith("pbkdf2_sha256$600000$")  # the real cost
    server = start_server(documents, store, "--concurrency", "2", "--login-concurrency", "1",
                          "--login-attempts", "1000", "--login-failures", "1000")
    flood = 8  # within the sign-ins' queue (8 waiting per one hashing)
    finished: list[int] = []
    lock = threading.Lock()

    def log_in(index: int) -> None:
        answer = httpx.post(f"{server.url}/review/login", timeout=120,
                            data={"login": f"flood-{index}", "password": "guess"})
        with lock:
            finished.append(answer.status_code)

    threads = [threading.Thread(target=log_in, args=(index,)) for index in range(flood)]
    try:
        for thread in threads:
            thread.start()
        while True:  # wait until the flood is being served: one sign-in has been answered
            with lock:
                if finished:
                    break
            threading.Event().wait(0.02)
        with server.client() as client:
            for index in range(3):
                decided = client.post("/v1/decide", json={
                    "model_output": payment(), "actor": DANA, "session": SESSION,
                    "request_id": f"flood-{index}"})
                assert decided.status_code == 200 and decided.json()["route"] == "execute"
                with lock:
                    in_flight = flood - len(finished)
                assert in_flight > 0, "the decision waited for the whole flood"
    finally:
        for thread in threads:
            thread.join()
        server.stop()
    assert sorted(set(finished)) == [401]


# A token login ends with its token; cookies; forged cookies; forwarded addresses -----------


def test_a_session_never_outlives_the_end_it_was_given(page_store: PageSessions) -> None:
    clock = Clock()
    sessions = Sessions(b"k" * 32, page_store, idle=3600, lifetime=8 * 3600, clock=clock)
    cookie = sessions.issue(ERIN, ends_by=clock.now + 300)  # a token valid 5 more minutes
    clock.now += 299
    assert sessions.read(cookie) is not None
    clock.now += 1
    assert sessions.read(cookie) is None
    # a later end than the lifetime's changes nothing: the lifetime still caps it
    long = sessions.issue(ERIN, ends_by=clock.now + 10 * 8 * 3600)
    clock.now += 8 * 3600
    assert sessions.read(long) is None


def cookie_data(cookie: str) -> dict[str, Any]:
    payload = cookie.rsplit(".", 1)[0]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@pytest.mark.integration
def test_a_token_login_ends_when_its_token_does(
        documents: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A JWT valid for a few seconds opens a session that ends with it, not 8 hours later."""
    store = f"sqlite:///{tmp_path_factory.mktemp('token-end') / 'receipts.db'}"
    server = start_server(documents, store, "--review-auth", str(documents / "auth.yaml"))
    try:
        short = token("erin@idp.example", seconds=3)
        expires = int(jwt.decode(short, options={"verify_signature": False})["exp"])
        with httpx.Client(base_url=server.url, follow_redirects=False) as browser:
            signed = browser.post("/review/login/token", data={"token": short})
            assert signed.status_code == 303, signed.text
            assert cookie_data(browser.cookies[COOKIE])["e"] <= expires
            assert browser.get("/review").status_code == 200
            while time.time() < expires + 0.5:
                threading.Event().wait(0.2)
            ended = browser.get("/review")
            assert ended.status_code == 303 and ended.headers["location"] == "/review/login"
    finally:
        server.stop()


def test_cookies_are_secure_unless_served_on_loopback(
        caplog: pytest.LogCaptureFixture) -> None:
    from callgate_rules.cli.serve import cookie_security
    from callgate_rules.server.service import ServiceSettings

    assert ServiceSettings().secure_cookies is True  # the library's default
    assert cookie_security("0.0.0.0", None) is True
    assert cookie_security("10.1.2.3", None) is True
    assert cookie_security("127.0.0.1", None) is False
    assert cookie_security("::1", None) is False
    assert cookie_security("127.0.0.1", True) is True
    assert not caplog.records
    with caplog.at_level("WARNING", logger="callgate.server"):
        assert cookie_security("0.0.0.0", False) is False
    assert "--no-secure-cookies on 0.0.0.0" in caplog.text and "plain http" in caplog.text


@pytest.mark.integration
def test_secure_cookies_over_http(documents: Path,
                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("secure")
    for extra, secure in (((), False), (("--secure-cookies",), True)):
        server = start_server(documents, f"sqlite:///{root / 'receipts.db'}", *extra)
        try:
            answer = httpx.post(f"{server.url}/review/login", data={
                "login": "erin", "password": REVIEWERS["erin"]}, follow_redirects=False)
            assert answer.status_code == 303
            attributes = [part.strip().lower()
                          for part in answer.headers["set-cookie"].split(";")]
            assert ("secure" in attributes) is secure, attributes
        finally:
            server.stop()


@pytest.mark.integration
def test_a_forged_cookie_costs_no_store_call_and_no_decision_worker(
        two_instances: tuple[Server, Server]) -> None:
    server = two_instances[0]
    client, _ = sign_in(server)
    real = client.cookies[COOKIE]
    client.close()
    payload, signature = real.rsplit(".", 1)
    tampered = base64.urlsafe_b64encode(json.dumps(
        {**cookie_data(real), "u": "sam"}).encode()).decode().rstrip("=")
    forged = [f"{tampered}.{signature}", f"{payload}.{'A' * len(signature)}", "junk",
              "x.y", f"{payload}."]

    def counts() -> tuple[float, float]:
        return (metric(server, "callgate_request_seconds_count", endpoint="session"),
                metric(server, "callgate_store_seconds_count", operation="touch_page_session"))

    before = counts()
    for cookie in forged * 4:
        answer = httpx.get(f"{server.url}/review", cookies={COOKIE: cookie},
                           follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/review/login"
    assert counts() == before
    assert httpx.get(f"{server.url}/review", cookies={COOKIE: real}).status_code == 200
    after = counts()  # a signed cookie is checked against the store, on the sign-ins' budget
    assert after[0] == before[0] + 1 and after[1] == before[1] + 1


@pytest.mark.integration
def test_x_forwarded_for_from_loopback_is_not_trusted_by_default(
        documents: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A loopback client naming another address in X-Forwarded-For is still counted as
    itself; only with --forwarded-allow-ips does the header name the client."""
    root = tmp_path_factory.mktemp("forwarded")
    for extra, trusted in (((), False), (("--forwarded-allow-ips", "127.0.0.1"), True)):
        server = start_server(documents, f"sqlite:///{root / 'receipts.db'}",
                              "--login-attempts", "2", *extra)
        try:
            answers = [httpx.post(f"{server.url}/review/login",
                                  data={"login": f"nobody-{index}", "password": "x"},
                                  headers={"x-forwarded-for": f"203.0.113.{index}"})
                       for index in range(4)]
            codes = [answer.status_code for answer in answers]
            log = server.log.read_text()
            if trusted:
                assert codes == [401] * 4
                assert "from 203.0.113.3" in log
            else:
                assert codes == [401, 401, 429, 429]
                assert "from 127.0.0.1" in log and "203.0.113" not in log
        finally:
            server.stop()
