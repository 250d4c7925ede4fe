"""Signing in (board/views/signin.py, board/auth.py): throttled by user name and by client
address in PostgreSQL, the same answers for unknown and known names, no pooled connection
held across the password hash, and never a 500."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import httpx
import pytest
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.hashers import MD5PasswordHasher, PBKDF2PasswordHasher
from django.db import connection
from django.db.models.functions import Now
from django.test import Client

from switchboard import dburl
from switchboard.board.auth import client_address
from switchboard.queues.models import SignInThrottle
from tests import loopback
from tests.crash.conftest import base_env
from tests.crash.harness import Procs
from tests.queues.helpers import run_together

PASSWORD = "pw-for-tests"
MISMATCH = "That username and password did not match."
LOCKED_NAME = (
    "Too many failed sign-ins for this name from your network address; try again in 15 minutes."
)
HERE = "pair:198.51.100.7 alice"  # the name from _post's default address
LOCKED_ADDRESS = "Too many failed sign-ins for your network address; try again in 15 minutes."


class CountingHasher(MD5PasswordHasher):
    """The tests' fast hasher, counting every hash it computes (a check, or the stand-in
    hash an unknown name gets), so a test can say whether a password was looked at."""

    hashes = 0
    _lock = threading.Lock()

    @classmethod
    def _count(cls) -> None:
        with cls._lock:
            cls.hashes += 1

    def encode(self, password, salt):
        self._count()
        return super().encode(password, salt)


@pytest.fixture
def hashes(settings):
    settings.PASSWORD_HASHERS = ["tests.board.test_signin.CountingHasher"]
    CountingHasher.hashes = 0

    def count() -> int:
        return CountingHasher.hashes

    return count


@pytest.fixture
def alice(make_user, hashes):
    user = make_user("alice")
    CountingHasher.hashes = 0
    return user


def _post(client: Client, username: str, password: str, *, addr: str = "198.51.100.7", **data):
    return client.post(
        "/login/", {"username": username, "password": password, **data}, REMOTE_ADDR=addr
    )


def _error(response) -> str:
    found = re.search(r'<p class="error" role="alert">([^<]*)</p>', response.content.decode())
    return found.group(1) if found else ""


def _signed_in(client: Client) -> bool:
    return SESSION_KEY in client.session


def _failures(key: str) -> int | None:
    row = SignInThrottle.objects.filter(key=key).first()
    return row.failures if row else None


# --- Signing in


def test_the_right_password_signs_in_and_goes_to_the_queue(client, alice):
    response = _post(client, "alice", PASSWORD)
    assert response.status_code == 302 and response["Location"] == "/"
    assert _signed_in(client)


def test_a_local_next_is_followed_and_an_off_site_one_dropped(client, alice):
    assert _post(client, "alice", PASSWORD, next="/activity/")["Location"] == "/activity/"
    client.logout()
    assert _post(client, "alice", PASSWORD, next="https://evil.example/")["Location"] == "/"


def test_the_sign_in_page_keeps_next_and_names_no_error(client, db):
    response = client.get("/login/?next=/activity/")
    assert response.status_code == 200
    assert 'name="next" value="/activity/"' in response.content.decode()
    assert _error(response) == ""


def test_a_wrong_password_is_the_mismatch_message(client, alice, hashes):
    response = _post(client, "alice", "wrong")
    assert response.status_code == 200 and _error(response) == MISMATCH
    assert not _signed_in(client) and hashes() == 1
    assert 'value="alice"' in response.content.decode()  # the name stays typed


def test_an_empty_field_checks_nothing(client, alice, hashes):
    response = _post(client, "alice", "")
    assert response.status_code == 200 and _error(response) == "Enter your username and password."
    assert hashes() == 0 and not SignInThrottle.objects.exists()


def test_sign_in_posts_need_the_csrf_token(alice):
    strict = Client(enforce_csrf_checks=True)
    assert _post(strict, "alice", PASSWORD).status_code == 403
    assert not _signed_in(strict)


# --- The throttle by name


def test_ten_failures_from_one_address_lock_the_name_there_and_only_there(client, alice, hashes):
    for _ in range(9):
        assert _error(_post(client, "alice", "wrong")) == MISMATCH
    # The tenth failure is the last the window allows: it says so at once.
    tenth = _post(client, "alice", "wrong")
    assert tenth.status_code == 429 and _error(tenth) == LOCKED_NAME
    assert 899 <= int(tenth["Retry-After"]) <= 900
    assert hashes() == 10

    # From that address, even with the right password, and without looking at it.
    refused = _post(client, "alice", PASSWORD)
    assert refused.status_code == 429 and _error(refused) == LOCKED_NAME
    assert 1 <= int(refused["Retry-After"]) <= 900
    assert not _signed_in(client)
    assert hashes() == 10

    # Hardening, second round: the lock was the name's, from anywhere, so a stranger's ten
    # guesses refused the right password from the right person. From elsewhere it signs in.
    assert _post(client, "alice", PASSWORD, addr="2001:db8::1").status_code == 302
    assert _signed_in(client)


def test_a_stranger_guessing_from_many_addresses_only_slows_the_name(
    client, alice, hashes, settings
):
    settings.SWITCHBOARD_SIGNIN_SLOW_AFTER_PER_USER = 4
    settings.SWITCHBOARD_SIGNIN_MAX_DELAY_SECONDS = 1.0
    for n in range(6):  # two past the point where the delay starts: 0.5 s, then 1.0 s
        assert _post(client, "alice", "wrong", addr=f"203.0.113.{n}").status_code == 200
    assert _failures("user:alice") == 6

    started = time.monotonic()
    signed = _post(client, "alice", PASSWORD, addr="192.0.2.77")
    took = time.monotonic() - started
    assert signed.status_code == 302 and _signed_in(client)  # never refused for the name
    assert took >= 1.0  # the seventh: 1.5 s, held at the 1 s most
    # What the person sees once in: a notice of the others' failures, not a lock.
    page = client.get("/")
    assert "6 failed sign-ins for your name from other network addresses" in page.content.decode()
    assert _failures("user:alice") is None  # cleared by the right password


def test_the_delay_holds_no_pooled_connection(client, alice, settings, monkeypatch):
    settings.SWITCHBOARD_SIGNIN_SLOW_AFTER_PER_USER = 1
    settings.SWITCHBOARD_SIGNIN_MAX_DELAY_SECONDS = 0.3
    held, real_sleep = [], time.sleep

    def watching_sleep(seconds):
        held.append(connection.connection is not None and connection.pool is not None)
        real_sleep(seconds)

    _post(client, "alice", "wrong", addr="203.0.113.1")
    monkeypatch.setattr("switchboard.board.auth.time.sleep", watching_sleep)
    _post(client, "alice", "wrong", addr="203.0.113.2")
    assert held == [False]


def test_the_name_is_counted_whatever_its_case(client, alice):
    for name in ["alice", "Alice", "ALICE"] * 3 + ["aLiCe"]:
        _post(client, name, "wrong")
    assert _failures(HERE) == 10
    assert _post(client, "alice", PASSWORD).status_code == 429


def test_the_wait_is_what_is_left_of_the_window(client, alice):
    for _ in range(10):
        _post(client, "alice", "wrong")
    SignInThrottle.objects.filter(key=HERE).update(
        window_started_at=Now() - timedelta(minutes=14, seconds=30)
    )
    response = _post(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 30
    assert _error(response) == (
        "Too many failed sign-ins for this name from your network address; try again in 1 minute."
    )


def test_once_the_window_is_over_the_name_may_try_again(client, alice):
    for _ in range(10):
        _post(client, "alice", "wrong")
    SignInThrottle.objects.filter(key=HERE).update(
        window_started_at=Now() - timedelta(minutes=15, seconds=1)
    )
    assert _post(client, "alice", "wrong").status_code == 200
    assert _failures(HERE) == 1
    assert _post(client, "alice", PASSWORD).status_code == 302


def test_a_successful_sign_in_clears_the_name_and_refunds_the_address(client, alice):
    for _ in range(9):
        _post(client, "alice", "wrong")
    assert _failures(HERE) == 9 and _failures("addr:198.51.100.7") == 9
    assert _failures("user:alice") == 9
    assert _post(client, "alice", PASSWORD).status_code == 302
    assert _failures(HERE) is None and _failures("user:alice") is None  # cleared
    assert _failures("addr:198.51.100.7") == 9  # charged and refunded: failures stay
    client.logout()
    for _ in range(9):  # a fresh allowance for the name
        assert _post(client, "alice", "wrong").status_code == 200


def test_a_limit_of_zero_turns_the_name_throttle_off(client, alice, settings):
    settings.SWITCHBOARD_SIGNIN_FAILURES_PER_USER = 0
    for _ in range(12):
        _post(client, "alice", "wrong")
    assert _failures(HERE) is None
    assert _post(client, "alice", PASSWORD).status_code == 302


def test_admins_sign_in_is_throttled_too(client, make_user, hashes):
    make_user("root", is_staff=True)
    for _ in range(10):
        _post(client, "root", "wrong")
    before = hashes()
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": "root", "password": PASSWORD},
        REMOTE_ADDR="198.51.100.7",
    )
    assert response.status_code == 200 and not _signed_in(client)  # admin's own error
    assert hashes() == before


def test_strangers_cannot_lock_admin_out_and_admin_is_told(client, make_user, settings):
    settings.SWITCHBOARD_SIGNIN_MAX_DELAY_SECONDS = 0
    make_user("admin", is_staff=True, is_superuser=True)
    for n in range(40):  # ten each from four addresses: each address is locked for the name
        _post(client, "admin", "wrong", addr=f"203.0.113.{n // 10}")
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": "admin", "password": PASSWORD},
        REMOTE_ADDR="192.0.2.10",
    )
    assert response.status_code == 302 and _signed_in(client)
    page = client.get("/admin/").content.decode()
    assert "40 failed sign-ins for your name from other network addresses" in page


@pytest.mark.django_db(transaction=True)
def test_concurrent_guesses_never_get_past_the_limit(alice, hashes):
    statuses: list[int] = []

    def guess(n: int) -> None:
        statuses.append(_post(Client(), "alice", "wrong").status_code)

    assert run_together(guess, 30) == []
    # Each guess is charged before its hash, in one statement: exactly ten are checked.
    assert hashes() == 10
    assert sorted(statuses) == [200] * 9 + [429] * 21


# --- The throttle by address


def test_fifty_failures_from_one_address_lock_it_for_every_name(client, alice, make_user):
    for n in range(49):
        assert _post(client, f"guess{n}", "wrong", addr="203.0.113.5").status_code == 200
    fiftieth = _post(client, "guess49", "wrong", addr="203.0.113.5")
    assert fiftieth.status_code == 429 and _error(fiftieth) == LOCKED_ADDRESS
    assert 899 <= int(fiftieth["Retry-After"]) <= 900

    refused = _post(client, "alice", PASSWORD, addr="203.0.113.5")
    assert refused.status_code == 429 and _error(refused) == LOCKED_ADDRESS
    # Another address is not affected.
    assert _post(client, "alice", PASSWORD, addr="203.0.113.6").status_code == 302


def test_the_name_message_wins_when_both_are_locked(client, alice, settings):
    settings.SWITCHBOARD_SIGNIN_FAILURES_PER_ADDRESS = 3
    for _ in range(3):
        _post(client, "alice", "wrong", addr="203.0.113.5")
    assert _error(_post(client, "bob", "wrong", addr="203.0.113.5")) == LOCKED_ADDRESS
    for _ in range(7):
        _post(client, "alice", "wrong", addr="203.0.113.5")
    assert _error(_post(client, "alice", "wrong", addr="203.0.113.5")) == LOCKED_NAME


def test_the_address_is_the_connections_or_the_last_entry_of_the_proxys_header(rf, settings):
    settings.SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER = ""
    forwarded = {"HTTP_X_FORWARDED_FOR": "10.0.0.1, 192.0.2.44", "REMOTE_ADDR": "127.0.0.1"}
    assert client_address(rf.post("/login/", **forwarded)) == "127.0.0.1"
    settings.SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER = "X-Forwarded-For"
    assert client_address(rf.post("/login/", **forwarded)) == "192.0.2.44"
    # Hardening, second round: believed only from a trusted proxy (loopback by default); a
    # client reaching the server directly cannot choose the address it is counted as.
    direct = {**forwarded, "REMOTE_ADDR": "198.51.100.3"}
    assert client_address(rf.post("/login/", **direct)) == "198.51.100.3"
    settings.SWITCHBOARD_SIGNIN_TRUSTED_PROXIES = "198.51.100.0/24"
    assert client_address(rf.post("/login/", **direct)) == "192.0.2.44"
    assert client_address(rf.post("/login/", **forwarded)) == "127.0.0.1"
    from switchboard.management.commands.serve import trusted_proxy_notice

    assert "X-Forwarded-For" in trusted_proxy_notice()
    assert "198.51.100.0/24" in trusted_proxy_notice()
    settings.SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER = ""
    assert trusted_proxy_notice() is None
    settings.SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER = "X-Forwarded-For"
    settings.SWITCHBOARD_SIGNIN_TRUSTED_PROXIES = "127.0.0.0/8,::1"
    assert client_address(rf.post("/login/", REMOTE_ADDR="192.0.2.1")) == "192.0.2.1"
    # An IPv6 client counts as its /64; an IPv4-mapped one as its IPv4 address.
    assert client_address(rf.post("/login/", REMOTE_ADDR="2001:db8:1:2:a:b:c:d")) == (
        "2001:db8:1:2::/64"
    )
    assert client_address(rf.post("/login/", REMOTE_ADDR="::ffff:192.0.2.9")) == "192.0.2.9"


# --- No user-existence oracle


def _comparable(response, name: str) -> tuple:
    body = response.content.decode().replace(name, "NAME")
    body = re.sub(r'(csrfmiddlewaretoken" value=|"X-CSRFToken": )"[^"]+"', r"\1TOKEN", body)
    return response.status_code, response.get("Retry-After"), body


def test_unknown_and_known_names_get_the_same_answers_and_the_same_work(client, alice, hashes):
    for n in range(11):
        before = hashes()
        known = _post(client, "alice", "wrong", addr="198.51.100.1")
        between = hashes()
        unknown = _post(client, "nobody", "wrong", addr="198.51.100.2")
        # One hash each (the unknown name's a stand-in), none once the name is locked.
        assert between - before == hashes() - between == (1 if n < 10 else 0), n
        assert _comparable(known, "alice") == _comparable(unknown, "nobody"), n
    assert _failures("user:alice") == _failures("user:nobody") == 11


# --- Upkeep and outages


def test_a_new_window_forgets_windows_that_are_over(client, alice):
    SignInThrottle.objects.create(key="user:long-ago", window_started_at=Now(), failures=3)
    SignInThrottle.objects.filter(key="user:long-ago").update(
        window_started_at=Now() - timedelta(hours=1)
    )
    _post(client, "alice", "wrong")
    assert not SignInThrottle.objects.filter(key="user:long-ago").exists()
    assert _failures("user:alice") == 1


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_is_a_503_page_not_a_500(alice):
    client = Client(raise_request_exception=False)
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict["HOST"] = "/nonexistent-socket-dir"
    try:
        response = _post(client, "alice", PASSWORD)
    finally:
        connection.settings_dict.update(saved)
        connection.close()
    assert response.status_code == 503
    assert "The database is unavailable" in response.content.decode()
    assert response["Retry-After"] == "5"
    assert "no-cache" in response["Cache-Control"]


# --- Many at once against a served process with a small pool


def _csrf(base: str) -> tuple[str, str]:
    """The CSRF cookie and the form's token from one GET of the sign-in page."""
    page = loopback.get(f"{base}/login/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return page.cookies["csrftoken"], token


@pytest.fixture
def procs(tmp_path):
    registry = Procs(tmp_path)
    try:
        yield registry
    finally:
        registry.close()


@pytest.mark.slow
def test_concurrent_sign_ins_on_a_pool_of_one_never_answer_500(transactional_db, make_user, procs):
    """Production's hasher (PBKDF2, about 0.6 s of CPU each here) behind a pool of one
    connection: a sign-in that held its connection through the hash made the others wait past
    the pool's timeout, and they answered 500. Nine at once on one worker, with a 2 s pool
    timeout: held, the last of them would wait 9 × 0.6 s and more; not held, they only take
    turns at the CPU. (It was 24 with the default 10 s timeout: three times the CPU, the
    suite's costliest test, for the same proof; 48 over two workers before that.)"""
    alice = make_user("alice")
    alice.password = PBKDF2PasswordHasher().encode(PASSWORD, "saltsaltsalt")
    alice.save(update_fields=["password"])
    env = {
        **base_env(),
        "DATABASE_URL": dburl.build(connection.settings_dict),
        "SWITCHBOARD_DB_POOL_SIZE": "1",
        "SWITCHBOARD_DB_POOL_TIMEOUT_SECONDS": "2",
        # The throttle is not what this test is about: every sign-in reaches the hash.
        "SWITCHBOARD_SIGNIN_FAILURES_PER_USER": "1000",
        "SWITCHBOARD_SIGNIN_FAILURES_PER_ADDRESS": "1000",
    }
    _server, base = procs.serve(env, workers=1)
    cookie, token = _csrf(base)

    # A third each: the right password, a wrong one, a name nobody has.
    tries = [("alice", PASSWORD), ("alice", "wrong"), ("nobody", PASSWORD)] * 3
    answers: list[tuple[str, str, int | str]] = [None] * len(tries)
    barrier = threading.Barrier(len(tries))

    def sign_in(n: int) -> None:
        username, password = tries[n]
        with httpx.Client(base_url=base, cookies={"csrftoken": cookie}, timeout=120) as client:
            barrier.wait()
            try:
                response = client.post(
                    "/login/",
                    data={"username": username, "password": password, "csrfmiddlewaretoken": token},
                )
                answers[n] = (username, password, response.status_code)
            except httpx.HTTPError as exc:
                answers[n] = (username, password, f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=sign_in, args=(n,)) for n in range(len(tries))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)

    expected = [(u, p, 302 if (u, p) == ("alice", PASSWORD) else 200) for u, p in tries]
    assert answers == expected, procs.logs()
