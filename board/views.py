from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from queues.models import Endpoint, Todo


@login_required
def home(request):
    """Signed-in placeholder until the Board lands: counts of the user's queues."""
    todos = Todo.objects.visible_to(request.user)
    context = {
        "teams": request.user.teams.order_by("name"),
        "endpoint_count": Endpoint.objects.visible_to(request.user).count(),
        "todo_count": todos.count(),
    }
    return render(request, "board/home.html", context)
