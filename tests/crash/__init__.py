"""Crash tests: processes killed, PostgreSQL restarted, the sweeper cut off mid-pass."""
