"""``switchboard demo``: simulated agents working a team's queues over the HTTP API.

A newcomer's first look at the Board should show a queue that moves: todos arriving, leases
held and heartbeated, work completed, failed, retried and dead-lettered, workers dying
mid-lease and being taken over, a stale worker fenced out. The demo sets up a team and a
few endpoints through the ORM (it runs beside the server's database, like ``vend``), then
drives everything else through ``switchboard.client`` exactly as a real agent would, so the
demo also exercises the API it shows off.

Each todo's fate is chosen when it is created (from the seeded random generator) and acted
out over its attempts; todos the demo did not create (a human's, or an earlier run's) mostly
complete. With ``--seed`` the todos and their fates repeat; thread timing does not.

One module a part, each importing only modules listed before it:

- ``options``: what a run is asked to do (``Options``), and ``DemoError``;
- ``script``: the roles, their todos and words, the fates, and how an ``Agent`` acts them;
- ``team``: the team, its members and the endpoints (``prepare``; the only ORM part);
- ``engine``: ``run``: the threads, the todos kept coming, the stop.
"""

from switchboard.demo.engine import run
from switchboard.demo.options import DemoError, Options
from switchboard.demo.team import Setup, prepare

__all__ = ["DemoError", "Options", "Setup", "prepare", "run"]
