"""Django's PostgreSQL backend, whose connection pool is ``queues.db.pool_checks.OutageAwarePool``:
a request waiting for a pooled connection asks after a second whether the database is there,
and is refused at once when a fresh connection is refused too, instead of waiting out the
pool's timeout (10 s) during an outage. Django builds its pool itself and names no class, so
the pool it built is made an OutageAwarePool (a subclass that adds no state) as it is first
asked for."""

from __future__ import annotations

from django.db.backends.postgresql import base

from switchboard.queues.db.pool_checks import OutageAwarePool


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool = super().pool
        if pool is not None and type(pool) is not OutageAwarePool:
            pool.__class__ = OutageAwarePool
        return pool
