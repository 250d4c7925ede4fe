"""Why a todo is a dead letter, in words: the queue's Dead letters rows, the bulk
confirmation and the drawer all say it the same way."""

from __future__ import annotations


def dead_letter_reason(
    reason: str, *, failures: int, max_attempts: int, failed: int | None, died: int | None
) -> str:
    """Why a todo is a dead letter, in a few words exact to what happened: "failed 5 of 5",
    "said not retryable", "died 3 times", "failed 2, died 3 of 5", "endpoint revoked".

    From the todo's ``dead_letter_reason`` (the outcome that killed it), its spent budget
    (``failures`` of ``max_attempts``: a failed and a died try spend one each) and how many
    tries of its last round failed and died (None: not read). When the kept tries do not add
    up to the budget spent (the history cap pruned some), the words say only what is sure."""
    if reason == "revoked":
        return "endpoint revoked"
    if reason == "after_ended":
        return "a todo it waited for ended"
    if reason == "failed" and failures < max_attempts:
        return "said not retryable"
    counted = failed is not None and died is not None and failed + died == failures
    if counted and not died:
        return f"failed {failed} of {max_attempts}"
    if counted and not failed:
        return "died once" if died == 1 else f"died {died} times"
    if counted:
        return f"failed {failed}, died {died} of {max_attempts}"
    last = "failed" if reason == "failed" else "died"
    return f"{failures} of {max_attempts} spent, the last {last}"
