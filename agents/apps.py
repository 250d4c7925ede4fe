from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """The agents' surface: the HTTP verbs, the MCP tools, their schemas and OpenAPI
    document, endpoint-token auth, the long-poll doorbell and /metrics. No models: it calls
    the ledger (queues) for everything it reads or changes."""

    name = "agents"
    verbose_name = "Agents"
