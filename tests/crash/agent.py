"""A worker for the crash tests: a separate OS process speaking the agent API through
``switchboard.client``. It prints one JSON line per event, flushed, so the test can follow it.

    agent.py hold  URL NAME LEASE [fence]  claim one todo (fenced if asked) and heartbeat
                                           it for ever, "working": to be SIGKILLed
    agent.py drain URL NAME LEASE          claim and complete until nothing is claimable

The endpoint token comes in SWITCHBOARD_TOKEN (not argv, which any user can read).
"""

from __future__ import annotations

import json
import os
import sys
import time

from switchboard.client import Client


def say(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def hold(client: Client, name: str, lease: int, fence: bool = False) -> None:
    claimed = client.claim_next(lease_seconds=lease, claimant=name, require_fence=fence or None)
    todo = claimed["todo"]
    if todo is None:
        say("nothing")
        sys.exit(3)
    ids = {"todo_id": todo["id"], "attempt_seq": claimed["attempt_seq"]}
    if fence:
        ids["lease_token"] = claimed["lease_token"]
    say("claimed", todo_id=todo["id"], attempt_seq=claimed["attempt_seq"], fenced=fence)
    while True:  # heartbeat well inside the lease until killed
        time.sleep(lease / 4)
        beat = client.heartbeat(**ids, lease_seconds=lease)
        say("beat", todo_id=todo["id"], lease_expires_at=beat["lease_expires_at"])


def drain(client: Client, name: str, lease: int) -> None:
    while True:
        claimed = client.claim_next(lease_seconds=lease, claimant=name)
        todo = claimed["todo"]
        if todo is None:
            say("idle")
            return
        ids = {"todo_id": todo["id"], "attempt_seq": claimed["attempt_seq"]}
        done = client.complete(**ids, result={"by": name}, summary=f"done by {name}")
        say("completed", **ids, replayed=done["replayed"])


if __name__ == "__main__":
    mode, url, name, lease, *flags = sys.argv[1:]
    client = Client(url, os.environ["SWITCHBOARD_TOKEN"], timeout=30)
    if mode == "hold":
        hold(client, name, int(lease), fence="fence" in flags)
    else:
        drain(client, name, int(lease))
