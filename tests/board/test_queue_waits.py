"""The queue by key and by parent (issue 44): ``?key=`` lists the todos of one key and
``?parent=`` a todo's children, each kept by the tabs, the search, the bulk actions' "all
matching" and the live refresh; a row says what a waiting todo waits for; hostile keys are
inert; another team's parent lists nothing."""

from __future__ import annotations

from django.urls import reverse

from switchboard.queues import transitions

HOSTILE = '"><script>alert(1)</script>'


def _titles(page: str) -> list[str]:
    import re

    return re.findall(r'title="([^"]*)">\1</a>', page)


def test_the_queue_by_key_and_by_parent(logged_in, agent, make_todo):
    make_todo("x1", key="repo-x")
    make_todo("x2", key="repo-x")
    make_todo("y1", key="repo-y")
    parent = make_todo("plan")
    transitions.claim(agent, parent.id)
    make_todo("child 1", parent=parent.id)
    make_todo("child 2", parent=parent.id)

    page = logged_in.get("/queue/?key=repo-x").content.decode()
    assert sorted(_titles(page)) == ["x1", "x2"]
    assert 'name="key" value="repo-x"' in page  # the filter form keeps it
    assert "state=pending&amp;key=repo-x" in page  # and so do the tabs
    page = logged_in.get(f"/queue/?parent={parent.id}").content.decode()
    assert sorted(_titles(page)) == ["child 1", "child 2"]
    assert f'children of <a href="/todos/{parent.id}/">#{parent.id}</a>' in page
    page = logged_in.get(f"/queue/?parent={parent.id}&q=child 2").content.decode()
    assert _titles(page) == ["child 2"]


def test_all_matching_by_key_acts_on_that_key_only(logged_in, human, make_todo):
    make_todo("other key", key="repo-y")
    for n in range(3):
        make_todo(f"x{n}", key="repo-x")
    page = logged_in.get(reverse("triage"), {"do": "cancel", "all": "1", "key": "repo-x"})
    body = page.content.decode()
    assert page.status_code == 200 and 'name="key" value="repo-x"' in body
    assert "other key" not in body and "x0" in body and "x2" in body


def test_a_waiting_row_says_what_it_waits_for(logged_in, make_todo):
    first = make_todo("extract")
    make_todo("load", after=[first.id])
    page = logged_in.get("/queue/?state=waiting").content.decode()
    assert "waiting for todos" in page and _titles(page) == ["load"]


def test_a_hostile_key_is_inert_and_another_teams_parent_lists_nothing(
    logged_in, make_todo, make_user, vend
):
    from switchboard.queues.transitions import Actor

    make_todo("mine", key=HOSTILE)
    page = logged_in.get("/queue/", {"key": HOSTILE}).content.decode()
    assert HOSTILE not in page and _titles(page) == ["mine"]
    bob = make_user("bob")
    theirs, _ = vend("bobs-agent", team=bob.teams.get())
    parent, _ = transitions.create_todo(Actor.agent(theirs), title="theirs")
    transitions.claim(Actor.agent(theirs), parent.id)
    transitions.create_todo(Actor.agent(theirs), title="their child", parent=parent.id)
    page = logged_in.get(f"/queue/?parent={parent.id}").content.decode()
    assert "their child" not in page and _titles(page) == []
    for bad in ("x" * 500, "\x00", "-1", "1e9"):
        assert logged_in.get("/queue/", {"key": bad, "parent": bad}).status_code == 200


def test_todos_waiting_for_todos_are_not_counted_as_questions(
    logged_in, endpoint, agent, make_todo
):
    """The overview's Questions and the nav's Waiting count are todos waiting on a person;
    a todo waiting for another todo or for its children is waiting, but asks nobody."""
    first = make_todo("extract")
    make_todo("load", after=[first.id])
    asked = make_todo("decide")
    transitions.claim(agent, asked.id)
    transitions.release(agent, asked.id, question="Go ahead?", choices=["yes", "no"])
    page = logged_in.get("/").content.decode()
    assert f'href="/waiting/?endpoint={endpoint.pk}" aria-label="1 waiting on people">1</a>' in page
    assert '<span class="nav-count">1</span>' in page
    queue = logged_in.get("/queue/?state=waiting").content.decode()
    assert sorted(_titles(queue)) == ["decide", "load"]  # the tab holds every wait
