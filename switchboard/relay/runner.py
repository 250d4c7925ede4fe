"""The relay's runner: ``Relay.run()`` checks the server, then works ``--concurrency`` slots,
each claiming (with a fence and a claimant label, long-polling while the queue is empty) and
running one ``Attempt`` at a time, until a signal, ``--once`` or ``--max-todos`` stops it."""

from __future__ import annotations

import heapq
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from switchboard.client import Backoff, Client, SwitchboardError, retryable
from switchboard.relay.attempt import Attempt
from switchboard.relay.config import RELAY_ERROR, RELAY_OK, RELAY_REFUSED, Config
from switchboard.relay.remote import Agent, RemoteAttempt

# The caps a server without them in GET /api/v1/ is assumed to have.
DEFAULT_LIMITS = {"summary_bytes": 2048, "result_bytes": 65536, "request_bytes": 1048576}


class Refused(Exception):
    """The server is not one the relay can work with: exit status 3."""


# What an attempt claimed as the relay stopped says as it is given back.
STOPPING = "the relay was stopping when this claim arrived; released"


class Relay:
    """The runner: ``run()`` works until stopped and returns the relay's exit status."""

    def __init__(
        self, config: Config, *, stdout: TextIO | None = None, stderr: TextIO | None = None
    ):
        self.config = config
        self.client = Client(
            config.url, config.token, backoff=Backoff(cap_seconds=config.retry_cap_seconds)
        )
        self.limits = dict(DEFAULT_LIMITS)
        self.stopping = threading.Event()  # claim no more; stop commands; release
        self.hurry = threading.Event()  # a second signal: no grace period, no waiting
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self._print_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._fatal: str | None = None
        self._numbers: list[int] = []  # claim numbers given back by claims that found nothing
        self._last_number = 0
        self._busy: set[int] = set()
        self._workdir: Path | None = None
        self._host = socket.gethostname()
        self._wait = config.wait_seconds
        self.then_offered = False  # the server takes then (check_server says)
        self._stop_reason: str | None = None
        self.agent: Agent | None = None  # with --a2a: the remote A2A agent (relay/remote.py)

    # --- running ---------------------------------------------------------------------------

    def run(self) -> int:
        try:
            self.check_server()
        except Refused as exc:
            self.say(f"refusing {self.config.url}: {exc}")
            return RELAY_REFUSED
        except OSError as exc:
            self.say(f"cannot reach {self.config.url}: {exc}")
            return RELAY_ERROR
        if self.config.a2a is not None:
            self.agent = Agent(self.config.a2a, self.config.a2a_token)
            self.say(f"each todo goes to the A2A agent at {self.agent.url}")
        temporary = self.config.workdir is None
        if temporary:
            self._workdir = Path(tempfile.mkdtemp(prefix="switchboard-relay-"))
        else:
            self._workdir = self.config.workdir
            self._workdir.mkdir(parents=True, exist_ok=True)
        restore = self._install_signal_handlers()
        quiet = self._say_client_log()
        self.say(
            f"working {self.config.url} with {self.config.concurrency} slot(s), "
            f"lease {self.config.lease_seconds}s, claimant {self.config.claimant!r}"
        )
        slots = [
            threading.Thread(target=self._slot, args=(n,), name=f"relay-slot-{n}", daemon=True)
            for n in range(1, self.config.concurrency + 1)
        ]
        try:
            for slot in slots:
                slot.start()
            announced = 0
            while any(slot.is_alive() for slot in slots):
                if self._stop_reason is not None and announced < 1:
                    self.say(
                        f"{self._stop_reason}: stopping; releasing what this relay holds "
                        "(again to hurry)"
                    )
                    announced = 1
                if self.hurry.is_set() and announced < 2:
                    self.say("asked again: stopping commands now, without the grace period")
                    announced = 2
                # After a second signal, stop waiting for idle long-polls (slots holding
                # no attempt); a claim one of them brings back then lapses and is reaped.
                if self.hurry.is_set() and not self._busy:
                    break
                for slot in slots:
                    slot.join(0.1)
        finally:
            restore()
            quiet()
            if temporary:
                shutil.rmtree(self._workdir, ignore_errors=True)
        if self._fatal:
            self.say(f"stopped: {self._fatal}")
            return RELAY_ERROR
        self.say("stopped")
        return RELAY_OK

    def stop(self, why: str = "asked to stop") -> None:
        """Stop claiming, stop the commands and release; a second call skips the grace
        period. Safe in a signal handler: it only sets events (``run`` says so)."""
        if self._stop_reason is not None:
            self.hurry.set()
            return
        self._stop_reason = why
        self.stopping.set()

    def check_server(self) -> None:
        """Refuse (``Refused``) a server whose ``GET /api/v1/`` is missing or does not offer
        attempt history and fences: without them a relay attempt learns nothing of the
        ones before it and a stale one cannot be fenced out (the record: no fallback)."""
        needs = "the relay needs a Switchboard with attempt history (GET /api/v1/ answering "
        needs += "features.attempt_history: true)"
        try:
            document = self.client.capabilities()
        except SwitchboardError as exc:
            raise Refused(f"GET /api/v1/ answered {exc.status} {exc.code}; {needs}") from None
        if not isinstance(document, dict) or document.get("name") != "switchboard":
            raise Refused(f"GET /api/v1/ does not describe a Switchboard; {needs}")
        features = document.get("features")
        features = features if isinstance(features, dict) else {}
        if features.get("attempt_history") is not True:
            version = document.get("version", "unknown")
            raise Refused(f"this server (version {version}) lacks attempt history; {needs}")
        if features.get("fences") is not True:
            raise Refused("this server lacks fences (require_fence); the relay claims with one")
        limits = document.get("limits")
        if isinstance(limits, dict):
            self.limits.update(
                {k: v for k, v in limits.items() if k in DEFAULT_LIMITS and isinstance(v, int)}
            )
        self.then_offered = isinstance(features.get("then"), dict)
        long_poll = features.get("long_poll")
        if isinstance(long_poll, dict) and isinstance(long_poll.get("max_wait_seconds"), int):
            self._wait = min(self._wait, long_poll["max_wait_seconds"])

    def _say_client_log(self) -> Callable[[], None]:
        """The client's log (each wait before a report or a claim is tried again) said as
        the relay's own lines, and nowhere else, while the relay runs."""
        client_log = logging.getLogger("switchboard.client")
        handler, propagate = _Said(self), client_log.propagate
        client_log.addHandler(handler)
        client_log.propagate = False

        def quiet() -> None:
            client_log.removeHandler(handler)
            client_log.propagate = propagate

        return quiet

    def _install_signal_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        names = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
        previous = {
            signum: signal.signal(signum, lambda signum, _frame: self.stop(names[signum]))
            for signum in names
        }

        def restore() -> None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

        return restore

    def fatal(self, message: str) -> None:
        with self._state_lock:
            self._fatal = self._fatal or message
        self.stopping.set()

    # --- a slot: claim, run, report, again --------------------------------------------------

    def _slot(self, slot: int) -> None:
        errors = 0
        carried: tuple[dict, str] | None = None  # a claim the last report brought back
        while not self.stopping.is_set():
            if carried is not None:
                (claimed, claimant), carried = carried, None
            else:
                number = self._take_number()
                if number is None:
                    return  # --max-todos reached
                claimant = self._claimant(number, slot)
                try:
                    claimed = self.client.claim_next(
                        wait_seconds=self._wait, claimant=claimant, **self._claim_arguments()
                    )
                except (SwitchboardError, OSError) as exc:
                    self._give_back(number)
                    errors += 1
                    if not self._claim_failed(exc, errors):
                        return
                    continue
                errors = 0
                if claimed.get("todo") is None:
                    self._give_back(number)
                    if self.config.once:
                        return
                    continue
            with self._state_lock:
                self._busy.add(slot)
            then = _NextClaim(self, slot)
            try:
                kind = RemoteAttempt if self.agent is not None else Attempt
                attempt = kind(self, claimed, claimant=claimant, then=then)
                if self.stopping.is_set():
                    attempt.release(STOPPING)
                    return
                attempt.run()
            finally:
                with self._state_lock:
                    self._busy.discard(slot)
            carried = then.taken(attempt.job.next)
        if carried is not None:  # the relay stopped just after a report brought it
            Attempt(self, carried[0], claimant=carried[1]).release(STOPPING)

    def _claimant(self, number: int, slot: int) -> str:
        return self.config.claimant.format(
            host=self._host, pid=os.getpid(), attempt=number, slot=slot
        )

    def _claim_arguments(self) -> dict:
        return {"require_fence": True, "lease_seconds": self.config.lease_seconds}

    def _claim_failed(self, exc: Exception, errors: int) -> bool:
        """Say why a claim failed and wait before the next, as the client's job loops wait
        (``Backoff``: full jitter, never shorter than the server's ``Retry-After``), or
        until the relay stops; False stops the slot: a refusal no later try can change."""
        if isinstance(exc, SwitchboardError):
            if exc.code in ("unauthorized", "forbidden"):
                self.fatal(f"claim_next answered {exc.code}: {exc.message}")
                return False
            if not retryable(exc) and exc.status < 500:
                self.fatal(f"claim_next answered {exc.status} {exc.code}: {exc.message}")
                return False
            # Any 5xx: a relay is left running unattended, so even a server's 500 is tried
            # again (said each time) rather than ending every slot.
            delay = self.client.backoff.wait(errors, exc.retry_after)
            self.say(f"claim_next answered {exc.status} {exc.code}; trying again in {delay:.1f}s")
        else:
            delay = self.client.backoff.wait(errors)
            self.say(f"claim_next failed ({type(exc).__name__}: {exc}); again in {delay:.1f}s")
        self.stopping.wait(delay)
        return True

    def _take_number(self) -> int | None:
        """The next claim's number for {attempt} (unique in this relay; one a claim that
        found nothing gave back is reused), or None once --max-todos claims were made."""
        with self._state_lock:
            if self._numbers:
                return heapq.heappop(self._numbers)
            if self.config.max_todos is not None and self._last_number >= self.config.max_todos:
                return None
            self._last_number += 1
            return self._last_number

    def _give_back(self, number: int) -> None:
        with self._state_lock:
            heapq.heappush(self._numbers, number)

    # --- output ---------------------------------------------------------------------------

    def say(self, message: str) -> None:
        self.emit(self.stderr, f"relay: {message}")

    def emit(self, stream: TextIO, line: str) -> None:
        with self._print_lock:
            try:
                stream.write(line + "\n")
                stream.flush()
            except (OSError, ValueError):
                pass  # our own output is gone (a closed pipe); keep working

    @property
    def workdir(self) -> Path:
        assert self._workdir is not None
        return self._workdir


class _Said(logging.Handler):
    def __init__(self, relay: Relay) -> None:
        super().__init__(logging.INFO)
        self.relay = relay

    def emit(self, record: logging.LogRecord) -> None:
        self.relay.say(record.getMessage())


class _NextClaim:
    """A slot's ``then``: each report of an attempt claims the slot's next todo in the same
    request (at once, without waiting; when it finds nothing the slot long-polls claim_next
    as before), unless the relay stops or the server does not offer ``then``.
    The next claim's number is taken once, however often the report is tried, and given back
    when the report brought no todo."""

    def __init__(self, relay: Relay, slot: int) -> None:
        self.relay, self.slot = relay, slot
        self.number: int | None = None

    def __call__(self) -> dict | None:
        relay = self.relay
        if relay.stopping.is_set() or not relay.then_offered:
            return None
        if self.number is None:
            self.number = relay._take_number()
            if self.number is None:
                return None  # --max-todos reached
        claimant = relay._claimant(self.number, self.slot)
        return {"claimant": claimant, **relay._claim_arguments()}

    def taken(self, claimed: dict | None) -> tuple[dict, str] | None:
        """What the report brought back, as the slot's next (claim, claimant)."""
        if self.number is None:
            return None
        if claimed is None or claimed.get("todo") is None:
            self.relay._give_back(self.number)
            return None
        if self.relay.stopping.is_set():
            Attempt(self.relay, claimed, claimant="").release(STOPPING)
            return None
        return claimed, self.relay._claimant(self.number, self.slot)
