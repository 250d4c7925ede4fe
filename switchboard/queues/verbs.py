"""The agent verbs by name, in their order: what a frozen verb set may hold (the endpoints
table's check constraint) and what agents/verbs.py declares (a system check holds the two to
each other). One list, the client's (switchboard/client/about.py, standard library only): the
switchboard-client distribution ships it without the server, and the server speaks what its
client speaks; tests/test_client_wheel.py holds both to OpenAPI and the capability document."""

from switchboard.client.about import VERBS

__all__ = ["VERBS"]
