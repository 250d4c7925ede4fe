"""What the drawer says about who wrote what, and how often: a person's own text is "by you,
by hand" (another person's "by <name>, by hand"), never a worker's; the result of record is
shown once; a try has one untrusted frame; a claim or a take-over is one banner."""

from __future__ import annotations

import re

from switchboard.queues import teams, transitions
from switchboard.queues.models import Membership
from switchboard.queues.transitions import Actor
from tests.board.history import mixed_history
from tests.board.pages import HTMX
from tests.board.pages import seen as seen_by


def _frames(page: str) -> list[str]:
    """The untrusted-data frames of a drawer, each as its HTML."""
    return re.findall(r'<figure class="untrusted[ "].*?</figure>', page, flags=re.S)


def _try_section(page: str) -> str:
    return re.search(r'<section class="attempt".*?</section>', page, flags=re.S)[0]


def test_your_own_result_and_summary_are_by_you_by_hand_and_shown_once(signed_in, user, make_todo):
    todo = make_todo()
    me = Actor.human(user)
    transitions.claim(me, todo.id)
    transitions.complete(me, todo.id, summary="merged <it> myself", result={"pr": 4242})
    page = signed_in.get(f"/todos/{todo.id}/").content.decode()
    frames = _frames(page)
    assert len(frames) == 2  # the result of record, and the try's one frame
    record, mine = frames
    assert "Untrusted data</b> · the result of try 1, which completed it, by you, by hand" in record
    assert "Untrusted data</b> · by you, by hand" in mine
    assert "merged &lt;it&gt; myself" in mine and "<it>" not in page  # still autoescaped
    assert "worker" not in record + mine
    # The result of record once: not again in the try that reported it.
    assert page.count("&quot;pr&quot;: 4242") == 1 and "4242" not in mine
    assert "Its result is the result of record, above." in _try_section(page)


def test_another_persons_text_is_by_them_by_hand(client, user, make_user, vend):
    platform = teams.get_or_create_team("platform", name="Platform")
    teams.add_member(platform, user, role=Membership.Role.OWNER)
    carol = make_user("carol")
    teams.add_member(platform, carol)
    endpoint, _ = vend("shared-agent", team=platform)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="by carol")
    transitions.claim(Actor.human(carol), todo.id)
    transitions.fail(Actor.human(carol), todo.id, summary="could not", result={"why": "quota"})
    client.force_login(user)
    page = client.get(f"/todos/{todo.id}/").content.decode()
    (frame,) = _frames(page)  # failed: no result of record
    assert "Untrusted data</b> · by carol, by hand" in frame
    assert "could not" in frame and "&quot;why&quot;: &quot;quota&quot;" in frame
    assert "by you" not in frame and "worker" not in frame


def test_an_agents_try_has_one_frame_for_all_it_reported(signed_in, endpoint):
    todo_id = mixed_history(endpoint)  # try 1 failed with a summary, an artifact and a result
    section = _try_section(signed_in.get(f"/todos/{todo_id}/?attempt=1").content.decode())
    (frame,) = _frames(section)
    assert "written by its worker (harness/buildbox/ci-fixer/run-41)" in frame
    for part in ("Summary", "Artifact", "Result"):
        assert f"<span>{part}</span>" in frame
    assert "mcp://cairn/r-41" in frame and "&quot;exit&quot;: 1" in frame


def test_an_agents_completed_result_of_record_names_its_worker(signed_in, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id, claimant="buildbox/9")
    transitions.complete(agent, todo.id, summary="done", result={"pages": 41})
    page = signed_in.get(f"/todos/{todo.id}/").content.decode()
    record, tried = _frames(page)
    assert "the result of try 1, which completed it, written by its worker (buildbox/9)" in record
    assert "&quot;pages&quot;: 41" in record and "41" not in tried


def test_claim_and_take_over_say_so_in_one_banner(signed_in, user, agent, make_todo):
    waiting = make_todo()
    held = make_todo()
    transitions.claim(agent, held.id, claimant="buildbox/3")
    for todo, action in ((waiting, "claim"), (held, "take-over")):
        response = signed_in.post(
            f"/todos/{todo.id}/{action}/", {"seen": seen_by(user, todo.id)}, **HTMX
        )
        body = response.content.decode()
        assert response.status_code == 200
        assert body.count("You hold this todo") == 1, action
        banners = re.findall(r'<p class="[^"]*notice[^"]*"', body)
        assert banners == ['<p class="heldby notice good"'], action
    # The next read of the drawer keeps the line, as the state it is, not as news.
    page = signed_in.get(f"/todos/{held.id}/", **HTMX).content.decode()
    assert "You hold this todo (an owner attempt)." in page and "notice good" not in page


def test_other_acts_keep_their_notice_above(signed_in, user, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id)
    response = signed_in.post(
        f"/todos/{todo.id}/release/", {"seen": seen_by(user, todo.id)}, **HTMX
    )
    assert '<p class="notice good" role="status" data-keep>Released' in response.content.decode()
