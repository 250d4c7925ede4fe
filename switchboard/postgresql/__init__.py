"""Django's PostgreSQL backend with the pool of queues.pool_checks (``ENGINE`` in dburl)."""
