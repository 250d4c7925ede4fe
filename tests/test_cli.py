"""The `switchboard` command as a user runs it: real subprocesses against the test database."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import global_settings
from django.contrib.auth import get_user_model

from switchboard.queues import endpoints, schedules, transitions
from switchboard.queues.models import (
    Endpoint,
    Membership,
    Schedule,
    Team,
    Todo,
    TodoAttempt,
    TodoEvent,
)
from switchboard.queues.schedules import OPERATOR
from switchboard.queues.transitions import Actor
from tests.crash.harness import free_port
from tests.queues.helpers import ADDED_PAUSED_RESUMED_REMOVED, lapse_lease, schedule_audit
from tests.shell import SWITCHBOARD, shell_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def cli_env() -> dict[str, str]:
    return shell_env()


@pytest.fixture
def real_hashers(settings):
    """The subprocesses hash with the production hashers; the test settings' fast MD5 hasher
    alone could not check what they stored."""
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS


@pytest.fixture
def switchboard(cli_env, tmp_path):
    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [SWITCHBOARD, *args],
            env={**cli_env, **env},
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


def test_outside_development_it_refuses_to_start_without_a_secret_key(switchboard, db):
    result = switchboard("sweep", "--once", SWITCHBOARD_DEV="0")

    assert result.returncode == 2
    assert "switchboard: SECRET_KEY is not set" in result.stderr
    assert "SWITCHBOARD_DEV=1" in result.stderr  # the way to run it locally
    assert "Traceback" not in result.stderr


def test_a_database_it_cannot_reach_is_one_line_naming_where_it_looked(switchboard, db):
    result = switchboard(
        "schedule", "list", DATABASE_URL="postgresql://sb:hunter2@127.0.0.1:9/nowhere"
    )

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("switchboard: the database at 127.0.0.1:9, database 'nowhere' failed:")
    assert "Connection refused" in line  # why, as the fresh connection was told
    assert "hunter2" not in line and "sb:" not in line


# ---------------------------------------------------------------------------------------
# vend


def test_vend_prints_only_the_token(switchboard, team):
    result = switchboard("vend", "docs-builder", "--team", team.slug, "--verbs", "complete,claim")

    assert result.returncode == 0, result.stderr
    token = result.stdout.removesuffix("\n")
    assert token and "\n" not in token and " " not in token
    endpoint = endpoints.authenticate(token)
    assert endpoint is not None
    assert (endpoint.agent_id, endpoint.team_id) == ("docs-builder", team.id)
    assert endpoint.verbs == ["claim", "complete"]
    assert "shown once" in result.stderr


def test_vend_to_an_unknown_team_fails_with_a_clear_message(switchboard, team):
    result = switchboard("vend", "docs-builder", "--team", "no-such-team")

    assert result.returncode == 1
    assert result.stdout == ""
    assert "No team with slug 'no-such-team'" in result.stderr
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--verbs", "claim,teleport"], "Unknown verbs: teleport"),
        (["--name", "again"], "already exists"),
    ],
)
def test_vend_refuses_bad_input(switchboard, team, args, message):
    endpoints.vend(team, "docs-builder")

    result = switchboard("vend", "docs-builder", "--team", team.slug, *args)

    assert result.returncode == 1 and result.stdout == ""
    assert message in result.stderr
    assert Endpoint.objects.count() == 1


# ---------------------------------------------------------------------------------------
# adduser


def test_adduser_creates_a_team_and_makes_them_its_owner(switchboard, real_hashers):
    password = "correct horse battery"

    first = switchboard("adduser", "bob", "--team", "ops", "--staff", SWITCHBOARD_PASSWORD=password)
    second = switchboard("adduser", "carol", "--team", "ops", SWITCHBOARD_PASSWORD=password)

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    bob = get_user_model().objects.get(username="bob")
    carol = get_user_model().objects.get(username="carol")
    assert bob.check_password(password) and bob.is_staff and not bob.is_superuser
    assert list(bob.groups.values_list("name", flat=True)) == ["Operators"]  # an operator
    assert not carol.is_staff and not carol.groups.exists()
    roles = dict(Membership.objects.filter(team__slug="ops").values_list("user__username", "role"))
    assert roles == {"bob": "owner", "carol": "member"}
    assert bob.teams.filter(personal=True).count() == 1  # the post_save signal's team
    assert "owner of team ops (new); in the Operators group." in first.stdout


def test_adduser_refuses_an_existing_name(switchboard, user):
    result = switchboard("adduser", user.username, SWITCHBOARD_PASSWORD="another long one")

    assert result.returncode == 1
    assert "already exists" in result.stderr
    assert user.teams.count() == 1


def test_adduser_without_a_password_or_a_terminal_fails(switchboard, db):
    result = switchboard("adduser", "dave")

    assert result.returncode == 1
    assert "SWITCHBOARD_PASSWORD" in result.stderr
    assert not get_user_model().objects.filter(username="dave").exists()
    assert not Team.objects.exists()


def test_adduser_applies_the_password_rules(switchboard, db):
    result = switchboard("adduser", "erin", SWITCHBOARD_PASSWORD="short")

    assert result.returncode == 1
    assert "too short" in result.stderr
    assert not get_user_model().objects.exists()


# ---------------------------------------------------------------------------------------
# sweep


def test_sweep_once_reaps_a_lapsed_lease_and_prints_the_counts(switchboard, endpoint, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)

    result = switchboard("sweep", "--once")

    assert result.returncode == 0, result.stderr
    assert "reaped: 1" in result.stdout.splitlines()
    assert "deleted_by_age: 0" in result.stdout.splitlines()
    assert Todo.objects.get(pk=todo.id).state == "pending"


# ---------------------------------------------------------------------------------------
# schedule


def test_schedule_add_prints_only_the_id_and_is_audited_as_the_operators(switchboard, endpoint):
    result = switchboard(
        "schedule", "add", "nightly", "--team", endpoint.team.slug, "--endpoint",
        endpoint.agent_id, "--cron", "0 2 * * *", "--timezone", "Europe/Berlin",
        "--title", "Triage for {date}", "--catch-up", "latest",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    schedule = Schedule.objects.get()
    assert result.stdout == f"{schedule.pk}\n"
    assert (schedule.endpoint_id, schedule.cron, schedule.timezone) == (
        endpoint.pk,
        "0 2 * * *",
        "Europe/Berlin",
    )
    assert (schedule.title_template, schedule.catch_up) == ("Triage for {date}", "latest")
    assert "next run" in result.stderr and "02:00 CE" in result.stderr  # CET or CEST
    event = TodoEvent.objects.get(kind="schedule_add")
    assert event.actor_user_id is None and event.detail["by"] == "operator"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "0 9 * * MON-FUN"], "cron's day-of-week field: 'FUN' is not a number"),
        (["--cron", "0 9 * * *", "--timezone", "Mars/Base"], "Unknown time zone 'Mars/Base'"),
        (["--every", "30"], "interval_seconds must be"),
        (["--every", "60", "--endpoint", "nobody"], "No endpoint 'nobody' in team"),
        (["--every", "60", "--title", "{yesterday}"], "unknown placeholder {yesterday}"),
    ],
)
def test_schedule_add_refuses_bad_input_and_writes_nothing(switchboard, endpoint, args, message):
    base = ["--team", endpoint.team.slug, "--endpoint", endpoint.agent_id, "--title", "T"]

    result = switchboard("schedule", "add", "nightly", *base, *args)

    assert result.returncode == 1 and result.stdout == ""
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not Schedule.objects.exists()


def test_schedule_add_needs_a_cron_or_an_interval(switchboard, endpoint):
    result = switchboard(
        "schedule", "add", "nightly", "--team", endpoint.team.slug, "--endpoint",
        endpoint.agent_id, "--title", "T",
    )  # fmt: skip

    assert result.returncode != 0
    assert "one of the arguments --cron --every is required" in result.stderr


def test_schedule_list_pause_resume_and_remove(switchboard, endpoint):
    schedule = schedules.add(
        endpoint, by=OPERATOR, name="poll", interval_seconds=300, title_template="Poll"
    )

    listed = switchboard("schedule", "list", "--team", endpoint.team.slug)
    paused = switchboard("schedule", "pause", str(schedule.pk))
    listed_paused = switchboard("schedule", "list")
    resumed = switchboard("schedule", "resume", str(schedule.pk))
    removed = switchboard("schedule", "remove", str(schedule.pk))
    gone = switchboard("schedule", "pause", str(schedule.pk))

    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["ID", "ENDPOINT", "NAME"]
    assert row.split()[:3] == [
        str(schedule.pk),
        f"{endpoint.team.slug}/{endpoint.agent_id}",
        "poll",
    ]
    assert "every 300 s" in row
    assert "paused" in listed_paused.stdout.splitlines()[1]
    assert paused.returncode == resumed.returncode == removed.returncode == 0
    assert "next run" in resumed.stderr
    assert (gone.returncode, gone.stdout) == (1, "")
    assert "No such schedule." in gone.stderr
    assert not Schedule.objects.exists()
    assert schedule_audit() == ADDED_PAUSED_RESUMED_REMOVED


def test_schedule_list_of_an_unknown_team_says_so(switchboard, db):
    result = switchboard("schedule", "list", "--team", "nowhere")

    assert result.returncode == 1
    assert "No team with slug 'nowhere'" in result.stderr


# ---------------------------------------------------------------------------------------
# serve and up: long-running; started, checked over HTTP, stopped


def _start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(
            [SWITCHBOARD, *args],
            env=env,
            cwd=log.parent,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait_for_200(url: str, process: subprocess.Popen, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"exited with {process.returncode} before serving:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.2)
    pytest.fail(f"{url} never answered 200:\n{log.read_text()}")


def _stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


@contextmanager
def _serving(args: list[str], port: int, env: dict, log: Path) -> Iterator[None]:
    """``switchboard <args> --port <port>`` for the block, from when it answers its login page
    with 200; stopped with SIGTERM at the end, and then it must have exited 0."""
    process = _start([*args[:1], "--port", str(port), *args[1:]], env, log)
    try:
        _wait_for_200(f"http://127.0.0.1:{port}/login/", process, log)
        yield
    finally:
        code = _stop(process)
    assert code == 0, log.read_text()


def _refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def test_serve_answers_the_login_page(cli_env, tmp_path, db):
    port = free_port()
    env = {**cli_env, "SWITCHBOARD_WEB_WORKERS": "1"}
    with _serving(["serve"], port, env, tmp_path / "serve.log"):
        pass  # it answered the login page
    assert _refuses_connections(port)


def _up_until_the_banner(env: dict, tmp_path: Path, port: int) -> str:
    """Start ``up``, wait until it serves and prints its banner, stop it; its output."""
    log = tmp_path / "up.log"
    with _serving(["up"], port, env, log):
        _wait_for_banner(log)
    return log.read_text()


def _wait_for_banner(log: Path) -> None:
    """`up` prints how to sign in once its server answers, a moment after we see it do so."""
    deadline = time.monotonic() + 10
    while "Stop with Ctrl-C" not in log.read_text():
        if time.monotonic() > deadline:
            pytest.fail(f"no sign-in banner:\n{log.read_text()}")
        time.sleep(0.1)


def _sign_in(base: str, username: str, password: str) -> str:
    """Sign in through the login form as a browser would; return the page landed on."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with opener.open(f"{base}login/") as response:
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode())
    assert csrf is not None
    form = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": csrf[1], "username": username, "password": password}
    ).encode()
    with opener.open(f"{base}login/", data=form) as response:
        assert response.url == base
        return response.read().decode()


def test_up_makes_a_first_user_serves_and_stops_its_children(cli_env, tmp_path, real_hashers):
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    env = {**cli_env, "SWITCHBOARD_WEB_WORKERS": "1"}
    log = tmp_path / "up.log"
    with _serving(["up", "--no-demo"], port, env, log):
        with urllib.request.urlopen(f"{base}static/board/board.css") as css:
            assert css.status == 200
        _wait_for_banner(log)
        printed = re.search(r"Sign in as:\s+(\S+)\n\s+password:\s+(\S+)", log.read_text())
        assert printed is not None, log.read_text()
        page = _sign_in(base, printed[1], printed[2])

    output = log.read_text()
    assert f"Switchboard is running at {base}" in output
    assert printed[1] == "admin" and get_user_model().objects.get().username == "admin"
    # The Board, signed in: a first run (no endpoint yet) is headed for what it shows.
    assert "<h1>Get started</h1>" in page and ">admin</span>" in page
    assert "sweeper started" in output and "sweeper stopped" in output
    # In development the access log is off: the banner is not buried under request lines.
    assert '"GET /login/' not in output and "GET /static/" not in output, output
    assert _refuses_connections(port)


def test_up_does_not_echo_a_password_it_was_given(cli_env, tmp_path, real_hashers):
    port = free_port()
    env = {
        **cli_env,
        "SWITCHBOARD_PASSWORD": "given by the operator",
        "SWITCHBOARD_WEB_WORKERS": "1",
    }
    output = _up_until_the_banner(env, tmp_path, port)
    assert "password:   the value of SWITCHBOARD_PASSWORD" in output
    assert "given by the operator" not in output
    assert get_user_model().objects.get().check_password("given by the operator")


def test_up_on_a_busy_port_says_so_before_touching_anything(switchboard, db):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = switchboard("up", "--port", str(busy.getsockname()[1]))

    assert result.returncode == 1
    assert "Cannot listen on 127.0.0.1:" in result.stderr and "--port" in result.stderr
    assert not get_user_model().objects.exists()


def test_up_on_an_empty_database_starts_the_demo_and_stops_it(cli_env, tmp_path):
    port = free_port()
    env = {**cli_env, "SWITCHBOARD_WEB_WORKERS": "1"}
    log = tmp_path / "up.log"
    with _serving(["up"], port, env, log):
        _wait_for_banner(log)
        deadline = time.monotonic() + 20
        while not TodoAttempt.objects.filter(todo__endpoint__team__slug="demo").exists():
            if time.monotonic() > deadline:
                pytest.fail(f"no demo agent claimed anything:\n{log.read_text()}")
            time.sleep(0.2)

    output = log.read_text()
    assert "Demo agents are working the queue (team demo); --no-demo to skip." in output
    assert "demo stopped" in output
    admin = get_user_model().objects.get()
    assert Membership.objects.get(team__slug="demo", user=admin).role == "owner"
    assert Todo.objects.filter(endpoint__team__slug="demo").count() >= 12
    assert _refuses_connections(port)


def test_up_leaves_a_database_that_has_todos_without_the_demo(cli_env, tmp_path, make_todo):
    make_todo()
    port = free_port()
    env = {**cli_env, "SWITCHBOARD_WEB_WORKERS": "1"}
    output = _up_until_the_banner(env, tmp_path, port)
    assert "Demo agents" not in output and "demo stopped" not in output
    assert not Team.objects.filter(slug="demo").exists()
    assert Todo.objects.count() == 1


def test_version_needs_no_settings(tmp_path):
    result = subprocess.run(
        [SWITCHBOARD, "--version"],
        env={"PATH": os.environ["PATH"]},  # no SECRET_KEY, no SWITCHBOARD_DEV
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"switchboard \S+\n", result.stdout)


@pytest.mark.parametrize(
    "args, env, laptop",
    [
        (["up"], {}, True),
        (["up", "--port", "8001", "--host", "localhost"], {}, True),
        (["up", "--host=::1"], {}, True),
        (["up", "--host", "0.0.0.0"], {}, False),  # others could reach it: a key is needed
        (["up"], {"SWITCHBOARD_DEV": "0"}, False),  # said outright
        (["up"], {"SECRET_KEY": "k" * 50}, False),  # a real key: production settings
        (["serve"], {}, False),  # only up is the laptop's command
    ],
)
def test_up_on_loopback_without_a_key_runs_as_a_laptop(monkeypatch, args, env, laptop):
    from switchboard import cli

    for name in ("SWITCHBOARD_DEV", "SECRET_KEY", "DEBUG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli._up_on_this_machine(args) is laptop
