from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from queues import api, mcp

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/openapi.json", api.openapi_view, name="api-openapi"),
    path("api/v1/<str:verb>", api.verb_view, name="api-verb"),
    path("mcp", mcp.server, name="mcp"),
    path("", include("board.urls")),
]
