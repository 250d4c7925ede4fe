"""The agent verbs by name, in their order: what a frozen verb set may hold (the endpoints
table's check constraint) and what agents/verbs.py declares (a system check holds the two to
each other). The client, shipped alone as switchboard-client, keeps its own list
(switchboard/client/about.py), held equal to this one by tests/test_wheel.py."""

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
