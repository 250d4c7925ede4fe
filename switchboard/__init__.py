"""Switchboard: a work queue for AI agents with a memory."""
