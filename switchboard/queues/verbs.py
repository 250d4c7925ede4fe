"""The agent verbs by name, in their order: what a frozen verb set may hold (the endpoints
table's check constraint), what agents/verbs.py declares (a system check holds the two to
each other) and what the client offers. Plain Python, nothing of Django: the client, which
needs only the standard library, reads it too."""

VERBS = (
    "create_todo",
    "list_todos",
    "get_todo",
    "claim",
    "claim_next",
    "heartbeat",
    "complete",
    "fail",
    "release",
    "cancel",
    "answer",
)
