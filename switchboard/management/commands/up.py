"""``switchboard up``: everything a local Switchboard needs, in one command (``make run``).

Migrates, makes sure someone can sign in, then runs the web server and the sweeper as child
processes until interrupted; on a database without todos, also the demo agents (``switchboard
demo``, a third child that works the queue over the HTTP API) unless ``--no-demo``. With no
DATABASE_URL the embedded PostgreSQL was started when this process read its settings; the
children inherit DATABASE_URL and only attach to it, so on the way out the children stop
first and the server, held by this process, stops last.

The sign-in banner comes last: once the web server answers HTTP and the demo's first burst
of lines is out, so the password is the last thing on the screen. The demo's lines go on and
bury it, so while the demo runs and nobody has signed in yet, its first line and the sign-in
are said again every few minutes. A password made here is also written to
``var/first-sign-in.txt``, readable by its user alone, so it can be found again later; it is
written nowhere else (no log).
In development the web server's access log (a line per request, most of them the demo's) is
off: ``SWITCHBOARD_ACCESS_LOG=1`` brings it back (``0`` turns it off anywhere); the children
read it from their environment (switchboard/gunicorn_conf.py).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections, transaction

from switchboard import embedded
from switchboard.queues.models import Todo

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How long the web server and sweeper get to stop before they are killed.
STOP_TIMEOUT_SECONDS = 15
READY_TIMEOUT_SECONDS = 60
# The demo's first lines (its team, endpoints and first todos) come in a burst; the banner
# waits until its todos stop appearing for this long, at most DEMO_SETTLE_MAX_SECONDS.
DEMO_QUIET_SECONDS = 0.8
DEMO_SETTLE_MAX_SECONDS = 8
ACCESS_LOG = "SWITCHBOARD_ACCESS_LOG"
# Where a password made for the first user is kept, in the data directory (./var).
SIGN_IN_FILE = "first-sign-in.txt"
# While the demo's lines scroll the banner away, how often the sign-in is said again.
REMIND_EVERY_SECONDS = 300


@dataclass(frozen=True, slots=True)
class SignIn:
    """How to sign in: as the banner says it (lines), and in a line (said again later)."""

    lines: str
    short: str


class Command(BaseCommand):
    help = (
        "Migrate, create a first user if there is none, then serve the Board and API with "
        "the sweeper until interrupted (what `make run` runs)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to bind [127.0.0.1]")
        parser.add_argument("--port", type=int, default=8000, help="port to bind [8000]")
        parser.add_argument("--no-demo", action="store_true", help="do not start the demo agents")

    def handle(self, *args, host: str, port: int, no_demo: bool, **options) -> None:
        _check_port_free(host, port)
        self._say("Migrating the database…")
        call_command("migrate", interactive=False, verbosity=0)
        # WhiteNoise serves from STATIC_ROOT under gunicorn, so CSS needs collecting first.
        call_command("collectstatic", interactive=False, verbosity=0)
        sign_in = self._ensure_first_user()
        # Only a database that never had work gets the demo: it is there to make a first look
        # at the Board alive, not to add made-up todos beside real ones.
        with_demo = not no_demo and not Todo.objects.exists()
        connections.close_all()  # nothing of this process's session crosses into the children

        self._stop_signal: int | None = None
        for signum in FORWARDED_SIGNALS:
            signal.signal(signum, self._on_signal)
        env = _child_environment()
        children = {
            "web server": _spawn("serve", "--host", host, "--port", str(port), env=env),
            "sweeper": _spawn("sweep", env=env),
        }
        # Started once the server answers (it works over HTTP), watched but not essential: if
        # it stops, Switchboard keeps running. Stopped first, so its agents can still hand
        # back the todos they hold before the web server goes.
        self._demo: subprocess.Popen | None = None
        self._reminder: str | None = None
        failed = None
        try:
            if self._wait_until_serving(host, port, children["web server"]):
                if with_demo:
                    url = _base_url(_connect_host(host), port)
                    self._demo = _spawn("demo", "--url", url, env=env)
                    self._wait_for_demo_to_settle()
                self._banner(host, port, sign_in)
            failed = self._supervise(children)
        finally:
            if self._demo is not None:
                self._stop_children({"demo agents": self._demo})
            self._stop_children(children)
            connections.close_all()
            if embedded.is_held():
                self._say("Stopping the embedded PostgreSQL…")
                embedded.stop()
        if failed is not None:
            raise CommandError(f"The {failed} exited unexpectedly; everything was stopped.")
        self._say("Stopped.")

    # ----------------------------------------------------------------------------------

    def _ensure_first_user(self) -> SignIn:
        """Create `admin` when the database has no user yet; say how to sign in. A password
        made here is kept in the data directory (mode 600) for when the terminal has
        scrolled or closed."""
        User = get_user_model()
        kept = embedded.data_dir() / SIGN_IN_FILE
        if User.objects.exists():
            lines = (
                "Sign in with your existing user (add one: `switchboard adduser NAME`; "
                "reset a password: `python manage.py changepassword NAME`)."
            )
            if kept.exists():
                lines += f"\n  The first user's first password is in {_shown(kept)}."
            return SignIn(lines, "sign in with your existing user")
        given = os.environ.get("SWITCHBOARD_PASSWORD", "")
        password = given or secrets.token_urlsafe(12)
        # The first user is the operator too (Django admin at /admin/); the post_save signal
        # gives them a personal team like everyone else. No user without its file, nor the
        # other way round.
        with transaction.atomic():
            User.objects.create_superuser("admin", email="", password=password)
            if given:
                kept.unlink(missing_ok=True)  # an earlier database's, no longer true
                shown = "the value of SWITCHBOARD_PASSWORD"
                return SignIn(f"Sign in as:  admin\n  password:   {shown}", "sign in as admin")
            credentials = f"Sign in as:  admin\n  password:   {password}"
            try:
                _write_private(
                    kept,
                    f"  {credentials}\n\nThe first user of this Switchboard, made by `switchboard "
                    "up`. `python manage.py changepassword admin` changes the password, not "
                    "this file.\n",
                )
            except OSError as exc:
                raise CommandError(
                    f"Cannot write {kept} ({exc.strerror}); no user was made."
                ) from exc
        return SignIn(
            f"{credentials}\n  (kept in {_shown(kept)}, readable by you only)",
            f"sign in as admin, password {password} (kept in {_shown(kept)})",
        )

    def _banner(self, host: str, port: int, sign_in: SignIn) -> None:
        shown_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        url = _base_url(shown_host, port) + "/"
        rule = "=" * 72
        lines = [
            rule,
            f"  Switchboard is running at {url}",
            f"  {sign_in.lines}",
        ]
        if self._demo is not None:
            lines.append("  Demo agents are working the queue (team demo); --no-demo to skip.")
            self._reminder = f"Switchboard is running at {url}: {sign_in.short}."
        lines += ["  Stop with Ctrl-C.", rule]
        self._say("\n" + "\n".join(lines) + "\n")

    def _remind(self) -> None:
        """The banner's first line and the sign-in again, under the demo's lines, until
        somebody has signed in."""
        try:
            signed_in = get_user_model().objects.filter(last_login__isnull=False).exists()
        except DatabaseError:
            signed_in = False  # a remote database restarting: say it anyway
        finally:
            connections.close_all()
        if signed_in:
            self._reminder = None
        else:
            self._say(f"\n  {self._reminder}\n\n")

    def _wait_until_serving(self, host: str, port: int, web: subprocess.Popen) -> bool:
        """Until the web server answers HTTP (its workers booted, their start-up lines out),
        not merely until its socket accepts."""
        url = _base_url(_connect_host(host), port) + "/healthz"
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline and self._stop_signal is None and web.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        time.sleep(0.3)  # the other workers' last start-up lines
                        return True
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        return False

    def _wait_for_demo_to_settle(self) -> None:
        """Until the demo's first todos stop arriving (its start-up burst of lines)."""
        deadline = time.monotonic() + DEMO_SETTLE_MAX_SECONDS
        seen, quiet_since = -1, time.monotonic()
        try:
            while time.monotonic() < deadline and self._stop_signal is None:
                if self._demo is None or self._demo.poll() is not None:
                    return
                count = Todo.objects.count()
                if count != seen:
                    seen, quiet_since = count, time.monotonic()
                elif count and time.monotonic() - quiet_since >= DEMO_QUIET_SECONDS:
                    return
                time.sleep(0.2)
        finally:
            connections.close_all()

    def _supervise(self, children: dict[str, subprocess.Popen]) -> str | None:
        """Wait for a stop signal (None) or a child that exits on its own (its name)."""
        remind_at = time.monotonic() + REMIND_EVERY_SECONDS
        while self._stop_signal is None:
            for name, child in children.items():
                if child.poll() is not None:
                    return name
            if self._demo is not None and self._demo.poll() is not None:
                self._say(
                    f"The demo agents stopped (exit status {self._demo.returncode}); "
                    "Switchboard keeps running."
                )
                self._demo = None
            if self._demo is not None and self._reminder and time.monotonic() >= remind_at:
                remind_at += REMIND_EVERY_SECONDS
                self._remind()
            time.sleep(0.2)
        return None

    def _on_signal(self, signum: int, frame) -> None:
        first = self._stop_signal is None
        self._stop_signal = signum
        if first:
            self._say(f"\nStopping ({signal.Signals(signum).name})…")

    def _stop_children(self, children: dict[str, subprocess.Popen]) -> None:
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for name, child in children.items():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._say(f"The {name} did not stop in {STOP_TIMEOUT_SECONDS}s; killing it.")
                child.kill()
                child.wait()

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()


def _child_environment() -> dict[str, str]:
    """The children's environment: this one, with the access log off in development unless
    SWITCHBOARD_ACCESS_LOG says otherwise."""
    env = os.environ.copy()
    if settings.SWITCHBOARD_DEV and not env.get(ACCESS_LOG, "").strip():
        env[ACCESS_LOG] = "0"
    return env


def _spawn(*command: str, env: dict[str, str]) -> subprocess.Popen:
    # The same interpreter and settings; DATABASE_URL (set when the embedded server started)
    # makes the child attach to this process's database instead of starting its own.
    # Each child in a process group of its own: Ctrl-C in the terminal then reaches only this
    # process, which stops the children in order (the demo agents hand back their todos
    # while the web server still answers; gunicorn, interrupted at the same moment, would
    # leave their last calls hanging until its graceful timeout).
    return subprocess.Popen(
        [sys.executable, "-m", "switchboard", *command], env=env, process_group=0
    )


def _base_url(host: str, port: int) -> str:
    return f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"


def _connect_host(host: str) -> str:
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)


def _shown(path: Path) -> str:
    """``path`` as typed from here (``var/first-sign-in.txt``), else whole."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def _write_private(path: Path, text: str) -> None:
    """``text`` in ``path``, readable and writable by this user only."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, 0o600)  # a file already there keeps its mode through open()
        out.write(text)


def _bind_problem(host: str, port: int) -> OSError | None:
    """Why ``host:port`` cannot be listened on, or None when it can."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc
    return None


def _check_port_free(host: str, port: int) -> None:
    """Refuse a port in use before anything is touched, offering the next free one as a
    command that works as printed: most people started this with ``make run``, and
    ``switchboard`` is not on their PATH."""
    problem = _bind_problem(host, port)
    if problem is None:
        return
    free = next(
        (n for n in range(port + 1, min(port + 100, 65536)) if _bind_problem(host, n) is None),
        port + 1,
    )
    where = "" if host == "127.0.0.1" else f"HOST={host} "
    raise CommandError(
        f"Cannot listen on {host}:{port} ({problem.strerror}). Stop whatever uses it, or "
        f"choose another port, from the project root: `make run {where}PORT={free}` "
        f"(`--port {free}` if you run `switchboard up` yourself)."
    )
