from django.urls import path

from agents import http, mcp, metrics

urlpatterns = [
    path("metrics", metrics.metrics_view, name="metrics"),
    path("api/v1/", http.capabilities_view, name="api-capabilities"),
    path("api/v1/openapi.json", http.openapi_view, name="api-openapi"),
    path("api/v1/<str:verb>", http.verb_view, name="api-verb"),
    path("mcp", mcp.view, name="mcp"),
]
