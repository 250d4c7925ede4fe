"""Which teams' changes this process wants said on ``switchboard_board``: its rows in
``board_watches`` under one holder, each living WATCH_SECONDS and written again every
RENEW_SECONDS while anything here follows the team (queues/schema/functions.sql,
``switchboard_board_todos``, says only a watched team's changes). The Board's hub and the
agents' task watch each keep one."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterable

from switchboard.queues import db, sql

WATCH_SECONDS = 60  # a watch row's life, renewed every RENEW_SECONDS
RENEW_SECONDS = 20.0


def holder_name(prefix: str = "") -> str:
    """A name no other process and no other holder of this one shares."""
    return f"{prefix}{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class TeamWatch:
    """One holder's watched teams: ``watch`` makes them exactly the ones given."""

    def __init__(self, holder: str) -> None:
        self.holder = holder
        self.watched: frozenset[int] = frozenset()

    async def watch(self, team_ids: Iterable[int]) -> None:
        """Watch these teams (their rows written or renewed) and no others of this holder's
        (theirs deleted); ``watched`` says so once both statements ran."""
        teams = sorted(team_ids)
        params = {"team_ids": teams, "holder": self.holder, "seconds": WATCH_SECONDS}
        await db.arun(db.one(sql.BOARD_WATCH, params))
        await db.arun(db.one(sql.BOARD_UNWATCH, params))
        self.watched = frozenset(teams)
