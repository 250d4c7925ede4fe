"""A first run from the command line: `make run PORT=… HOST=…`, a busy port's message that
works as printed, the first user's password kept in var/ (mode 600) and said again under the
demo's lines, and `adduser --team` into another user's personal team."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from switchboard.management.commands import up
from switchboard.queues import teams
from switchboard.queues.models import Membership, Team
from tests.crash.harness import free_port
from tests.shell import SWITCHBOARD, shell_env

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery"


@pytest.fixture
def cli_env() -> dict[str, str]:
    return shell_env()


def _make_n(*args: str, **env: str) -> str:
    """What `make run …` would run, from the project root."""
    done = subprocess.run(
        ["make", "-n", "run", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return next(line.rstrip() for line in done.stdout.splitlines() if "switchboard up" in line)


def _switchboard(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """``switchboard *args`` as a shell runs it, in ``cwd`` with ``env``."""
    return subprocess.run(
        [SWITCHBOARD, *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ---------------------------------------------------------------------------------------
# make run PORT=… HOST=…, and a busy port


def test_make_run_passes_port_and_host_to_switchboard_up():
    assert _make_n("PORT=8001").endswith("switchboard up --port '8001'")
    assert _make_n("PORT=8001", "HOST=0.0.0.0").endswith(
        "switchboard up --host '0.0.0.0' --port '8001'"
    )
    # A shell's own HOST or PORT is not an instruction: the default, 127.0.0.1:8000, stays.
    assert _make_n(HOST="workstation", PORT="3000").endswith("switchboard up")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
def test_a_busy_port_is_answered_with_a_make_run_that_works_as_printed(cli_env, tmp_path, host):
    with socket.socket() as busy:
        busy.bind((host, 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _switchboard(["up", "--host", host, "--port", str(port)], cli_env, tmp_path)
        offered = re.search(r"`make run (.+?)`", result.stderr)

    assert result.returncode == 1 and f"Cannot listen on {host}:{port}" in result.stderr
    assert offered is not None, result.stderr
    words = offered[1].split()
    free = int(words[-1].removeprefix("PORT="))
    assert free != port and words == ([] if host == "127.0.0.1" else [f"HOST={host}"]) + [
        f"PORT={free}"
    ]
    host_arg = "" if host == "127.0.0.1" else f"--host '{host}' "
    assert _make_n(*words).endswith(f"switchboard up {host_arg}--port '{free}'")
    assert not get_user_model().objects.exists()  # refused before touching anything


# ---------------------------------------------------------------------------------------
# The first user's password: printed, kept in var/first-sign-in.txt, said again


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_first_password_is_kept_in_var_readable_by_its_user_only(cli_env, tmp_path, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    log = tmp_path / "up.log"
    port = free_port()
    with log.open("w") as out:
        process = subprocess.Popen(
            [SWITCHBOARD, "up", "--no-demo", "--port", str(port)],
            env={**cli_env, "SWITCHBOARD_WEB_WORKERS": "1", "SWITCHBOARD_DATA_DIR": "var"},
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while "Stop with Ctrl-C" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()

    printed = log.read_text()
    credentials = re.search(r"Sign in as:\s+admin\n\s+password:\s+(\S+)", printed)
    assert credentials is not None, printed
    kept = tmp_path / "var" / up.SIGN_IN_FILE
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert credentials[0] in kept.read_text()  # the very lines printed
    assert f"(kept in var/{up.SIGN_IN_FILE}, readable by you only)" in printed
    assert get_user_model().objects.get(username="admin").check_password(credentials[1])
    # Written there and said on the terminal (here, the log this test made of it), once.
    holders = [p for p in tmp_path.rglob("*") if p.is_file() and credentials[1] in p.read_text()]
    assert sorted(holders) == sorted([kept, log]) and printed.count(credentials[1]) == 1


@pytest.mark.django_db(transaction=True)
def test_under_the_demos_lines_the_sign_in_is_said_again_until_someone_signs_in(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", "var")
    monkeypatch.delenv("SWITCHBOARD_PASSWORD", raising=False)
    out = io.StringIO()
    command = up.Command(stdout=out)
    command._demo = object()  # running
    command._banner("127.0.0.1", 8001, command._ensure_first_user())
    password = re.search(r"password:\s+(\S+)", out.getvalue())[1]

    out.truncate(0)
    out.seek(0)
    command._remind()
    assert out.getvalue().strip() == (
        "Switchboard is running at http://127.0.0.1:8001/: sign in as admin, password "
        f"{password} (kept in var/{up.SIGN_IN_FILE})."
    )

    get_user_model().objects.update(last_login=timezone.now())
    out.truncate(0)
    out.seek(0)
    command._remind()
    command._remind()
    assert out.getvalue() == "" and command._reminder is None


@pytest.mark.django_db(transaction=True)
def test_a_later_run_says_where_the_first_password_is(tmp_path, monkeypatch, user):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", "var")
    command = up.Command(stdout=io.StringIO())
    assert "first-sign-in" not in command._ensure_first_user().lines

    (tmp_path / "var").mkdir()
    (tmp_path / "var" / up.SIGN_IN_FILE).write_text("as written by the first run")

    said = command._ensure_first_user().lines
    assert said.startswith("Sign in with your existing user")
    assert f"The first user's first password is in var/{up.SIGN_IN_FILE}." in said


# ---------------------------------------------------------------------------------------
# adduser --team


def _adduser(*args: str) -> str:
    out = io.StringIO()
    call_command("adduser", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def password(monkeypatch):
    monkeypatch.setenv("SWITCHBOARD_PASSWORD", PASSWORD)
    return PASSWORD


@pytest.mark.django_db
def test_adduser_joins_another_users_personal_team_as_a_member(user, password):
    alices = user.teams.get()

    said = _adduser("bob", "--team", alices.slug)

    bob = get_user_model().objects.get(username="bob")
    roles = dict(alices.memberships.values_list("user__username", "role"))
    assert roles == {"alice": "owner", "bob": "member"}
    assert said == (
        f"Created user bob with personal team bob; member of team {alices.slug} "
        "(a personal team).\n"
    )
    owned = Membership.objects.filter(user=bob, role="owner").values_list("team__slug", flat=True)
    assert list(owned) == ["bob"]  # his own personal team, and only that


@pytest.mark.django_db
def test_adduser_refuses_the_new_users_own_personal_team_and_saves_nothing(db, password):
    with pytest.raises(CommandError, match="--team bob is bob's own personal team"):
        _adduser("bob", "--team", "bob")

    assert not get_user_model().objects.exists() and not Team.objects.exists()


@pytest.mark.django_db
def test_an_error_while_joining_leaves_no_user_behind_so_a_rerun_works(user, password, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(teams, "add_member", broken)
    with pytest.raises(RuntimeError):
        _adduser("bob", "--team", "alice")
    assert not get_user_model().objects.filter(username="bob").exists()
    assert not Team.objects.filter(slug="bob").exists()

    monkeypatch.undo()
    monkeypatch.setenv("SWITCHBOARD_PASSWORD", PASSWORD)
    assert "member of team alice" in _adduser("bob", "--team", "alice")


# ---------------------------------------------------------------------------------------
# Help, before anything is set up


@pytest.mark.parametrize("args", [[], ["--help"], ["help", "serve"], ["up", "--help"]])
def test_help_needs_no_key_and_starts_no_database(tmp_path, args):
    """The first thing a new user types: no SECRET_KEY, no SWITCHBOARD_DEV, no DATABASE_URL.
    Help is printed, and no data folder (an embedded PostgreSQL) is made for it."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"SECRET_KEY", "SWITCHBOARD_DEV", "DATABASE_URL", "DEBUG"}
        and not key.startswith("DJANGO")
    }
    env |= {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    done = _switchboard(args, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout.lower() or "subcommands" in done.stdout.lower(), done.stdout
    assert "SECRET_KEY" not in done.stderr
    assert not (tmp_path / "data").exists()
    assert not (tmp_path / "var").exists()
