"""Autovacuum and statistics for the two hot tables.

todos: every claim, heartbeat and close rewrites a row (never HOT: the changed columns are
indexed), so dead tuples pile up at queue speed; vacuum at 5% dead instead of 20%.
todo_attempts: insert-mostly, closed once per row; likewise.
Both: refresh statistics after 2% change instead of 10%, so plans (and the prepared hot
statements' cached generic plans, which ANALYZE invalidates) follow a growing queue quickly.
The sweeper also runs ANALYZE itself when a table has changed by more than its size since its
statistics were taken (queues/sweeper.py).
"""

from django.db import migrations

TABLES = ("todos", "todo_attempts")
FORWARD = [
    f"ALTER TABLE {table} SET (autovacuum_vacuum_scale_factor = 0.05,"
    " autovacuum_vacuum_threshold = 200, autovacuum_analyze_scale_factor = 0.02,"
    " autovacuum_analyze_threshold = 200)"
    for table in TABLES
]
BACKWARD = [
    f"ALTER TABLE {table} RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,"
    " autovacuum_analyze_scale_factor, autovacuum_analyze_threshold)"
    for table in TABLES
]


class Migration(migrations.Migration):
    dependencies = [("queues", "0003_lean_indexes")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
