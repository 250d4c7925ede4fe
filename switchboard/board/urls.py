from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import path

from switchboard.board.demo_strip import demo_strip_hide
from switchboard.board.views import (
    activity,
    create,
    endpoints,
    live,
    overview,
    queue,
    schedules,
    teams,
    todos,
    triage,
    waiting,
)


def favicon(request):
    # At request time: a hashed static name needs the collected manifest, not at import.
    return HttpResponsePermanentRedirect(static("board/favicon.svg"))


urlpatterns = [
    # Browsers and tools ask for /favicon.ico whatever the page links; answer it, so no 404 is
    # logged as a warning on every page.
    path("favicon.ico", favicon, name="favicon"),
    path("", overview.overview_page, name="board-home"),
    path("stalls/", overview.stalls, name="stalls"),
    path("queue/", queue.todo_list, name="queue"),
    path("queue/dead/", triage.dead_letters, name="dead-letters"),
    path("live/", live.live, name="live"),
    path("waiting/", waiting.waiting_list, name="waiting"),
    path("activity/", activity.activity_list, name="activity-list"),
    path("todos/new/", create.todo_new, name="todo-new"),
    path("triage/", triage.bulk, name="triage"),
    path("todos/<int:todo_id>/", todos.todo_detail, name="todo-detail"),
    # Before the drawer's other actions: an answer is its own view (board/views/waiting.py).
    path("todos/<int:todo_id>/answer/", waiting.todo_answer, name="todo-answer"),
    path("todos/<int:todo_id>/<slug:action>/", todos.todo_action, name="todo-action"),
    path("endpoints/", endpoints.endpoint_list, name="endpoint-list"),
    path("endpoints/new/", endpoints.endpoint_new, name="endpoint-new"),
    path("endpoints/<int:endpoint_id>/", endpoints.endpoint_detail, name="endpoint-detail"),
    path("endpoints/<int:endpoint_id>/rotate/", endpoints.endpoint_rotate, name="endpoint-rotate"),
    path(
        "endpoints/<int:endpoint_id>/schedules/",
        schedules.endpoint_schedules,
        name="endpoint-schedules",
    ),
    path("endpoints/<int:endpoint_id>/revoke/", endpoints.endpoint_revoke, name="endpoint-revoke"),
    path(
        "endpoints/<int:endpoint_id>/pause/",
        endpoints.endpoint_pause,
        {"op": "pause"},
        name="endpoint-pause",
    ),
    path(
        "endpoints/<int:endpoint_id>/resume/",
        endpoints.endpoint_pause,
        {"op": "resume"},
        name="endpoint-resume",
    ),
    path("team/", teams.team_detail, name="team-detail"),
    path("team/switch/", teams.team_switch, name="team-switch"),
    path("demo/hide/", demo_strip_hide, name="demo-strip-hide"),
]
