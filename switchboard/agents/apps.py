from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """The agents' surface: the HTTP verbs, the MCP tools, their schemas and OpenAPI
    document, endpoint-token auth, the long-poll doorbell and /metrics, served on the event
    loop by its own front door (agents/front.py). No models: it calls the ledger (queues)
    for everything it reads or changes."""

    name = "switchboard.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from switchboard.agents import checks  # noqa: F401  (registers the check)
