"""Dead-letter triage (issue 15): each dead letter says why in plain words with its last
summary; ticked rows or "all N matching" are rerun or canceled in bulk, one audited
transition per todo, after a confirmation; a todo that moved on in between is skipped and
counted, never forced; a foreign id in a forged form is neither touched nor revealed."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.test import Client

from switchboard.board import triage
from switchboard.queues import transitions
from switchboard.queues.models import EventKind, Todo, TodoEvent
from switchboard.queues.transitions import Actor, by_hand
from tests.board.history import XSS_SUMMARY
from tests.queues.helpers import lapse_lease, make_retry_due

pytestmark = pytest.mark.django_db


def failed_out(endpoint, title="always fails", *, tries=5, summary="exit 1"):
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title=title, max_attempts=tries)
    for n in range(tries):
        if n:
            make_retry_due(todo.id)
        transitions.claim(agent, todo.id)
        transitions.fail(agent, todo.id, summary=f"{summary} (try {n + 1})")
    return todo.id


def not_retryable(endpoint, title="bad input"):
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title=title, max_attempts=5)
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, retryable=False, summary=XSS_SUMMARY)
    return todo.id


def died_out(endpoint, title="keeps dying", *, tries=3):
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title=title, max_attempts=tries)
    for _ in range(tries):
        transitions.claim(agent, todo.id)
        lapse_lease(todo.id)
        transitions.reap_lapsed()
    return todo.id


def _row(page: str, todo_id: int) -> str:
    row = page[page.index(f'<tr id="todo-{todo_id}"') :]
    return row[: row.index("</tr>")]


def _items(page: str) -> str:
    return html.unescape(re.search(r'name="items" value="([^"]*)"', page).group(1))


def test_each_dead_letter_says_why_exactly_with_its_last_summary(
    signed_in, endpoint, make_endpoint
):
    five = failed_out(endpoint, tries=5)
    once = not_retryable(endpoint)
    died = died_out(endpoint, tries=3)
    doomed = make_endpoint("doomed")
    revoked, _ = transitions.create_todo(Actor.agent(doomed), title="left behind")
    transitions.revoke_endpoint(None, doomed)
    page = signed_in.get("/queue/?state=dead").content.decode()
    assert "failed 5 of 5" in _row(page, five) and "exit 1 (try 5)" in _row(page, five)
    assert "said not retryable" in _row(page, once)
    assert "died 3 times" in _row(page, died)
    assert "endpoint revoked" in _row(page, revoked.id)
    # The summary is the worker's text: in the untrusted frame, escaped.
    row = _row(page, once)
    assert "untrusted" in row and "<script>" not in row and "&lt;script&gt;" in row
    # The drawer says the same words.
    drawer = signed_in.get(f"/todos/{five}/").content.decode()
    assert "Dead letter: failed 5 of 5." in drawer


def test_a_mixed_selection_where_some_move_on_before_the_post(signed_in, endpoint, user):
    stays = [failed_out(endpoint, title=f"stays {n}", tries=1) for n in range(3)]
    rerun_by_someone = failed_out(endpoint, title="rerun meanwhile", tries=1)
    claimed_meanwhile = failed_out(endpoint, title="rerun and claimed meanwhile", tries=1)
    picks = [*stays, rerun_by_someone, claimed_meanwhile]
    confirm = signed_in.get("/triage/", {"do": "rerun", "pick": picks}).content.decode()
    assert "Rerun 5 todos?" in confirm and "5 to rerun" in confirm
    assert Todo.objects.filter(pk__in=picks, state="dead").count() == 5  # nothing yet
    # Between the confirmation and the POST: another person reruns one; a rerun one is
    # claimed by an agent.
    transitions.rerun(Actor.human(user), rerun_by_someone)
    transitions.rerun(Actor.human(user), claimed_meanwhile)
    transitions.claim(Actor.agent(endpoint), claimed_meanwhile)
    before = set(TodoEvent.objects.values_list("pk", flat=True))
    result = signed_in.post("/triage/", {"do": "rerun", "items": _items(confirm)})
    page = result.content.decode()
    assert result.status_code == 200
    assert "Rerun: 3 done, 2 skipped" in page
    for todo_id in (rerun_by_someone, claimed_meanwhile):
        line = re.search(rf'<li data-outcome="(\w+)" data-todo="{todo_id}">.*?</li>', page)
        assert line.group(1) == "moved" and "moved on since you confirmed" in line.group(0)
    # Each todo acted on is its own audited rerun by this person; the others untouched.
    new = TodoEvent.objects.exclude(pk__in=before)
    assert sorted(new.values_list("todo_id", flat=True)) == sorted(stays)
    assert {(e.kind, e.actor_user_id) for e in new} == {(EventKind.RERUN, user.pk)}
    assert Todo.objects.get(pk=rerun_by_someone).round == 2  # not rerun twice
    assert Todo.objects.get(pk=claimed_meanwhile).state == "claimed"  # not forced
    assert set(Todo.objects.filter(pk__in=stays).values_list("state", "round")) == {("pending", 2)}


def test_bulk_cancel_takes_the_one_transition_that_fits_each_todo(
    signed_in, endpoint, make_todo, user
):
    dead = failed_out(endpoint, tries=1)
    pending = make_todo("waiting").id
    held = make_todo("held by an agent").id
    transitions.claim(Actor.agent(endpoint), held, claimant="run-7")
    done = make_todo("finished").id
    transitions.claim(Actor.agent(endpoint), done)
    transitions.complete(Actor.agent(endpoint), done)
    confirm = signed_in.get(
        "/triage/", {"do": "cancel", "pick": [dead, pending, held, done]}
    ).content.decode()
    assert "Cancel 3 todos?" in confirm and "1 left as they are" in confirm
    assert f"{done}=" not in _items(confirm)
    page = signed_in.post("/triage/", {"do": "cancel", "items": _items(confirm)}).content.decode()
    assert "Cancel: 3 done" in page
    states = dict(
        Todo.objects.filter(pk__in=[dead, pending, held, done]).values_list("pk", "state")
    )
    assert states == {dead: "canceled", pending: "canceled", held: "canceled", done: "done"}
    attempt = Todo.objects.get(pk=held).attempts.get()
    assert attempt.outcome == "canceled" and attempt.ended_by_id == user.pk
    assert Todo.objects.get(pk=dead).dead_letter_reason == ""
    event = TodoEvent.objects.get(todo_id=dead)
    assert event.detail == {"from_state": "dead", "dead_letter_reason": "failed"}
    # A done todo forced into a posted form is refused, not canceled.
    forged = f"{done}=done.1.1"
    page = signed_in.post("/triage/", {"do": "cancel", "items": forged}).content.decode()
    assert "1 skipped" in page and Todo.objects.get(pk=done).state == "done"


def test_a_foreign_id_is_neither_touched_nor_revealed(signed_in, endpoint, make_user):
    from switchboard.queues import endpoints

    mine = failed_out(endpoint, title="mine", tries=1)
    mallory = make_user("mallory")
    theirs_endpoint, _ = endpoints.vend(mallory.teams.get(), "their-agent", verbs="all")
    theirs = failed_out(theirs_endpoint, title="secret title of theirs", tries=1)
    unknown = 987654321
    # The confirmation leaves it out, counted like an unknown id.
    confirm = signed_in.get("/triage/", {"do": "rerun", "pick": [mine, theirs]}).content.decode()
    assert "secret title" not in confirm and "1 not found" in confirm
    assert f"{theirs}=" not in _items(confirm)
    # A forged POST naming it with its true stamp.
    forged = f"{mine}=dead.1.1 {theirs}=dead.1.1 {unknown}=dead.1.1"
    page = signed_in.post("/triage/", {"do": "rerun", "items": forged}).content.decode()
    assert "secret title" not in page and "1 done" in page and "2 not found" in page
    assert Todo.objects.get(pk=theirs).state == "dead"
    assert not TodoEvent.objects.filter(todo_id=theirs).exists()
    lines = {
        int(todo_id): text
        for todo_id, text in re.findall(r'data-todo="(\d+)">(.*?)</li>', page, flags=re.S)
    }
    assert lines[theirs].replace(str(theirs), "ID") == lines[unknown].replace(str(unknown), "ID")


def test_the_post_needs_the_csrf_token(endpoint, user):
    dead = failed_out(endpoint, tries=1)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/triage/", {"do": "rerun", "items": f"{dead}=dead.1.1"})
    assert response.status_code == 403
    assert Todo.objects.get(pk=dead).state == "dead"
    # The confirmation page carries the token; with it, the same POST goes through.
    confirm = client.get("/triage/", {"do": "rerun", "pick": [dead]}).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', confirm).group(1)
    response = client.post(
        "/triage/", {"do": "rerun", "items": _items(confirm), "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 200 and Todo.objects.get(pk=dead).state == "pending"


def test_all_matching_over_two_thousand_goes_a_thousand_at_a_time(signed_in, endpoint, user):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason, ended_at)"
            " SELECT %s, 'dead ' || g, '', 0, 'dead', 1, 1, 1, 1, 0, 0, '', 'failed', now()"
            " FROM generate_series(1, 2100) g",
            [endpoint.pk],
        )
    queue = signed_in.get("/queue/?state=dead").content.decode()
    # Grouped as the tabs group it (the tab says "2,100" beside it).
    assert "all 2,100 matching<span" in queue and "all 2100" not in queue
    for left in (2100, 1100, 100):
        confirm = signed_in.get("/triage/", {"do": "rerun", "all": "1", "state": "dead"})
        page = confirm.content.decode()
        batch = min(left, triage.BULK_MAX)
        assert f"Rerun {batch} todos?" in page
        assert ("At most 1000 todos at a time" in page) == (left > triage.BULK_MAX)
        # Every one is counted and carried in the form; the newest 100 are listed by name.
        assert len(_items(page).split()) == batch
        assert page.count('<li><span class="id">#') == min(batch, triage.CONFIRM_SHOWN)
        more = batch - triage.CONFIRM_SHOWN
        assert (f"… and {more} more" in page) == (more > 0)
        result = signed_in.post(
            "/triage/", {"do": "rerun", "items": _items(page), "state": "dead"}
        ).content.decode()
        assert f"Rerun: {batch} done" in result
    assert not Todo.objects.filter(state="dead").exists()
    assert TodoEvent.objects.filter(kind=EventKind.RERUN, actor_user=user).count() == 2100


def _dead_letters(endpoint, n: int, reason: str = "failed") -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason, ended_at)"
            " SELECT %s, 'dead ' || g, '', 0, 'dead', 1, 1, 1, 1, 0, 0, '', %s, now()"
            " FROM generate_series(1, %s) g RETURNING id",
            [endpoint.pk, reason, n],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.parametrize("do", ["rerun", "cancel"])
def test_a_chunk_of_dead_letters_costs_the_same_few_statements_whatever_its_size(
    signed_in, endpoint, user, do
):
    """The reruns (or cancels) of a chunk are one statement for all its dead letters, not a
    transition's statements for each: a chunk of 100 runs as many statements as one of 3,
    and still writes one audit row per todo, with the state it left and (cancel) the
    dead-letter reason the todo no longer carries."""
    from django.test.utils import CaptureQueriesContext

    counts = {}
    for n in (3, by_hand.CHUNK):
        ids = _dead_letters(endpoint, n, reason=f"reason of {n}")
        items = triage.encode_items((i, "dead.0.1") for i in ids)
        with CaptureQueriesContext(connection) as queries:
            result = signed_in.post("/triage/", {"do": do, "items": items}).content.decode()
        assert f"{'Rerun' if do == 'rerun' else 'Cancel'}: {n} done" in result
        counts[n] = len(queries)
        todos = Todo.objects.filter(pk__in=ids)
        if do == "rerun":
            assert {(t.state, t.round, t.dead_letter_reason) for t in todos} == {("pending", 2, "")}
        else:
            assert {(t.state, t.round) for t in todos} == {("canceled", 1)}
        events = TodoEvent.objects.filter(todo_id__in=ids)
        kind = EventKind.RERUN if do == "rerun" else EventKind.CANCEL
        assert sorted(e.todo_id for e in events) == sorted(ids)
        assert {(e.kind, e.actor_user_id, e.team_id) for e in events} == {
            (kind, user.pk, endpoint.team_id)
        }
        details = {e.todo_id: e.detail for e in events}
        for todo_id in ids:
            assert details[todo_id]["from_state"] == "dead"
            if do == "cancel":
                assert details[todo_id]["dead_letter_reason"] == f"reason of {n}"
    assert counts[by_hand.CHUNK] == counts[3], counts


def test_items_are_bounded_and_malformed_parts_dropped():
    text = " ".join(f"{n}=dead.0.1" for n in range(1, 1500)) + " x=1 12=DROP.1.1 7=dead.0.1"
    items = triage.decode_items(text)
    assert len(items) == triage.BULK_MAX and items[0] == (1, "dead.0.1")


def test_an_unknown_action_is_refused(signed_in):
    assert signed_in.get("/triage/", {"do": "delete"}).status_code == 400
    assert signed_in.post("/triage/", {"do": "delete", "items": "1=dead.0.1"}).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_the_triage_flow_in_a_browser(page, user, endpoint):
    """Dead letters tab: tick two rows, Rerun…, the confirmation says how many, confirm, the
    result says what happened to each; no script error on the way."""
    from playwright.sync_api import expect

    from tests.board.conftest import sign_in

    first = failed_out(endpoint, title="first dead letter", tries=2)
    second = not_retryable(endpoint, title="second dead letter")
    left = died_out(endpoint, title="left alone", tries=1)
    sign_in(page, "alice")
    page.get_by_role("link", name=re.compile("Dead letters")).click()
    expect(page.locator(f"#todo-{first} .dead-why")).to_have_text("failed 2 of 2")
    expect(page.locator(f"#todo-{second} .dead-why")).to_have_text("said not retryable")
    page.get_by_label(f"Select #{first}").check()
    page.get_by_label(f"Select #{second}").check()
    page.get_by_role("button", name="Rerun…").click()
    expect(page.get_by_role("heading", name="Rerun 2 todos?")).to_be_visible()
    page.get_by_role("button", name="Rerun 2 todos").click()
    expect(page.get_by_role("heading", name="Rerun: 2 done")).to_be_visible()
    expect(page.locator(f'li[data-todo="{first}"] .what')).to_contain_text("rerun")
    assert Todo.objects.get(pk=left).state == "dead"
    assert set(Todo.objects.filter(pk__in=[first, second]).values_list("state", flat=True)) == {
        "pending"
    }
    # "Select every row" ticks the page's rows (JavaScript), and the bar takes them.
    page.get_by_role("link", name="Back to the queue").click()
    page.get_by_label("Select every row on this page").check()
    page.get_by_role("button", name="Cancel…").click()
    expect(page.get_by_role("heading", name="Cancel 1 todo?")).to_be_visible()
    assert page.js_errors == []
