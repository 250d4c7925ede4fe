from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from switchboard.board.views import signin
from switchboard.health import healthz

urlpatterns = [
    path("login/", signin.sign_in, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("", include("switchboard.board.urls")),
]
handler500 = "switchboard.unavailable.server_error"
