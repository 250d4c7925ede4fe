"""What a demo run is asked to do (``Options``), and the error its person must fix."""

from __future__ import annotations

from dataclasses import dataclass


class DemoError(Exception):
    """Something the person running the demo must fix (shown without a traceback)."""


@dataclass(frozen=True, slots=True)
class Options:
    url: str = "http://127.0.0.1:8000"
    team: str = "demo"
    agents: int = 6
    todos: int = 12
    duration: float = 0  # seconds; 0 runs until stopped
    seed: int | None = None
    lease: int = 10  # seconds; short, so deaths are noticed and reaped within seconds
    pace: float = 6.0  # mean seconds an agent works on a todo; a new todo every 1.5 x pace
    members: tuple[str, ...] = ()
