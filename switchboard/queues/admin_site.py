"""Django's admin site with the queue health page among its own URLs (``admin:queue-health``),
behind the site's staff check. Made the default site by ``queues.apps.SwitchboardAdminConfig``,
so ``admin.site`` is this site. Apart from queues/admin/, whose registrations need the site
to exist first."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path


class SwitchboardAdminSite(admin.AdminSite):
    def get_urls(self):
        from switchboard.queues.admin import queue_health_view

        return [
            path("queue-health/", self.admin_view(queue_health_view), name="queue-health"),
            *super().get_urls(),
        ]
