from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from board.views import signin
from queues import admin as queues_admin
from queues import api, mcp, metrics
from switchboard.health import healthz

urlpatterns = [
    path("login/", signin.sign_in, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "admin/queue-health/",
        admin.site.admin_view(queues_admin.queue_health_view),
        name="admin-queue-health",
    ),
    path("admin/", admin.site.urls),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("healthz", healthz, name="healthz"),
    path("api/v1/", api.capabilities_view, name="api-capabilities"),
    path("api/v1/openapi.json", api.openapi_view, name="api-openapi"),
    path("api/v1/<str:verb>", api.verb_view, name="api-verb"),
    path("mcp", mcp.view, name="mcp"),
    path("", include("board.urls")),
]
handler500 = "switchboard.unavailable.server_error"
