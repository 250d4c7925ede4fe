"""The agents' system checks: the verbs declared here are the ledger's verbs (what a frozen
verb set may hold, ``queues.verbs.VERBS``), in its order; and each verb's wire struct
names exactly its transition's parameters (a close's written fields, its ``Close``
constructor's). Django checks, so ``manage.py check`` and every start-up say it in words
instead of an argument going missing."""

from __future__ import annotations

import inspect

from django.core import checks

# The struct's fields that are not the transition's: who calls (the front's: the endpoint),
# what the front does around it (claim_next's long-poll, a close's ``then``), and what the
# handler turns into another argument (``to``: the endpoint it names).
FRONT_FIELDS = frozenset({"then", "wait_seconds", "to"})
# The transition's parameters no agent sends: who acts, and the front's own.
LEDGER_ONLY = frozenset({"actor", "endpoint", "mcp_session_id", "audited", "schedule_slot"})


@checks.register()
def verbs_agree_with_the_ledger(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    from switchboard.agents.verbs import REGISTRY
    from switchboard.queues.verbs import VERBS

    if tuple(REGISTRY) == VERBS:
        return []
    return [
        checks.Error(
            "The agents' verbs (agents/verbs.py) and the ledger's (queues.verbs.VERBS) disagree.",
            hint=f"declared: {', '.join(REGISTRY)}; the ledger's: {', '.join(VERBS)}",
            id="agents.E001",
        )
    ]


def wire_mismatches() -> list[str]:
    """Each verb whose struct's fields and its transition's parameters (a close's: the ids
    and its ``Close`` constructor's) are not the same names, said in a line."""
    from switchboard.agents.verbs import REGISTRY

    found = []
    for verb in REGISTRY.values():
        if verb.transition is None:
            continue
        fields = set(verb.params.__struct_fields__) - FRONT_FIELDS
        wanted = _parameters(verb.transition.plan)  # the plan's own parameters
        if verb.closes is not None:
            wanted = {"todo_id", "attempt_seq", "lease_token"} | _parameters(verb.closes)
        if fields != wanted:
            found.append(
                f"{verb.name}: the struct has {sorted(fields - wanted)} the transition does"
                f" not take, and lacks {sorted(wanted - fields)}"
            )
    return found


def _parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters) - LEDGER_ONLY


@checks.register()
def verbs_match_their_transitions(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return [
        checks.Error(
            "A verb's arguments and its transition's parameters disagree.",
            hint=line,
            id="agents.E002",
        )
        for line in wire_mismatches()
    ]
