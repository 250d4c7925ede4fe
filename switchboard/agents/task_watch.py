"""Following tasks as they change: a protocol's blocking send and its streams (agents/a2a.py,
agents/mcp_tasks.py) wait here for their todo to change, on the process's one LISTEN
connection, without polling.

How a change reaches a follower. The todos' statement trigger says a ``BoardNotice`` for each
changed todo of a *watched* team (queues/schema/functions.sql ``switchboard_board_todos``;
the Board's stream watches the teams it shows). This room keeps its own rows in
``board_watches`` (its holder, renewed every RENEW_SECONDS) for the teams whose todos it
follows, hears the notices (queues/notify), and wakes the followers of the todo named. A
follower then reads its task once (one statement) and says what changed. A lost LISTEN
connection wakes every follower (what was said meanwhile is lost: each reads again).

The order that loses nothing: ``follow`` writes the team's watch (and waits for the listener)
*before* the follower's first read, so a change committed after that read is heard.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, defaultdict
from collections.abc import AsyncIterator

from switchboard.queues.notify import BOARD, BoardNotice, Listener, LoopLocal, listener
from switchboard.queues.notify.watches import RENEW_SECONDS, TeamWatch, holder_name

log = logging.getLogger("switchboard.agents.tasks")

LISTEN_START_SECONDS = 5.0


class Follower:
    """One follower of one todo: ``dirty`` and ``changed`` are set when the todo may have
    changed (``changed`` may be shared by the followers of one subscription to many)."""

    __slots__ = ("changed", "dirty", "team_id", "todo_id")

    def __init__(self, team_id: int, todo_id: int, changed: asyncio.Event | None = None) -> None:
        self.team_id = team_id
        self.todo_id = todo_id
        self.changed = changed or asyncio.Event()
        self.dirty = False

    def mark(self) -> None:
        self.dirty = True
        self.changed.set()

    async def wait(self, timeout: float) -> bool:
        """Until the todo may have changed (True) or ``timeout`` passed (False); clears."""
        try:
            async with asyncio.timeout(timeout):
                await self.changed.wait()
        except TimeoutError:
            return False
        self.changed.clear()
        return True


class TaskWatch:
    """One per event loop: the followers by todo, the teams they watch, and the watch rows."""

    def __init__(self, hearing: Listener) -> None:
        self.listener = hearing
        self.followers: dict[int, set[Follower]] = defaultdict(set)
        self.teams: Counter[int] = Counter()
        self.watch = TeamWatch(holder_name("tasks:"))
        self._renewer: asyncio.Task | None = None
        hearing.subscribe(BOARD, self.hear)
        hearing.on_connect(self.everything_changed)

    def hear(self, notice: BoardNotice) -> None:
        for follower in self.followers.get(notice.todo or 0, ()):
            follower.mark()

    def everything_changed(self) -> None:
        for followers in self.followers.values():
            for follower in followers:
                follower.mark()

    @contextlib.asynccontextmanager
    async def follow(
        self, team_id: int, todo_id: int, changed: asyncio.Event | None = None
    ) -> AsyncIterator[Follower]:
        """Follow one todo; its team is watched (and the listener listening) on entry."""
        follower = Follower(team_id, todo_id, changed)
        self.followers[todo_id].add(follower)
        self.teams[team_id] += 1
        try:
            if not self.listener.listening.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.listener.listening.wait(), LISTEN_START_SECONDS)
            if team_id not in self.watch.watched:
                await self.watch.watch(self.teams)
            if self._renewer is None or self._renewer.done():
                self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())
            yield follower
        finally:
            followers = self.followers[todo_id]
            followers.discard(follower)
            if not followers:
                del self.followers[todo_id]
            self.teams[team_id] -= 1
            if not self.teams[team_id]:
                del self.teams[team_id]  # its row lapses, or goes at the next renewal

    async def _renew_forever(self) -> None:
        while self.teams or self.watch.watched:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                await self.watch.watch(self.teams)
            except Exception as exc:  # the database is away: the next renewal tries again
                log.warning("task watch: could not renew the watches: %s", exc)

    @property
    def following(self) -> int:
        return sum(len(f) for f in self.followers.values())


_watches: LoopLocal[TaskWatch] = LoopLocal(lambda loop: TaskWatch(listener()))


def task_watch() -> TaskWatch:
    """This event loop's task watch (its listener started)."""
    return _watches.get()
