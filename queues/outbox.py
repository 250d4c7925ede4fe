"""The outbox's sender: signed webhooks for dead-letter sinks and doorbells. (Being built.)"""

from __future__ import annotations


def deliver_due(*, batch: int = 50) -> int:
    """Send the due deliveries; returns how many were sent (a 2xx). Stub until built."""
    return 0
