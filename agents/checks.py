"""The agents' system check: the verbs declared here are the ledger's verbs (what a frozen
verb set may hold, ``queues.verbs.VERBS``), in its order. A Django check, so ``manage.py
check`` and every start-up say it in words instead of an import failing."""

from __future__ import annotations

from django.core import checks


@checks.register()
def verbs_agree_with_the_ledger(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    from agents.verbs import REGISTRY
    from queues.verbs import VERBS

    if tuple(REGISTRY) == VERBS:
        return []
    return [
        checks.Error(
            "The agents' verbs (agents/verbs.py) and the ledger's (queues.verbs.VERBS) disagree.",
            hint=f"declared: {', '.join(REGISTRY)}; the ledger's: {', '.join(VERBS)}",
            id="agents.E001",
        )
    ]
