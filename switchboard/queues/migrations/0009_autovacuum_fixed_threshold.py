"""Vacuum the two hot tables after a fixed 2,000 dead tuples, whatever their size.

Their churn comes at the queue's rate while their size grows with retained history, so a
scale factor (0004's 5%) lets dead tuples grow with the history: 10,000 at 200k rows, 50,000
at 1M. Measured by the 10-minute soak (bench/soak.py, 20 todos/s, 200k history rows; see
docs/benchmarks.md): dead tuples in todos peak 13,224 → 3,420 and average 5,960 → 1,771,
todo_attempts 11,081 → 6,711 and 5,906 → 1,898; autovacuum time about 0.6% of a core; claim
p95 within noise. ANALYZE stays as in 0004.
"""

from django.db import migrations

TABLES = ("todos", "todo_attempts")
FORWARD = [
    f"ALTER TABLE {table} SET (autovacuum_vacuum_scale_factor = 0,"
    " autovacuum_vacuum_threshold = 2000)"
    for table in TABLES
]
BACKWARD = [
    f"ALTER TABLE {table} SET (autovacuum_vacuum_scale_factor = 0.05,"
    " autovacuum_vacuum_threshold = 200)"
    for table in TABLES
]


class Migration(migrations.Migration):
    dependencies = [("queues", "0008_owner_attempt_outlives_its_user")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
