"""The demo's engine: it sets the team up, seeds the first todos, runs each ``Agent`` of the
script in a thread of its own (claiming over HTTP, an error said and waited out) beside a
thread that keeps creating todos, and stops them all when the duration is over or ``stop``
is set (agents hand back what they hold)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import datetime

from django.db import connections

from switchboard.client import Client, SwitchboardError
from switchboard.demo.options import DemoError, Options
from switchboard.demo.script import (
    FATES,
    FOREIGN_FATES,
    ROLES,
    Agent,
    draft_todo,
    draw,
    short,
)
from switchboard.demo.team import Setup, prepare


class Demo:
    """One run: the clients of the endpoints in play, the todos' fates, the threads."""

    def __init__(
        self,
        options: Options,
        setup: Setup,
        *,
        stop: threading.Event,
        say: Callable[[str], None],
    ) -> None:
        self.options = options
        self.setup = setup
        self.stop = stop
        self._say = say
        self._say_lock = threading.Lock()
        master = random.Random(options.seed)
        self.rng = random.Random(master.getrandbits(64))
        self.agent_seeds = [master.getrandbits(64) for _ in range(options.agents)]
        self.clients = {
            agent_id: Client(options.url, token, timeout=60)
            for agent_id, token in setup.tokens.items()
        }
        # Held across a create and the recording of its fate, so an agent that claims the
        # new todo before create_todo has even answered still learns its fate.
        self._fates_lock = threading.Lock()
        self._fates: dict[int, str] = {}
        # Long-polls are cut short so a stop is noticed within a few seconds.
        self.poll_seconds = min(3.0, max(1.0, options.pace))

    def say(self, text: str) -> None:
        with self._say_lock:
            self._say(_stamped(text))

    def fate_of(self, todo_id: int, rng: random.Random) -> str:
        with self._fates_lock:
            fate = self._fates.get(todo_id)
        return fate or draw(FOREIGN_FATES, rng)

    # --- todos ---

    def create(self, fate: str | None = None) -> None:
        """One new todo the script drafts, its fate recorded."""
        draft = draft_todo(self.rng, list(self.clients), fate)
        with self._fates_lock:
            todo = self.clients[draft.sender].create_todo(**draft.arguments)["todo"]
            self._fates[todo["id"]] = draft.fate
        via = f" (sent by {draft.sender})" if draft.sender != draft.agent_id else ""
        self.say(f"{draft.agent_id:<9} new #{todo['id']} {short(draft.arguments['title'])}{via}")

    def keep_creating(self) -> None:
        # A little slower than the agents work, so the queue drains and refills.
        mean = 1.5 * self.options.pace
        while not self.stop.wait(self.rng.expovariate(1 / mean)):
            try:
                self.create()
            except Exception as exc:  # a demo keeps going; the next create may work
                if not self.stop.is_set():
                    self.say(f"could not create a todo: {exc}")
                    self.stop.wait(2)

    def work(self, agent: Agent) -> None:
        """An agent's thread: one claimed todo after another until the stop; what goes wrong
        is said and waited out, so the demo keeps going."""
        # Stagger the first claims so the agents do not all start in the same instant.
        self.stop.wait(agent.rng.uniform(0, min(2.0, self.options.pace)))
        while not self.stop.is_set():
            try:
                agent.work_one()
            except SwitchboardError as exc:
                if exc.code == "unauthorized":
                    agent.say("token refused (rotated by another demo run?); this agent stops")
                    return
                if not self.stop.is_set():
                    agent.say(f"unexpected answer: {exc}")
                    self.stop.wait(2)
            except OSError as exc:
                if not self.stop.is_set():
                    agent.say(f"cannot reach the server ({exc}); retrying")
                    self.stop.wait(2)
            except Exception as exc:  # e.g. a proxy's HTML error page: keep the demo going
                if not self.stop.is_set():
                    agent.say(f"unexpected {type(exc).__name__}: {exc}")
                    self.stop.wait(2)

    # --- the whole run ---

    def run(self) -> None:
        self.wait_for_server()
        fates = list(FATES)
        self.rng.shuffle(fates)
        for i in range(self.options.todos):
            if self.stop.is_set():
                return
            self.create(fates[i] if i < len(fates) else None)
        roster = list(self.clients)
        agents = []
        for i in range(self.options.agents):
            agent_id = roster[i % len(roster)]
            client = self.clients[agent_id]
            agents.append(
                Agent(self, index=i, agent_id=agent_id, client=client, seed=self.agent_seeds[i])
            )
        workers = [
            threading.Thread(target=self.work, args=(agent,), name=f"demo-agent-{i}", daemon=True)
            for i, agent in enumerate(agents)
        ]
        creator = threading.Thread(target=self.keep_creating, name="demo-creator", daemon=True)
        for thread in [*workers, creator]:
            thread.start()
        self.say(
            f"{len(workers)} agents on {len(roster)} endpoints in team {self.setup.team.slug} "
            f"at {self.options.url}"
        )
        self.stop.wait(self.options.duration or None)
        self.stop.set()
        # An agent notices the stop after its current long-poll or unit of work, and hands
        # back what it holds. Daemon threads: one stuck on a dead server cannot hang the exit.
        deadline = time.monotonic() + self.poll_seconds + 10
        for thread in [*workers, creator]:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        self.say("demo stopped")

    def wait_for_server(self, seconds: float = 15) -> None:
        client = next(iter(self.clients.values()))
        deadline = time.monotonic() + seconds
        told = False
        while True:
            try:
                client.list_todos(limit=1)
                return
            except OSError as exc:
                if time.monotonic() > deadline or self.stop.is_set():
                    raise DemoError(
                        f"Nothing answers at {self.options.url} ({exc}). Start Switchboard "
                        "first (`switchboard up`), or point --url at it."
                    ) from exc
                if not told:
                    self.say(f"waiting for {self.options.url} to answer…")
                    told = True
                self.stop.wait(0.5)
            except SwitchboardError as exc:
                if exc.code == "unavailable" and time.monotonic() < deadline:
                    self.stop.wait(0.5)
                    continue
                raise DemoError(
                    f"{self.options.url} refused the demo's token ({exc}). Is that server "
                    "using this database? The demo vends its endpoints in the database it "
                    "runs against."
                ) from exc


def _stamped(text: str) -> str:
    return f"{datetime.now():%H:%M:%S}  {text}"  # noqa: DTZ005 (the terminal's local time)


def run(options: Options, *, stop: threading.Event, say: Callable[[str], None]) -> None:
    """Set up in the calling thread, then run the agents until ``stop`` is set or the
    duration is over. The waiting is done in a worker thread: the caller's thread only
    joins it, so a signal handler there may set ``stop`` without ever contending for a lock
    the demo holds (as ``switchboard sweep`` does)."""
    if options.agents < 1 or options.todos < 0 or options.duration < 0:
        raise DemoError("--agents must be at least 1; --todos and --duration not negative.")
    if not 1 <= options.lease <= 86400 or options.pace <= 0:
        raise DemoError("--lease must be 1..86400 seconds and --pace above 0.")
    try:
        setup = prepare(
            team_slug=options.team,
            roles=min(options.agents, len(ROLES)),
            members=options.members,
        )
    finally:
        # From here on everything goes over HTTP; no database connection is kept idle.
        connections.close_all()
    rotated = f"; rotated the tokens of {', '.join(setup.rotated)}" if setup.rotated else ""
    say(_stamped(f"team {setup.team.slug}{' (new)' if setup.new_team else ''}{rotated}"))
    demo = Demo(options, setup, stop=stop, say=say)
    failure: list[BaseException] = []

    def main() -> None:
        try:
            demo.run()
        except BaseException as exc:  # handed to the caller's thread below
            failure.append(exc)
        finally:
            stop.set()

    worker = threading.Thread(target=main, name="demo")
    worker.start()
    while worker.is_alive():
        worker.join(timeout=0.5)
    if failure:
        raise failure[0]
