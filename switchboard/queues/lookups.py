"""``title__ilike_contains``: a case-insensitive substring match written as ``col ILIKE
%s``.

Django's ``icontains`` on PostgreSQL is ``UPPER(col) LIKE UPPER(%s)``; the planner has no
statistics for ``UPPER(col)`` and guesses that almost nothing matches, so a common word on
the Board's queue page turned into a scan of every todo and a sort (docs/benchmarks.md, the
board section). With ``ILIKE`` on the column itself it estimates from the column's
statistics and walks the newest-first index when the word is common. Escaping of ``%``, ``_``
and ``\\`` is Django's (``prep_for_like_query``), as for ``icontains``.
"""

from __future__ import annotations

from django.db.models import CharField, lookups


@CharField.register_lookup
class ILikeContains(lookups.IContains):
    lookup_name = "ilike_contains"

    def as_postgresql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} ILIKE {rhs}", (*lhs_params, *rhs_params)
