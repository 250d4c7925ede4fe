"""A Board with realistic data, made through the real transitions (no hand-written rows): a
team of three endpoints with every state on its queue (claimed by long claimant labels, by
a person, done with summaries and results, retrying, dead for each reason, canceled), a
paused endpoint, a stalled one, people's acts in Activity, a second team (the switcher), a
member and an invitation. The accessibility, keyboard and screenshot tests draw every page
over it."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model

from switchboard.queues import endpoints, teams, transitions
from switchboard.queues.models import Endpoint, Membership, Team
from switchboard.queues.transitions import Actor
from tests.board.history import done_with_history, mixed_history
from tests.queues.helpers import backdate, lapse_lease


@dataclass
class BoardData:
    team: Team
    other_team: Team
    ci: Endpoint
    docs: Endpoint
    load: Endpoint
    stalled: Endpoint
    dead_id: int  # a dead letter
    done_id: int  # a done todo with a mixed history
    claimed_id: int  # claimed by an agent (cancel's confirmation page)
    pending_title: str
    asked_id: int  # waiting on people: a question with a form drawn from answer_schema
    answered_id: int  # its question answered by alice, claimed again by its agent


def board_data(user) -> BoardData:
    team = user.teams.get()
    ci = endpoints.vend(team, "ci-fixer")[0]
    docs = endpoints.vend(team, "docs-bot")[0]
    load = endpoints.vend(team, "loadgen")[0]
    stalled = endpoints.vend(team, "nightly-export")[0]

    by = {e: Actor.agent(e) for e in (ci, docs, load, stalled)}
    person = Actor.human(user)

    def todo(endpoint, title, **kwargs):
        return transitions.create_todo(by[endpoint], title=title, **kwargs)[0].id

    # Done, with summaries and results (search finds words in them).
    for n, title in enumerate(
        ["Rebuild the API reference", "Bump the lockfile", "Rotate the staging certificate"]
    ):
        t = todo(docs, title)
        transitions.claim(by[docs], t, claimant=f"k8s/docs-bot-{n}/run-{100 + n}")
        transitions.complete(
            by[docs],
            t,
            summary=f"Done: {title.lower()}; customer_id checked in {n + 2} places.",
            result={"pages": 40 + n, "verdict": "clean"},
        )
    done_id = done_with_history(ci, user, title="Fix the flaky test_login")
    mixed_history(ci, title="Triage the nightly OOM in the importer")

    # Dead letters, one of each reason.
    for n in range(2):
        t = todo(ci, f"Parse incident {4397 + n}'s logs", max_attempts=1)
        transitions.claim(by[ci], t, claimant="harness/buildbox/ci-fixer/run-7")
        transitions.fail(by[ci], t, summary=f"KeyError: 'customer_id' in incident {4397 + n}")
    dead_id = todo(ci, "Migrate the billing export", max_attempts=3)
    transitions.claim(by[ci], dead_id)
    transitions.fail(by[ci], dead_id, summary="ValueError: malformed input", retryable=False)
    died = todo(load, "Load-test the checkout", max_attempts=1)
    transitions.claim(by[load], died, claimant="loadgen/held-by-test")
    lapse_lease(died)
    transitions.reap_lapsed()

    # Retrying, claimed by agents and by a person, canceled.
    t = todo(ci, "Re-run the flaky e2e suite", max_attempts=4)
    transitions.claim(by[ci], t)
    transitions.fail(by[ci], t, summary="exit 137 (OOM)")
    claimed_id = todo(ci, "Review the retry budget of the payments worker", priority=5)
    transitions.claim(
        by[ci], claimed_id, claimant="harness/buildbox-eu-west-1/ci-fixer-4/run-2024-12-06-0412"
    )
    transitions.heartbeat(by[ci], claimed_id)
    mine = todo(docs, "Proofread the release notes")
    transitions.claim(person, mine)
    gone = todo(docs, "Translate the onboarding guide")
    transitions.cancel(person, gone)
    taken = todo(docs, "Summarise yesterday's incidents")
    transitions.claim(by[docs], taken, claimant="k8s/docs-bot-7/run-9")
    transitions.take_over(person, taken)

    # Waiting on people: a question with choices, one in free text, one with a form; and one
    # answered and claimed again (the drawer's story of an asking try).
    def ask(title, claimant, minutes_ago, **question):
        t = todo(ci, title)
        transitions.claim(by[ci], t, claimant=claimant)
        transitions.release(by[ci], t, **question)
        # Asked a while ago: the asking try and its question moved back together.
        ago = [minutes_ago, t]
        backdate(
            "UPDATE todo_attempts SET claimed_at = claimed_at - make_interval(mins => %s),"
            " ended_at = ended_at - make_interval(mins => %s), lease_expires_at ="
            " lease_expires_at - make_interval(mins => %s) WHERE todo_id = %s",
            [minutes_ago, minutes_ago, *ago],
        )
        backdate(
            "UPDATE todo_questions SET asked_at = asked_at - make_interval(mins => %s)"
            " WHERE todo_id = %s",
            ago,
        )
        return t

    ask(
        "Drop the legacy customers.fax column",
        "harness/buildbox/ci-fixer/run-8",
        25,
        question="The migration drops customers.fax, which still holds 1,204 values. Go ahead?",
        choices=["Go ahead", "Keep the column", "Export it first"],
        answer_within_seconds=3600,
    )
    ask(
        "Route ticket #5521",
        "harness/buildbox/ci-fixer/run-9",
        12,
        question="The ticket says 'ACME' and two customers match: ACME GmbH and ACME Inc. Which?",
    )
    asked_id = ask(
        "Refund order 881",
        "harness/buildbox/ci-fixer/run-10",
        4,
        question="The customer asks for a refund of 840 EUR on order 881. Approve it?",
        answer_schema={
            "type": "object",
            "properties": {
                "amount": {"type": "integer", "title": "Refund in EUR", "minimum": 0},
                "approve": {"type": "boolean", "title": "Approve the refund"},
                "note": {"type": "string", "title": "Note", "description": "For the customer"},
            },
            "required": ["amount"],
        },
    )
    answered_id = ask(
        "Pick the release branch",
        "harness/buildbox/ci-fixer/run-11",
        18,
        question="Both release/4.2 and release/4.2-hotfix are open. Which one gets the fix?",
        choices=["release/4.2", "release/4.2-hotfix"],
    )
    transitions.answer(person, answered_id, value="release/4.2-hotfix")
    transitions.claim(by[ci], answered_id, claimant="harness/buildbox/ci-fixer/run-12")

    # Waiting: a few on each endpoint, and on the stalled one work that has waited 20 minutes
    # with no agent seen.
    pending_title = "Regenerate the SDK docs"
    for n, title in enumerate([pending_title, "Index the new runbooks", "Check broken links"]):
        todo(docs, title, priority=n)
    for n in range(6):
        todo(load, f"Synthetic checkout #{n + 1}")
    for n in range(4):
        todo(stalled, f"Export the {['orders', 'refunds', 'invoices', 'payouts'][n]} table")
    backdate(
        "UPDATE todos SET created_at = statement_timestamp() - interval '20 minutes'"
        " WHERE endpoint_id = %s",
        [stalled.pk],
        rows=4,
    )
    endpoints.pause(load, user=user)

    # A member, a second team with its own endpoint, and an invitation waiting for alice.
    bob = get_user_model().objects.create_user(username="bob", password="pw-for-tests")
    teams.add_member(team, bob, by=user)
    other_team = teams.get_or_create_team("platform", name="Platform")
    teams.add_member(other_team, user, role=Membership.Role.OWNER)
    ops = endpoints.vend(other_team, "ops-runner")[0]
    transitions.create_todo(Actor.agent(ops), title="Rotate the database password")
    third = teams.get_or_create_team("research", name="Research")
    teams.add_member(third, bob, role=Membership.Role.OWNER)
    teams.invite(third, user.get_username(), by=bob)
    return BoardData(
        team=team,
        other_team=other_team,
        ci=ci,
        docs=docs,
        load=load,
        stalled=stalled,
        dead_id=dead_id,
        done_id=done_id,
        claimed_id=claimed_id,
        pending_title=pending_title,
        asked_id=asked_id,
        answered_id=answered_id,
    )
