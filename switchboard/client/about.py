"""What this client is and speaks: its version (the server's too: one number for both
distributions, read by both pyproject.toml files, and the ``version`` of the server's
capability document, ``GET /api/v1/``) and the agent verbs by name. Standard library only:
the ``switchboard-client`` distribution (clients/python) ships this package without the
server, and the server's own list (switchboard/queues/verbs.py) is held equal to this one by
a test."""

VERSION = "0.1.0"

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
