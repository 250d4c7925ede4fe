"""Django's PostgreSQL backend with the pool of queues.db.pool_checks (``ENGINE`` in dburl)."""
