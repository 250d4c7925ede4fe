"""The webhook guard and the POST: where webhooks may go, how they are signed, no redirects,
one DNS answer, a deadline. Receivers are local servers on 127.0.0.1; public addresses are
only classified here, never connected to."""

from __future__ import annotations

import socket

import pytest

from switchboard.queues import webhooks


def _post(url: str, secret: str = "sbw_test", body: bytes = b'{"event":"doorbell"}'):
    return webhooks.post(url, body=body, secret=secret, delivery_id=7, event="doorbell")


# --- Which addresses


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.20", "private"),
        ("fc00::1", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "not a public address"),  # carrier-grade NAT
        ("192.0.2.10", "private"),  # documentation range
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped: judged by the IPv4 inside
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "link-local"),
        # 6to4 (2002::/16) carries an IPv4 address: judged by it
        ("2002:7f00:1::", "loopback"),
        ("2002:a00:1::1", "private"),
        ("2002:a9fe:a9fe::", "link-local"),
        ("fec0::1", "site-local"),  # deprecated site-local, still routed in places
        ("fec0:1234::5", "site-local"),
    ],
)
def test_internal_addresses_are_forbidden(address, words):
    reason = webhooks.forbidden_reason(address)
    assert reason is not None and words in reason


@pytest.mark.parametrize(
    "address",
    ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"],
)
def test_public_addresses_are_allowed(address):
    assert webhooks.forbidden_reason(address) is None


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://files.example/x", "only http:// and https://"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("gopher://127.0.0.1:70/", "only http:// and https://"),
        ("https:///no-host", "no host"),
        ("https://user:pw@hooks.example/", "user name or password"),
        ("https://hooks.example:99999/", "not a valid URL"),
    ],
)
def test_only_plain_http_and_https_urls(url, words, allowed):
    with pytest.raises(webhooks.Refused, match=words):
        webhooks.resolve(url)


def test_localhost_by_name_is_refused_unless_allowed(settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(
        webhooks.Refused, match="localhost resolves to 127.0.0.1, a loopback address"
    ):
        webhooks.resolve("http://localhost:8000/hook")
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True
    target = webhooks.resolve("http://localhost:8000/hook?x=1")
    assert (target.host, target.port, target.path) == ("localhost", 8000, "/hook?x=1")
    assert target.address in ("127.0.0.1", "::1")


def test_a_name_with_any_internal_answer_is_refused(monkeypatch, settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = False

    def answers(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("8.8.8.8", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.5", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", answers)
    with pytest.raises(
        webhooks.Refused, match="mixed.example resolves to 10.0.0.5, a private address"
    ):
        webhooks.resolve("https://mixed.example/hook")


def test_the_form_check_refuses_internal_targets_but_not_unresolvable_names(settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = False
    problem = webhooks.url_problem("http://127.0.0.1:9000/hook")
    assert problem and problem.startswith("This URL cannot be used: 127.0.0.1 is a loopback")
    assert "loopback" in webhooks.url_problem("http://[::1]:9000/")
    assert "only http:// and https://" in webhooks.url_problem("ftp://x.example/")
    # A name that does not resolve now may later: the deliveries report it if it still fails.
    assert webhooks.url_problem("https://hooks.invalid/ring") is None
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True
    assert webhooks.url_problem("http://127.0.0.1:9000/hook") is None


# --- The POST


def test_a_post_is_signed_over_the_timestamp_and_body(receiver, allowed):
    server = receiver()
    body = '{"event":"dead_letter","title":"résumé"}'.encode()
    answer = webhooks.post(server.url, body=body, secret="sbw_s3", delivery_id=41, event="x")
    assert answer.ok and answer.status == 200 and answer.error == ""
    [request] = server.requests
    assert request.body == body and request.signed_by("sbw_s3")
    assert request.headers["x-switchboard-delivery"] == "41"
    assert request.headers["x-switchboard-event"] == "x"
    assert request.headers["x-switchboard-timestamp"].isdigit()
    assert request.headers["user-agent"] == webhooks.USER_AGENT
    assert request.headers["x-switchboard-signature"] == webhooks.sign(
        "sbw_s3", request.headers["x-switchboard-timestamp"], body
    )


def test_it_connects_to_the_checked_address_and_sends_the_name_as_host(
    receiver, allowed, monkeypatch
):
    """DNS rebinding: the name is resolved once; a second lookup would get another answer
    (here: none at all), and the connection must not make one."""
    server = receiver()
    real = socket.getaddrinfo
    lookups: list[str] = []

    def rebinding(host, port, *args, **kwargs):
        if host == "hooks.test":
            lookups.append(host)
            if len(lookups) > 1:
                raise socket.gaierror(socket.EAI_NONAME, "rebound")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    answer = _post(f"http://hooks.test:{server.port}/ring")
    assert answer.ok, answer.error
    assert lookups == ["hooks.test"]
    [request] = server.requests
    assert request.headers["host"] == f"hooks.test:{server.port}"
    assert request.path == "/ring"


def test_a_redirect_is_a_failure_and_is_not_followed(receiver, allowed):
    elsewhere = receiver()
    server = receiver([307], location=elsewhere.url)
    answer = _post(server.url)
    assert not answer.ok and answer.status == 307
    assert answer.error == "HTTP 307: a redirect, not followed"
    assert elsewhere.requests == []


def test_an_error_answer_keeps_a_short_error(receiver, allowed):
    server = receiver([500])
    answer = _post(server.url)
    assert answer.status == 500
    assert answer.error == "HTTP 500 Internal Server Error receiver says no"
    assert len(answer.error) <= webhooks.ERROR_MAX_CHARS


def test_a_receiver_that_does_not_answer_in_time_is_cut_off(receiver, allowed, monkeypatch):
    monkeypatch.setattr(webhooks, "DEADLINE_SECONDS", 0.5)
    server = receiver(delay=3)
    answer = _post(server.url)
    assert answer.status is None and answer.error.startswith("timed out")


def test_a_refused_target_is_an_answer_not_an_exception(receiver, settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = False
    server = receiver()
    answer = _post(server.url)
    assert answer.status is None and answer.error.startswith(
        "refused: 127.0.0.1 is a loopback address"
    )
    assert server.requests == []


def test_new_secrets_are_long_and_different():
    first, second = webhooks.new_secret(), webhooks.new_secret()
    assert first != second and first.startswith("sbw_") and len(first) >= 40
