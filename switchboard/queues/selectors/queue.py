"""The Board's queue page: its filters, the page of rows (newest first, by keyset, with each
row's holder and last outcome), the live refresh of the rows shown, the state tabs' counts and
what a bulk action would act on. Scoped by team ids the caller took from the user's own
memberships (board.scope); an id outside them reads as missing."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    FilteredRelation,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Left

from switchboard.queues import db, sql
from switchboard.queues.models import (
    DIED_OUTCOMES,
    STANDING,
    Outcome,
    Todo,
    TodoAttempt,
    TodoState,
)
from switchboard.queues.selectors.search import search_tsquery, text_q, walked_text_q

# ---------------------------------------------------------------------------------------
# The Board's reads. Scoped by team ids that the caller took from the user's own
# memberships (board.scope); an id outside them reads as missing.

BOARD_PAGE = 50


@dataclass(frozen=True, slots=True)
class QueueFilters:
    state: str | None = None
    endpoint_id: int | None = None
    died: bool = False
    text: str = ""
    key: str = ""  # its todos of one key (issue 44)
    parent_id: int | None = None  # the children of one todo

    @property
    def active(self) -> bool:
        return bool(
            self.state or self.endpoint_id or self.died or self.text or self.key or self.parent_id
        )


# Characters of a dead letter's last summary the queue row reads (it shows 140, and these
# when opened; the drawer has the rest).
DEAD_SUMMARY_CHARS = 1000


def _in_teams(team_ids: list[int], endpoint_ids: list[int] | None = None) -> Q:
    """Todos of these teams. With the teams' endpoint ids (the queue page has them: its
    endpoint filter) the todos' own column is filtered too, which PostgreSQL estimates from
    its statistics: a small team's page reads its dozen todos by todos_endpoint_list, where
    the join's filter alone let it walk every team's todos newest first looking for them
    (docs/benchmarks.md, "The second hardening round")."""
    scoped = Q(endpoint__team_id__in=team_ids)
    return scoped & Q(endpoint_id__in=endpoint_ids) if endpoint_ids is not None else scoped


def _board_todos(team_ids: list[int], endpoint_ids: list[int] | None = None):
    """The Board's todos of these teams, each with its open attempt's holder (``holder_*``)
    and its newest closed attempt (``last_*``): index probes made only for the rows read.
    A dead letter also carries what its row says about why (``dead_*``): its newest closed
    attempt's summary (the start of it) and how many tries of its last round failed and died;
    a CASE on the state, so these probes run for dead rows only."""
    return _all_board_todos().filter(_in_teams(team_ids, endpoint_ids))


@functools.cache
def _all_board_todos() -> QuerySet[Todo]:
    """``_board_todos`` for every team: built once per process and only ever filtered (a
    filter clones it; it is never evaluated itself). Building its annotations was a large share
    of each queue page; filtering the built one costs next to nothing (docs/benchmarks.md,
    "Issue 15 again")."""
    newest_closed = TodoAttempt.objects.filter(
        todo=OuterRef("pk"), ended_at__isnull=False
    ).order_by("-seq")
    dead = Q(state=TodoState.DEAD)
    in_round = (
        TodoAttempt.objects.filter(todo=OuterRef("pk"), round=OuterRef("round"))
        .order_by()
        .values("todo")
    )

    def round_count(outcomes) -> Case:
        counted = in_round.annotate(n=Count("pk", filter=Q(outcome__in=outcomes))).values("n")
        return Case(When(dead, then=Subquery(counted, output_field=IntegerField())))

    return (
        Todo.objects.only(*_QUEUE_FIELDS)
        .annotate(
            # The endpoint's name, not its row: an Endpoint instance a row cost a page more
            # than the one name it shows (docs/benchmarks.md, "Issue 15, a third pass").
            endpoint_agent=F("endpoint__agent_id"),
            open_attempt=FilteredRelation(
                "attempts",
                condition=Q(attempts__seq=F("last_attempt_seq"), attempts__ended_at__isnull=True),
            ),
            holder_kind=F("open_attempt__claimer_kind"),
            holder_claimant=F("open_attempt__claimant"),
            holder_user=F("open_attempt__user__username"),
            holder_fenced=Q(open_attempt__lease_token_hash__isnull=False),
            last_outcome=Subquery(newest_closed.values("outcome")[:1]),
            last_seq=Subquery(newest_closed.values("seq")[:1]),
            dead_summary=Case(
                When(
                    dead,
                    then=Subquery(
                        newest_closed.values(text=Left("summary", DEAD_SUMMARY_CHARS))[:1]
                    ),
                )
            ),
            dead_failed=round_count([Outcome.FAILED]),
            dead_died=round_count(list(DIED_OUTCOMES)),
        )
        .order_by("-id")
    )


def _filter_q(
    filters: QueueFilters,
    *,
    with_state: bool = True,
    ids: tuple[int | None, int | None] = (None, None),
    walk: bool = False,
) -> Q:
    """The queue's filters as one condition (a WHERE, an annotation or an aggregate's
    FILTER alike). ``ids`` bounds the todo ids the search looks among, [low, high): the
    search's own index scans are bounded too (see ``board_queue``). ``walk``: the search
    checks each todo it is asked about, row by row, instead (``text_q``)."""
    condition = Q()
    if with_state and filters.state:
        condition &= Q(state=filters.state)
    if filters.endpoint_id:
        condition &= Q(endpoint_id=filters.endpoint_id)
    if filters.key:
        condition &= Q(key=filters.key)
    if filters.parent_id:
        condition &= Q(parent_id=filters.parent_id)
    if filters.died:
        condition &= Q(
            Exists(TodoAttempt.objects.filter(todo=OuterRef("pk"), outcome__in=DIED_OUTCOMES))
        )
    if filters.text:
        condition &= walked_text_q(filters.text) if walk else text_q(filters.text, ids=ids)
    return condition


# At most this many words of a search are used (a pasted paragraph is not a query plan).


SEARCH_WALK = 512
# Below them, it looks for the page's matches through the GIN indexes among this many todo
# ids, then among eight times as many below them, and so on: each look reads only the
# matches in its range from the tables.
SEARCH_WINDOW = 4096


def board_queue(
    team_ids: list[int],
    filters: QueueFilters,
    *,
    before_id: int | None = None,
    endpoint_ids: list[int] | None = None,
) -> tuple[list[Todo], int | None]:
    """One page of the Board's queue, newest first, by keyset. Each todo carries its open
    attempt's holder (``holder_*``) and its newest closed attempt (``last_*``). One query:
    the per-row attempt reads are index probes made only for the rows on the page. With a
    search (``_searched_ids``): one query for the ids of the newest ``SEARCH_WALK`` todos that
    pass the other filters, one that tests them in turn, newest first, until the page is
    full, then, if it is not, one per GIN window of ids below them (``SEARCH_WINDOW``) until
    it is; then the page's rows."""
    todos = _board_todos(team_ids, endpoint_ids)
    if filters.text:
        # The page's ids (one more than a page when there are more), each look a narrow
        # query of ids; then the page's rows with their annotations in one query (building
        # and planning it is the page's heavy part, which each look once did). Its other
        # filters are asked again as the rows are read: one that moved on in between is left
        # out (its words stay: a todo's title, body and attempt summaries are written once).
        ids = _searched_ids(team_ids, filters, before_id, endpoint_ids)
        page = ids[:BOARD_PAGE]
        others = _filter_q(replace(filters, text=""))
        rows = list(todos.filter(others, _listed(page))) if page else []
        next_before = page[-1] if len(ids) > BOARD_PAGE else None
    else:
        if before_id is not None:
            todos = todos.filter(pk__lt=before_id)
        rows = list(todos.filter(_filter_q(filters))[: BOARD_PAGE + 1])
        next_before = rows[BOARD_PAGE - 1].pk if len(rows) > BOARD_PAGE else None
    for row in rows:
        row.matches = True
    return rows[:BOARD_PAGE], next_before


def _searched_ids(
    team_ids: list[int],
    filters: QueueFilters,
    before_id: int | None,
    endpoint_ids: list[int] | None = None,
) -> list[int]:
    """The ids of a search's page and one more, newest first (``board_queue``): the walk
    over the newest ``SEARCH_WALK`` todos that pass the other filters, then the GIN windows
    below them."""
    scoped = Todo.objects.filter(_in_teams(team_ids, endpoint_ids)).order_by("-pk")
    if before_id is not None:
        scoped = scoped.filter(pk__lt=before_id)
    passing = scoped.filter(_filter_q(replace(filters, text=""))).values_list("pk", flat=True)
    # The walk: those todos' ids, then each tested in turn, newest first, by the primary key
    # (an ordered scan of the listed ids), until the page is full.
    newest = list(passing[:SEARCH_WALK])
    walk = Todo.objects.filter(walked_text_q(filters.text), _listed(newest)).order_by("-pk")
    ids = list(walk.values_list("pk", flat=True)[: BOARD_PAGE + 1]) if newest else []
    if len(ids) > BOARD_PAGE or len(newest) < SEARCH_WALK:
        return ids
    upper = newest[-1]
    # Below the walk: the GIN windows of ids, each reading only its own range's matches.
    high, window = upper, SEARCH_WINDOW
    while True:
        low = high - window if high - window > 1 else None
        found = scoped.filter(_filter_q(filters, ids=(low, high)), pk__lt=high)
        if low is not None:
            found = found.filter(pk__gte=low)
        ids += found.values_list("pk", flat=True)[: BOARD_PAGE + 1 - len(ids)]
        if len(ids) > BOARD_PAGE or low is None:
            return ids
        high, window = low, window * 8


def _listed(ids: list[int]) -> Q:
    """``todos.id`` is one of these ids, as one array parameter. Why raw SQL: the ORM's
    ``pk__in`` binds each id as its own parameter, and 512 of them are each quoted, parsed and
    planned (docs/benchmarks.md, "Issue 15, a third pass"); PostgreSQL also walks the primary
    key in order over ``= ANY``, so the walk stops at the page's last match. For a queryset of
    ``todos`` itself."""
    return Q(RawSQL('"todos"."id" = ANY(%s::bigint[])', [ids], output_field=BooleanField()))


def board_queue_rows(
    team_ids: list[int],
    filters: QueueFilters,
    ids: list[int],
    *,
    endpoint_ids: list[int] | None = None,
) -> list[Todo]:
    """The live queue's refresh: the rows a browser already shows (``ids``, at most a page),
    as they are now, newest first, each with ``matches``: whether it still passes the
    filters (a todo that moved on stays where the reader saw it, marked, until they ask for
    the fresh page). An id outside the teams reads as missing. One query; a search is
    checked row by row for these rows only."""
    condition = _filter_q(filters, walk=True)
    matches = (
        ExpressionWrapper(condition, output_field=BooleanField()) if condition else Value(True)
    )
    rows = _board_todos(team_ids, endpoint_ids).filter(pk__in=ids[:BOARD_PAGE])
    return list(rows.annotate(matches=matches))


@dataclass(frozen=True, slots=True)
class BulkStamp:
    """A todo of a bulk selection as the confirmation shows it and stamps it."""

    pk: int
    state: str
    last_attempt_seq: int
    round: int


@dataclass(frozen=True, slots=True)
class BulkSelection:
    stamps: list[BulkStamp]  # newest first, at most ``limit``: every todo it would act on
    todos: list[Todo]  # the newest ``shown`` of them, with the queue rows' annotations
    matching: int  # how many todos the selection names in all (beyond ``limit`` too)


def board_bulk_selection(
    team_ids: list[int],
    filters: QueueFilters,
    *,
    ids: list[int] | None,
    limit: int,
    shown: int,
) -> BulkSelection:
    """What a bulk rerun or cancel would act on: the todos ``ids`` names (ticked rows), or,
    with ``ids`` None, every todo passing ``filters`` ("all matching"), newest first, at most
    ``limit``: each one's stamp, and the newest ``shown`` with the queue rows' annotations (a
    dead letter's reason and summary) for the confirmation to list. Ids outside the teams are
    simply not there. Three queries (the stamps, the rows shown, and the count only when the
    stamps are full): the annotations are read for the rows shown, not for a thousand."""
    scoped = Todo.objects.filter(endpoint__team_id__in=team_ids)
    scoped = (
        scoped.filter(pk__in=ids[:limit]) if ids is not None else scoped.filter(_filter_q(filters))
    )
    stamps = [
        BulkStamp(*row)
        for row in scoped.order_by("-pk").values_list("pk", "state", "last_attempt_seq", "round")[
            : limit + 1
        ]
    ]
    matching = len(stamps)
    if matching > limit:
        matching = (
            Todo.objects.filter(endpoint__team_id__in=team_ids).filter(_filter_q(filters)).count()
        )
    stamps = stamps[:limit]
    newest = [stamp.pk for stamp in stamps[:shown]]
    todos = list(_board_todos(team_ids).filter(pk__in=newest)) if newest else []
    return BulkSelection(stamps=stamps, todos=todos, matching=matching)


def board_titles(team_ids: list[int], ids: list[int]) -> dict[int, tuple[str, str, str]]:
    """Id → (title, state, agent id) of those of ``ids`` in the teams (a bulk action's
    result page). One query."""
    rows = Todo.objects.filter(pk__in=ids, endpoint__team_id__in=team_ids).values_list(
        "pk", "title", "state", "endpoint__agent_id"
    )
    return {pk: (title, state, agent) for pk, title, state, agent in rows}


def board_todo_exists(team_ids: list[int], todo_id: int) -> bool:
    return Todo.objects.filter(pk=todo_id, endpoint__team_id__in=team_ids).exists()


# A state tab counts its todos exactly up to this many and says "10,000+" beyond: counting
# every done todo of a busy team walked all their index entries for each page, much of
# the queue page's time (docs/benchmarks.md, "Issue 15: triage, search and the endpoint page").
TAB_COUNT_CAP = 10_000
# With a search or "has died attempts", a tab tests its state's newest this many todos one by
# one (the walk's test, cheap for a todo; docs/benchmarks.md, "Dead letters at scale") and
# says "N+" when the state has more: a rare word's GIN look (below) makes it exact instead.
COUNT_WALK = 100
# ...when the walk found at most one match in this many todos tested: the word is rare, so its
# GIN posting lists are short and reading them whole is cheap, where a common word's are
# long (docs/benchmarks.md, "Dead letters at scale").
COUNT_RARE = 50


@dataclass(frozen=True, slots=True)
class QueueCounts:
    # How many todos of the teams (of the endpoint filter) in each state pass the filters;
    # a state in ``at_least`` has at least that many (its tab says "N+").
    by_state: dict[str, int]
    newer: int  # todos that pass every filter with an id above ``newer_than``
    newest: int = 0  # the newest of them (the live page counts what came after it itself)
    at_least: frozenset[str] = frozenset()

    def over_cap(self, state: str | None = None) -> bool:
        """Is this state's count (None: any state's) only a lower bound?"""
        return bool(self.at_least & ({state} if state else set(self.by_state)))

    @property
    def total(self) -> int:
        """Every state's count summed (a lower bound when ``over_cap()``)."""
        return sum(self.by_state.values())

    def exact(self, state: str | None = None) -> int | None:
        """The count of this state (None: of all), or None when it is only a lower bound."""
        if self.over_cap(state):
            return None
        return self.by_state[state] if state else self.total

    def label(self, state: str | None = None) -> str:
        """What a tab shows: "1,234", or "10,000+" past the cap, or "12+" for a filtered
        count that stopped early ("All": the sum, with "+" when any state has one)."""
        n = self.by_state[state] if state else self.total
        return f"{n:,}+" if self.over_cap(state) else f"{n:,}"


def board_queue_counts(
    team_ids: list[int],
    filters: QueueFilters,
    *,
    newer_than: int | None,
    endpoint_ids: list[int] | None = None,
) -> QueueCounts:
    """The state tabs' counts of what the filters show in each state (todos of the teams and
    the endpoint filter, with the search and "has died attempts"), and how many todos passing
    every filter arrived above ``newer_than`` (the newest row the reader has seen).

    Without a search or "has died attempts": one statement, each state a bounded walk of
    todos_endpoint_state, exact up to ``TAB_COUNT_CAP``. With them (``_filtered_counts``):
    one statement that tests each state's newest ``COUNT_WALK`` todos row by row (exact for
    a state with no more), and for a rare word one more that counts the other states'
    matches through the GIN indexes; else those say "N+". Under a search this runs inside
    its time bound (``search_time_bound``), as the page does. One statement for the new
    arrivals (a walk of the ids above ``newer_than``; its search bounded the same way)."""
    if filters.text or filters.died:
        by_state, at_least = _filtered_counts(team_ids, filters, endpoint_ids)
    else:
        rows = db.fetch(
            sql.COUNT_TODOS_BY_STATE_CAPPED,
            {
                "team_ids": team_ids,
                "endpoint_id": filters.endpoint_id,
                "states": list(TodoState.values),
                "cap": TAB_COUNT_CAP,
            },
        )
        by_state = {state: min(n, TAB_COUNT_CAP) for state, n in rows}
        at_least = {state for state, n in rows if n > TAB_COUNT_CAP}
    newer, newest = 0, 0
    if newer_than is not None:
        found = (
            Todo.objects.filter(_in_teams(team_ids, endpoint_ids), pk__gt=newer_than)
            .filter(_filter_q(filters, ids=(newer_than + 1, None)))
            .aggregate(n=Count("pk"), top=Max("pk"))
        )
        newer, newest = found["n"], found["top"] or 0
    return QueueCounts(by_state=by_state, newer=newer, newest=newest, at_least=frozenset(at_least))


def _filtered_counts(
    team_ids: list[int], filters: QueueFilters, endpoint_ids: list[int] | None
) -> tuple[dict[str, int], set[str]]:
    """Each state's count of todos passing the search and "has died attempts" (the counts
    and the states that are only a lower bound, ``board_queue_counts``).

    The walk: each state's newest ``COUNT_WALK`` + 1 todos (of the teams and the endpoint
    filter), each tested row by row as the live refresh tests its rows (``walked_text_q``,
    the died attempts' probe), one UNION ALL of a LIMIT per state; a state with no more than
    that is counted exactly. The look: when the walk found the words rare (at most one match
    in ``COUNT_RARE`` todos tested), the states it did not finish are counted through the
    GIN indexes (``text_q``: short posting lists), exactly, capped at ``TAB_COUNT_CAP``. A
    state left unfinished says "N+" (N: the matches among its newest)."""
    scoped = Todo.objects.filter(_in_teams(team_ids, endpoint_ids))
    if filters.endpoint_id:
        scoped = scoped.filter(endpoint_id=filters.endpoint_id)
    test = _filter_q(QueueFilters(died=filters.died, text=filters.text), walk=True)
    passes = ExpressionWrapper(test, output_field=BooleanField())
    arms = [
        scoped.filter(state=state)
        .order_by("-pk")
        .annotate(passes=passes)
        .values_list("state", "passes")[: COUNT_WALK + 1]
        for state in TodoState.values
    ]
    first, *rest = arms
    tested = dict.fromkeys(TodoState.values, 0)
    by_state = dict.fromkeys(TodoState.values, 0)
    for state, passed in first.union(*rest, all=True):
        tested[state] += 1
        by_state[state] += bool(passed)
    unfinished = {state for state, n in tested.items() if n > COUNT_WALK}
    walked = sum(tested[state] for state in unfinished)
    matched = sum(by_state[state] for state in unfinished)
    rare = matched * COUNT_RARE <= walked
    if unfinished and rare and filters.text and search_tsquery(filters.text) is not None:
        looked = (
            scoped.filter(state__in=sorted(unfinished))
            .filter(_filter_q(QueueFilters(died=filters.died, text=filters.text)))
            .order_by()
            .values_list("state")
            .annotate(n=Count("pk"))
        )
        counted = dict.fromkeys(unfinished, 0) | dict(looked)
        for state, n in counted.items():
            by_state[state] = min(n, TAB_COUNT_CAP)
        unfinished = {state for state, n in counted.items() if n > TAB_COUNT_CAP}
    return by_state, unfinished


# ---------------------------------------------------------------------------------------
# Dead letters by reason (the Board's /queue/dead/ page and its bulk actions on one group).

# The newest this many dead letters of the teams (or of one endpoint) are grouped: each one is
# a probe of its last round's tries, so the page costs what these do however many dead letters
# the teams keep (docs/benchmarks.md, "Dead letters at scale"); it says how many it left out.
DEAD_GROUPED = 2000
# The start of the first line of a dead letter's last try's summary its sub-group goes by.
ERROR_START_CHARS = 64


@dataclass(frozen=True, slots=True)
class DeadLetterKey:
    """What a dead letter's reason words are made from (board/reasons.py), and its error:
    the start of its last try's summary (None without one). ``failed`` and ``died`` are
    None where the words do not use them (a revoked endpoint, a budget not spent)."""

    reason: str
    failures: int
    max_attempts: int
    failed: int | None
    died: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class DeadLetterGroups:
    keys: list[tuple[DeadLetterKey, int, int]]  # each key with its count and newest id
    grouped: int  # how many dead letters the keys count (at most DEAD_GROUPED)
    total: int  # the teams' dead letters, exact up to TAB_COUNT_CAP (its + 1 beyond)


def _dead_letter_params(team_ids: list[int], endpoint_id: int | None) -> dict:
    return {
        "team_ids": team_ids,
        "endpoint_id": endpoint_id,
        "limit": DEAD_GROUPED,
        "error_chars": ERROR_START_CHARS,
        "died_outcomes": list(DIED_OUTCOMES),
    }


def board_dead_letter_groups(
    team_ids: list[int], *, endpoint_id: int | None = None
) -> DeadLetterGroups:
    """The newest ``DEAD_GROUPED`` dead letters of the teams (or of one of their endpoints),
    counted by ``DeadLetterKey``, and how many dead letters there are. One statement."""
    params = _dead_letter_params(team_ids, endpoint_id) | {"cap": TAB_COUNT_CAP}
    rows = db.fetch(sql.DEAD_LETTER_GROUPS, params)
    keys = [(DeadLetterKey(*row[:6]), row[6], row[7]) for row in rows]
    grouped = sum(n for _, n, _ in keys)
    return DeadLetterGroups(keys=keys, grouped=grouped, total=rows[0][8] if rows else 0)


def board_dead_letters(
    team_ids: list[int], *, endpoint_id: int | None = None
) -> list[tuple[int, DeadLetterKey]]:
    """The same newest ``DEAD_GROUPED`` dead letters, each id with its key, newest first (a
    bulk action on one group picks its members). One statement."""
    rows = db.fetch(sql.DEAD_LETTERS_NEWEST, _dead_letter_params(team_ids, endpoint_id))
    return [(row[0], DeadLetterKey(*row[1:])) for row in rows]


_QUEUE_FIELDS = (
    "id",
    "title",
    *STANDING,
    "owner",
    "lease_expires_at",
    "next_retry_at",
    "not_before",
    "dead_letter_reason",
    "updated_at",
    "last_attempt_seq",
    "waiting_for",
    "key",
    "parent_id",
)
