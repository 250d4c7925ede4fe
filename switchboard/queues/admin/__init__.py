"""Django admin for operators (staff): counts, states and metadata, never anybody's work.

Tenancy (docs/operators.md): staff see teams, users, endpoints and todos as ids, states,
counters and timestamps; never a todo's title or body, a result, an attempt's summary,
artifact or claimant label, an event's detail, a token or a webhook secret. So every admin
here names its fields, columns, search fields and filters explicitly (nothing falls back to
"all fields"), the ledger is read-only (state changes only through ``queues.transitions``:
the writes are the endpoint revoke action, and pause and resume, which change an endpoint's
metadata only), and attempts, events and the outbox have no pages at all. Aggregates are computed by the database: counts are subqueries or GROUP BYs,
never rows loaded and counted in Python. Staff are not team members by being staff: nothing
here adds a membership, and memberships are shown read-only.

Operators (``queues.operators``: staff in the Operators group) hold the view permissions of
these pages, the revoke action's own permission and queue health's. A query string is
hostile input: a filter takes only the lookups of the page's own filters (a lookup over any
other column, e.g. ``?title__icontains=`` or ``?notify_secret__startswith=``, would be an
oracle for text the page never shows), an id that is not an id is an invalid filter (Django
answers those by showing the unfiltered list with its ``?e=1`` flag), and a search that could
only be slow or could never match (NUL, overlong, too many words) finds nothing.
"""

from switchboard.queues.admin import accounts, endpoints, todos  # each registers its pages
from switchboard.queues.admin.todos import queue_health_view

__all__ = ["accounts", "endpoints", "queue_health_view", "todos"]
