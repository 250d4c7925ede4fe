"""The overview's per-minute charts compare: one scale for a team's endpoints (its busiest
minute at the top, written beside each chart), a time axis, each bar's numbers as its
tooltip, and pieces that differ by fill, not by colour alone."""

from __future__ import annotations

import re

import pytest

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor

pytestmark = pytest.mark.django_db


def _completed(endpoint, n: int, *, failed: int = 0) -> None:
    agent = Actor.agent(endpoint)
    for i in range(n + failed):
        todo = transitions.create_todo(agent, title=f"job {i}")[0]
        transitions.claim(agent, todo.id)
        if i < n:
            transitions.complete(agent, todo.id)
        else:
            transitions.fail(agent, todo.id, retryable=False)


def _cell(page: str, endpoint_id: int) -> str:
    row = page.index(f'id="ov-e{endpoint_id}"')
    start = page.index('class="col-chart"', row)
    return page[start : page.index("</td>", start)]


def test_a_teams_charts_share_one_scale_with_axes_and_a_tooltip_per_bar(signed_in, make_endpoint):
    busy, quiet = make_endpoint("busy"), make_endpoint("quiet")
    _completed(busy, 30)
    _completed(quiet, 2, failed=1)
    page = signed_in.get("/").content.decode()
    busy_cell, quiet_cell = _cell(page, busy.pk), _cell(page, quiet.pk)

    # One scale: both say the team's busiest minute (30) at the top, and the quiet
    # endpoint's bar is a tenth as tall as the busy one's (60 units for 30 tries, 6 for 3).
    for cell in (busy_cell, quiet_cell):
        assert re.search(r'class="spark-y"[^>]*><span>30</span><span>0</span>', cell)
        assert "60 min ago</span><span>now</span>" in cell
        assert "top: 30 a minute." in cell, cell[:600]
    heights = [
        float(h)
        for h in re.findall(
            r'class="c-\w+" x="[\d.]+" y="[\d.]+" width="8" height="([\d.]+)"', quiet_cell
        )
    ]
    assert sum(heights) == pytest.approx(6.0)
    busy_heights = re.findall(
        r'class="c-completed" x="[\d.]+" y="[\d.]+" width="8" height="([\d.]+)"', busy_cell
    )
    assert max(map(float, busy_heights)) == pytest.approx(60.0)

    # A tooltip for every minute, empty ones included, saying its numbers.
    assert quiet_cell.count('<g class="bucket"><title>') == 60
    assert "the last minute: 2 completed, 1 failed" in quiet_cell
    # Failed and died pieces are filled with a pattern, drawn once on the page.
    assert 'class="c-failed"' in quiet_cell
    assert page.count('id="fill-failed"') == 1 and page.count('id="fill-died"') == 1
