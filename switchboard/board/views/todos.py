"""The todo drawer and the human actions taken from it.

The drawer is ``todo_detail.html#drawer`` for htmx and the whole page otherwise. Each action
is one call into ``queues.transitions`` as the signed-in user; a stale action (the todo moved
on since the drawer was drawn) answers 409 with a clear message and the fresh drawer.

Cancel, Take over and Release their lease end someone's work or the todo itself, so they are
asked first (``drawer.CONFIRMATIONS``): with JavaScript htmx asks in a dialog and posts;
without it the drawer's button is a GET of the action's URL, a page that says what will
happen and posts the same stamp the drawer carried.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods

from switchboard.board import drawer
from switchboard.board.templatetags.board import STATE_LABELS
from switchboard.board.views.queue import refresh_seconds
from switchboard.board.waiting import AnswerForm, asked_of, story
from switchboard.queues import tracing, transitions
from switchboard.queues.bounds import RESULT_MAX_DEPTH
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import TodoState
from switchboard.queues.records import TodoDetail
from switchboard.queues.selectors import board_todo
from switchboard.queues.transitions import Actor

SUMMARY_FIELD_MAX = 8192  # characters accepted from the form; the ledger truncates at 2 KiB


def _detail(user, todo_id: int) -> TodoDetail:
    try:
        return board_todo(user, todo_id)
    except (NotFound, Invalid):
        # Unknown and foreign ids alike: the one 404 page, byte for byte.
        raise Http404() from None


def render_drawer(
    request,
    detail: TodoDetail,
    *,
    notice=None,
    tone="good",
    status=200,
    typed=None,
    held=False,
    params=None,
):
    if params is None:
        params = request.GET if request.method == "GET" else {}
    d = drawer.build(
        detail,
        user=request.user,
        attempt_param=params.get("attempt"),
        round_param=params.get("round"),
        all_param=params.get("all"),
    )
    url = reverse("todo-detail", args=[detail.todo.id])
    asked = asked_of(detail.todo)
    context = {
        "d": d,
        "notice": notice,
        "tone": tone,
        # A claim or a take-over is said by the drawer's own "you hold this todo" line, not
        # by a second banner above it (while the person does hold it).
        "held_notice": bool(held and notice and d.actions.mine),
        # What a person typed into a form that was refused (bad JSON, a stale todo): shown
        # again in the same form, so nothing typed is lost.
        "typed": typed or {},
        # A waiting todo's open question, answered from the drawer as from the Waiting page.
        "answer_form": AnswerForm(asked, "drawer", (typed or {}).get("answer", {}))
        if asked and not d.read_only
        else None,
        # The selected try's question, when it asked one: what it asked, how it ended, who
        # answered and how long it waited.
        "asked_story": story(d.selected.question, now=timezone.now()) if d.selected else None,
        # The drawer's own URL, with the try or round the reader picked: its refreshes and
        # the browser's history use it.
        "drawer_url": f"{url}?{urlencode(d.params)}" if d.params else url,
        "refresh_seconds": refresh_seconds(),
        # The drawer keeps a person's lease alive while it is open, well before it lapses.
        "keepalive_seconds": max(30, min(240, settings.SWITCHBOARD_OWNER_LEASE_SECONDS // 3)),
    }
    template = "board/todo_detail.html#drawer" if request.htmx else "board/todo_detail.html"
    return render(request, template, context, status=status)


@login_required
def todo_detail(request, todo_id: int):
    return render_drawer(request, _detail(request.user, todo_id))


# action → its success message
ACTIONS = {
    "claim": "You hold this todo now (an owner attempt): complete, fail or release it below.",
    "extend": "Lease extended.",
    "keepalive": "",
    "complete": "Completed.",
    "fail": "Failed.",
    "release": "Released: the todo is back in the queue.",
    "cancel": "Canceled.",
    "retry-now": "Retrying now: the todo is pending again.",
    "rerun": "Rerun: a new round starts, pending.",
    "start-now": "Started now: it no longer waits, and is pending.",
    "take-over": "You hold this todo now (an owner attempt): you took it over, and the agent's "
    "try ended (released, by you).",
}
# Said by the drawer's "you hold this todo" line itself: one banner for the act, not two (and
# without JavaScript no flash above it, since the drawer page says so).
HELD_ACTS = frozenset({"claim", "take-over"})


@login_required
@require_http_methods(["GET", "POST"])
def todo_action(request, todo_id: int, action: str):
    if action not in ACTIONS:
        raise Http404()
    if request.method == "GET":
        if drawer.CONFIRMATIONS.get(action) is None:
            return HttpResponseNotAllowed(["POST"])
        return _confirm(request, todo_id, action)
    detail = _detail(request.user, todo_id)
    tracing.note(action=action, endpoint=detail.todo.endpoint, **{"todo.id": detail.todo.id})
    seen = request.POST.get("seen", "")
    if seen != drawer.seen_stamp(detail.todo):
        return _stale(request, detail, "This todo moved on since you opened it", action)
    posted_round = request.POST.get("round")
    if posted_round is not None and posted_round != str(detail.todo.round):
        # Only the live round acts: a form from a past round's view is never acted on.
        why = f"Round {posted_round[:12]} is a past round; only round {detail.todo.round} acts"
        return _stale(request, detail, why, action)
    try:
        _act(request, detail, action)
        tracing.note(outcome="ok")
    except Conflict as exc:
        tracing.note(outcome="conflict")
        return _stale(request, _detail(request.user, todo_id), str(exc), action)
    except Invalid as exc:
        typed = _typed(request, action)
        return render_drawer(request, detail, notice=str(exc), tone="bad", status=400, typed=typed)
    except NotFound:
        raise Http404() from None
    if action == "keepalive":
        return HttpResponse(status=204)
    fresh = _detail(request.user, todo_id)
    if not request.htmx:
        if action not in HELD_ACTS:
            messages.success(request, ACTIONS[action])
        return redirect("todo-detail", todo_id=todo_id)
    response = render_drawer(request, fresh, notice=ACTIONS[action], held=action in HELD_ACTS)
    response["HX-Trigger"] = "queue-changed"
    return response


def _confirm(request, todo_id: int, action: str):
    """The page that asks before Cancel, Take over or Release their lease (without
    JavaScript): what will happen to this todo, and a POST carrying the stamp the drawer was
    drawn with. A todo that moved on since is the stale answer, as a POST would be."""
    confirmation = drawer.CONFIRMATIONS.get(action)
    detail = _detail(request.user, todo_id)
    todo = detail.todo
    seen = request.GET.get("seen", drawer.seen_stamp(todo))
    if seen != drawer.seen_stamp(todo):
        return _stale(request, detail, "This todo moved on since you opened it", action, params={})
    asked_round = request.GET.get("round")
    if asked_round is not None and asked_round != str(todo.round):
        why = f"Round {asked_round[:12]} is a past round; only round {todo.round} acts"
        return _stale(request, detail, why, action, params={})
    d = drawer.build(detail, user=request.user)
    if not getattr(d.actions, confirmation.offered):
        why = f"{confirmation.label} is not offered now"
        return _stale(request, detail, why, action, params={})
    context = {
        "d": d,
        "confirmation": confirmation,
        "back_url": reverse("todo-detail", args=[todo.id]),
        "owner_lease": drawer.span(settings.SWITCHBOARD_OWNER_LEASE_SECONDS),
    }
    return render(request, "board/todo_confirm.html", context)


def _stale(request, detail: TodoDetail, why: str, action: str, *, params=None):
    state = STATE_LABELS.get(detail.todo.state, detail.todo.state)
    notice = f"{why.rstrip('.')}. Nothing was changed. It is {state} now; here is how it stands."
    return render_drawer(
        request,
        detail,
        notice=notice,
        tone="stale",
        status=409,
        typed=_typed(request, action),
        params=params,
    )


def _typed(request, action: str) -> dict:
    """The text a refused complete, fail or release carried, to show again."""
    if request.method != "POST" or action not in ("complete", "fail", "release"):
        return {}
    post = request.POST
    return {"action": action, "summary": post.get("summary", ""), "result": post.get("result", "")}


def _act(request, detail: TodoDetail, action: str) -> None:
    actor = Actor.human(request.user)
    todo = detail.todo
    open_seq = next((a.seq for a in detail.attempts if a.is_open), None)
    post = request.POST
    match action:
        case "claim":
            transitions.claim(actor, todo.id)
        case "extend" | "keepalive":
            transitions.heartbeat(actor, todo.id, attempt_seq=open_seq, audited=action == "extend")
        case "complete" | "fail":
            reported = {
                "attempt_seq": _open(open_seq),
                "summary": _text(post, "summary"),
                "result": _json(post.get("result", "")),
                "artifact": _text(post, "artifact"),
            }
            if action == "complete":
                transitions.complete(actor, todo.id, **reported)
            else:
                retryable = post.get("retryable") != "no"
                transitions.fail(actor, todo.id, retryable=retryable, **reported)
        case "release":
            transitions.release(
                actor, todo.id, attempt_seq=_open(open_seq), summary=_text(post, "summary")
            )
        case "cancel" if todo.state == TodoState.DEAD:
            transitions.cancel_dead_letter(Actor.human(request.user), todo.id)
        case "cancel":
            transitions.cancel(actor, todo.id, attempt_seq=open_seq)
        case "retry-now":
            transitions.retry_now(Actor.human(request.user), todo.id)
        case "rerun":
            transitions.rerun(Actor.human(request.user), todo.id)
        case "start-now":
            transitions.start_now(actor, todo.id)
        case "take-over":
            transitions.take_over(Actor.human(request.user), todo.id, attempt_seq=_open(open_seq))


def _open(seq: int | None) -> int:
    if seq is None:
        raise Conflict("Nobody holds this todo")
    return seq


def _text(post, name: str) -> str | None:
    value = post.get(name, "").strip()
    if len(value) > SUMMARY_FIELD_MAX:
        raise Invalid(f"{name} is too long: at most {SUMMARY_FIELD_MAX} characters here.")
    return value or None


def _json(text: str):
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise Invalid(f"The result is not valid JSON ({exc}). Nothing was changed.") from None
    except RecursionError:
        # json.loads recurses once per bracket: a few thousand of them exhaust the stack
        # before the ledger's own depth check could refuse the result.
        raise Invalid(
            f"The result nests too deeply: at most {RESULT_MAX_DEPTH} levels. Nothing was changed."
        ) from None
