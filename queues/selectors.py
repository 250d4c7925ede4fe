"""Scoped reads. Every read takes its scope (an endpoint, or a user) as an argument; an
unknown id and a foreign id give the same NotFound. Reads never write."""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime

import psycopg
from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db import OperationalError, connection, transaction
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
from django.db.models.functions import Coalesce, JSONObject, Left

from queues import arguments, bounds, db, sql
from queues.arguments import whole_number
from queues.bounds import ATTEMPTS_DEFAULT, ATTEMPTS_MAX, LIST_DEFAULT, LIST_MAX
from queues.db import Fetch, Plan
from queues.errors import Invalid, NotFound
from queues.models import (
    DIED_OUTCOMES,
    LIVE_STATES,
    SUMMARY_SEARCHABLE,
    DeadLetterSink,
    Delivery,
    Endpoint,
    EventKind,
    Membership,
    Outcome,
    Team,
    Todo,
    TodoAttempt,
    TodoSearchDocument,
    TodoState,
)
from queues.records import (
    ActivityEnding,
    ActivityEvent,
    AttemptRecord,
    EventRecord,
    TodoDetail,
    TodoRecord,
)


def _limit(value, *, name: str, default: int, maximum: int) -> int:
    return default if value is None else whole_number(value, name, 1, maximum)


def get_todo_for_endpoint_plan(
    endpoint: Endpoint, todo_id, *, attempts_limit=None
) -> Plan[TodoDetail]:
    """get_todo on the agent path: a todo of the endpoint's own queue, with its newest
    attempts; or a todo it sent elsewhere (as requester): state and result, no attempts."""
    todo_id = arguments.todo_id(todo_id)
    limit = _limit(
        attempts_limit, name="attempts_limit", default=ATTEMPTS_DEFAULT, maximum=ATTEMPTS_MAX
    )
    rows = yield Fetch(
        sql.SELECT_TODO_FOR_AGENT_OR_REQUESTER, {"todo_id": todo_id, "scope_endpoint": endpoint.pk}
    )
    if not rows:
        raise NotFound()
    todo = TodoRecord.from_row(rows[0])
    if todo.endpoint_id != endpoint.pk:
        return TodoDetail(todo=todo, attempts=[], as_requester=True)
    return TodoDetail(todo=todo, attempts=(yield from _attempts(todo, limit)))


def get_todo_for_endpoint(endpoint: Endpoint, todo_id, *, attempts_limit=None) -> TodoDetail:
    return db.run(get_todo_for_endpoint_plan(endpoint, todo_id, attempts_limit=attempts_limit))


def get_todo_for_user(user, todo_id, *, attempts_limit=None) -> TodoDetail:
    """The Board path: a todo of any endpoint in the user's teams."""
    limit = _limit(
        attempts_limit, name="attempts_limit", default=ATTEMPTS_DEFAULT, maximum=ATTEMPTS_MAX
    )
    return db.run(_detail_for_user(user, todo_id, limit))


def _detail_for_user(user, todo_id, limit: int) -> Plan[TodoDetail]:
    rows = yield Fetch(
        sql.SELECT_TODO_FOR_USER, {"todo_id": arguments.todo_id(todo_id), "scope_user": user.pk}
    )
    if not rows:
        raise NotFound()
    todo = TodoRecord.from_row(rows[0])
    return TodoDetail(todo=todo, attempts=(yield from _attempts(todo, limit)))


def _attempts(todo: TodoRecord, limit: int) -> Plan[list[AttemptRecord]]:
    if todo.last_attempt_seq == 0:
        return []  # never claimed: skip the query
    rows = yield Fetch(sql.SELECT_ATTEMPTS, {"todo_id": todo.id, "limit": limit})
    return [AttemptRecord.from_row(row).with_live_lease(todo) for row in rows]


def list_todos_plan(
    endpoint: Endpoint, *, state=None, limit=None, cursor=None
) -> Plan[tuple[list[TodoRecord], str | None]]:
    """The endpoint's queue, newest first, by keyset: ``cursor`` continues after the last
    page. A page holds at most ``limit`` todos and about LIST_MAX_BYTES of their text (at least
    one todo). One query."""
    if state is not None and state not in TodoState.values:
        raise Invalid(f"state must be one of {', '.join(TodoState.values)}.")
    limit = _limit(limit, name="limit", default=LIST_DEFAULT, maximum=LIST_MAX)
    before_id = decode_cursor(cursor) if cursor is not None else None
    rows = yield Fetch(
        sql.LIST_TODOS,
        {
            "endpoint_id": endpoint.pk,
            "state": state,
            "before_id": before_id,
            "limit": limit,
            "max_bytes": bounds.LIST_MAX_BYTES,
        },
    )
    todos = [TodoRecord.from_row(row) for row in rows]
    more = bool(rows) and rows[0][-1]
    return todos, encode_cursor(todos[-1].id) if more else None


def list_todos(endpoint: Endpoint, **arguments) -> tuple[list[TodoRecord], str | None]:
    return db.run(list_todos_plan(endpoint, **arguments))


def encode_cursor(todo_id: int) -> str:
    return base64.urlsafe_b64encode(f"v1:{todo_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor) -> int:
    if not isinstance(cursor, str) or len(cursor) > 64:
        raise Invalid("cursor is not one this server gave out.")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        version, _, value = raw.partition(":")
        if version != "v1":
            raise ValueError(version)
        todo_id = int(value)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise Invalid("cursor is not one this server gave out.") from exc
    if todo_id < 1:
        raise Invalid("cursor is not one this server gave out.")
    return todo_id


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

    @property
    def active(self) -> bool:
        return bool(self.state or self.endpoint_id or self.died or self.text)


# Characters of a dead letter's last summary the queue row reads (it shows fewer).
DEAD_SUMMARY_CHARS = 240


def _in_teams(team_ids: list[int], endpoint_ids: list[int] | None = None) -> Q:
    """Todos of these teams. With the teams' endpoint ids (the queue page has them: its
    endpoint filter) the todos' own column is filtered too, which PostgreSQL estimates from
    its statistics: a small team's page reads its dozen todos by todos_endpoint_list, where
    the join's filter alone let it walk every team's todos newest first looking for them
    (a 12-todo team's queue page at 200 ms beside a team of 100,000, whose own took 60)."""
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
    filter clones it; it is never evaluated itself). Building its annotations took 4 ms of
    each queue page, filtering the built one takes 0.05."""
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
            # The endpoint's name, not its row: 51 Endpoint instances were 1.5 ms a page.
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
    checks each todo it is asked about, row by row, instead (``_text_q``)."""
    condition = Q()
    if with_state and filters.state:
        condition &= Q(state=filters.state)
    if filters.endpoint_id:
        condition &= Q(endpoint_id=filters.endpoint_id)
    if filters.died:
        condition &= Q(
            Exists(TodoAttempt.objects.filter(todo=OuterRef("pk"), outcome__in=DIED_OUTCOMES))
        )
    if filters.text:
        condition &= _walked_text_q(filters.text) if walk else _text_q(filters.text, ids=ids)
    return condition


# At most this many words of a search are used (a pasted paragraph is not a query plan).
SEARCH_WORDS_MAX = 16
# At most this many lexemes in all: PostgreSQL's parser makes a hyphenated word one lexeme
# for the whole and one per part ("a-b-c" is four), each a prefix that the GIN indexes look
# up on their own, so a 199-character "a-b-c-..." was 101 one-letter prefixes and took
# 1.4-2.4 s a page over 100,000 todos (a normal search 70-140 ms): second hardening round.
SEARCH_LEXEMES_MAX = 32
# The advisory lock class of search slots (slot n is SEARCH_LOCK_CLASS + n, keyed by user id).
SEARCH_LOCK_CLASS = 0x53420000


class SearchRefused(ValueError):
    """A search the Board will not run; its text is the sentence the page shows."""


def _lexemes(term: str) -> int:
    parts = len(_PARTS.findall(term))
    return parts + 1 if parts > 1 else parts


def search_refusal(text: str) -> str | None:
    """Why the Board will not run this search (a sentence for the page), or None."""
    terms = [term for term in text.split() if _WORDISH.search(term)][:SEARCH_WORDS_MAX]
    lexemes = sum(_lexemes(term) for term in terms)
    if lexemes <= SEARCH_LEXEMES_MAX:
        return None
    return (
        f"This search has {lexemes} words to look for, counting each part of a hyphenated or "
        f"dotted word and the whole (a-b-c is four); at most {SEARCH_LEXEMES_MAX} are looked "
        "for. Search for fewer words."
    )


def search_tsquery(text: str) -> str | None:
    """The search's words as a raw tsquery: every word, in any order, each a prefix
    (``'rebuil':* & 'doc':*``), or None when the text has no letter or digit at all. Each
    word is quoted (tsquery's own quoting: ``'`` doubled, ``\\`` escaped), so nothing typed is
    an operator: ``a | b`` is the three words "a", "|" (no lexeme, dropped) and "b". Raises
    SearchRefused past SEARCH_LEXEMES_MAX (``search_refusal`` says so first)."""
    if (refusal := search_refusal(text)) is not None:
        raise SearchRefused(refusal)
    terms = [term for term in text.split() if _WORDISH.search(term)][:SEARCH_WORDS_MAX]
    if not terms:
        return None
    quoted = (term.replace("\\", "\\\\").replace("'", "''") for term in terms)
    return " & ".join(f"'{term}':*" for term in quoted)


@contextmanager
def search_time_bound(text: str, *, searcher: int) -> Iterator[None]:
    """The Board's reads inside run as one transaction with a statement timeout
    (``SWITCHBOARD_SEARCH_TIMEOUT_SECONDS``) when there is a search, holding one of the
    searcher's (a user id) ``SWITCHBOARD_SEARCHES_PER_USER`` slots; a search stopped by the
    timeout, or with no slot free, is SearchRefused, saying so. Without a search, nothing is
    added. SET LOCAL and the slot's lock end with the transaction, so the pooled connection
    goes back as it came."""
    if not text:
        yield
        return
    seconds = settings.SWITCHBOARD_SEARCH_TIMEOUT_SECONDS
    slots = settings.SWITCHBOARD_SEARCHES_PER_USER
    try:
        with transaction.atomic():
            [(_, admitted)] = db.fetch(
                sql.SEARCH_STATEMENT_TIMEOUT,
                {
                    "milliseconds": f"{round(seconds * 1000)}",
                    "slots": slots,
                    "lock_class": SEARCH_LOCK_CLASS,
                    "searcher": searcher,
                },
            )
            if not admitted:
                raise SearchRefused(
                    f"You have {slots} searches running already (in other tabs or "
                    "refreshes), so this one was not started. Try again once they are done."
                )
            yield
    except OperationalError as error:
        if not isinstance(error.__cause__, psycopg.errors.QueryCanceled):
            raise
        raise SearchRefused(
            f"This search took longer than {seconds:g} s and was stopped, so its results are "
            "not shown. Search for longer or rarer words."
        ) from error


_WORDISH = re.compile(r"[^\W_]")
_PARTS = re.compile(r"[^\W_]+")


def _text_q(text: str, *, ids: tuple[int | None, int | None] = (None, None)) -> Q:
    """The queue's text filter: the words, in any order, in a todo's title or body or in any
    of its attempts' summaries (full-text search on the two GIN indexes of migrations 0015 and
    0018); "#123" or "123" also finds todo 123. The matching ids are one UNION of index scans,
    so the page's scan by newest id probes a small set (an OR of the arms would walk every todo
    of the teams); ``ids`` = (low, high) bounds each arm to todo ids in [low, high), which
    PostgreSQL ANDs with the GIN index's bitmap, so only the matches in that range are read
    from the tables. A text with no letter or digit ("%", "_") is looked for in titles as
    typed."""
    low, high = ids
    bounds = Q()
    if low is not None:
        bounds &= Q(todo_id__gte=low)
    if high is not None:
        bounds &= Q(todo_id__lt=high)
    arms: list[QuerySet] = []
    raw = search_tsquery(text)
    if raw is not None:
        query = SearchQuery(raw, search_type="raw", config="simple")
        arms.append(TodoSearchDocument.objects.filter(bounds, document=query).values("todo_id"))
        arms.append(
            TodoAttempt.objects.filter(SUMMARY_SEARCHABLE, bounds, summary_document=query).values(
                "todo_id"
            )
        )
    else:
        titled = Todo.objects.filter(title__ilike_contains=text)
        if low is not None:
            titled = titled.filter(pk__gte=low)
        if high is not None:
            titled = titled.filter(pk__lt=high)
        arms.append(titled.values("pk"))
    if (named := _named_id(text)) is not None:
        arms.append(Todo.objects.filter(pk=named).values("pk"))
    first, *rest = arms
    return Q(pk__in=first.union(*rest) if rest else first)


# The walk's test of one todo, ``todos`` being the queue's own row. Why raw SQL: each probe
# must be a scalar subquery with LIMIT 1, which PostgreSQL runs per row as written (an EXISTS
# it may turn into a hashed subplan, a sequential scan of every attempt's words, 500 ms over
# 1,000,000, when it expects many rows to test), and the ORM took 2.5 ms of each search to
# build and compile the two. ts_match_vq is ``@@`` in a form no index answers.
_WALK_TEST = """(
    COALESCE((SELECT ts_match_vq(d.document, to_tsquery('simple'::regconfig, %s))
                FROM todo_search_documents d WHERE d.todo_id = "todos"."id" LIMIT 1), false)
 OR COALESCE((SELECT true FROM todo_attempts a
               WHERE a.todo_id = "todos"."id" AND a.summary > ''
                 AND ts_match_vq(a.summary_document, to_tsquery('simple'::regconfig, %s))
               LIMIT 1), false))"""


def _walked_text_q(text: str) -> Q:
    """The same test as ``_text_q``, asked of each todo in turn: its title and body's words
    (one probe of todo_search_documents by todo id), then its attempts' stored summary words
    (a probe of todo_attempts_todo_seq), or its id for "#123". For a few hundred todos, a
    few ms however common the words are; the GIN indexes' cost grows with how many rows
    hold the words (``board_queue`` uses both). For a queryset of ``todos`` itself (its
    table unaliased), not inside another query."""
    raw = search_tsquery(text)
    if raw is None:
        condition = Q(title__ilike_contains=text)
    else:
        condition = Q(RawSQL(_WALK_TEST, [raw, raw], output_field=BooleanField()))
    if (named := _named_id(text)) is not None:
        condition |= Q(pk=named)
    return condition


def _named_id(text: str) -> int | None:
    """The todo a search of "#123" or "123" also finds: ASCII digits only (str.isdigit takes
    "²", which int() refuses), and few enough for a bigint."""
    number = re.fullmatch(r"#?([0-9]{1,18})", text)
    return int(number[1]) if number else None


def jump_target(text: str) -> int | None:
    """The todo id a search of exactly "#123" names (the queue page opens its drawer)."""
    number = re.fullmatch(r"#([0-9]{1,18})", text.strip())
    return int(number[1]) if number else None


# A search first checks the newest this many todos that pass the other filters one by one
# (``_walked_text_q``): a common word fills the page there in a few ms, where reading its GIN
# posting list took 40 (70,000 attempts for one word over 1,000,000).
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
        # and planning those took 9 ms, each look once did). Its other filters are asked
        # again as the rows are read: one that moved on in between is left out (its words
        # stay: a todo's title, body and attempt summaries are written once).
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
    walk = Todo.objects.filter(_walked_text_q(filters.text), _listed(newest)).order_by("-pk")
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
    ``pk__in`` binds each id as its own parameter, and 512 of them cost 4 ms of quoting,
    parsing and planning; PostgreSQL also walks the primary key in order over ``= ANY``,
    so the walk stops at the page's last match. For a queryset of ``todos`` itself."""
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
# every done todo of a busy team walked 90,000 index entries for each page (30 to 40 ms of
# the queue page's 100).
TAB_COUNT_CAP = 10_000


@dataclass(frozen=True, slots=True)
class QueueCounts:
    # The teams' todos (of the endpoint filter) in each state, exact up to TAB_COUNT_CAP; a
    # state with more says TAB_COUNT_CAP + 1.
    by_state: dict[str, int]
    newer: int  # todos that pass every filter with an id above ``newer_than``

    def over_cap(self, state: str | None = None) -> bool:
        """Is this state's count (None: any state's) past the cap?"""
        states = [state] if state else list(self.by_state)
        return any(self.by_state[s] > TAB_COUNT_CAP for s in states)

    @property
    def total(self) -> int:
        """Every state's count summed (a lower bound when ``over_cap()``)."""
        return sum(min(n, TAB_COUNT_CAP) for n in self.by_state.values())

    def label(self, state: str | None = None) -> str:
        """What a tab shows: "1,234", or "10,000+" past the cap ("All": the sum, with "+"
        when any state is past it)."""
        n = min(self.by_state[state], TAB_COUNT_CAP) if state else self.total
        return f"{n:,}+" if self.over_cap(state) else f"{n:,}"


def board_queue_counts(
    team_ids: list[int],
    filters: QueueFilters,
    *,
    newer_than: int | None,
    endpoint_ids: list[int] | None = None,
) -> QueueCounts:
    """The state tabs' counts (todos of the teams and the endpoint filter, by state, each
    exact up to ``TAB_COUNT_CAP``; the search and "has died attempts" do not narrow them)
    and how many todos passing every filter arrived above ``newer_than`` (the newest row the
    reader has seen). One statement for the tabs (each state a bounded walk of
    todos_endpoint_state), one for the new arrivals (a walk of the ids above
    ``newer_than``; its search bounded the same way)."""
    rows = db.fetch(
        sql.COUNT_TODOS_BY_STATE_CAPPED,
        {
            "team_ids": team_ids,
            "endpoint_id": filters.endpoint_id,
            "states": list(TodoState.values),
            "cap": TAB_COUNT_CAP,
        },
    )
    newer = 0
    if newer_than is not None:
        newer = (
            Todo.objects.filter(_in_teams(team_ids, endpoint_ids), pk__gt=newer_than)
            .filter(_filter_q(filters, ids=(newer_than + 1, None)))
            .count()
        )
    return QueueCounts(by_state=dict(rows), newer=newer)


_QUEUE_FIELDS = (
    "id",
    "title",
    "state",
    "priority",
    "attempt",
    "failures",
    "max_attempts",
    "round",
    "owner",
    "lease_expires_at",
    "next_retry_at",
    "not_before",
    "dead_letter_reason",
    "updated_at",
    "last_attempt_seq",
)


def board_todo(user, todo_id) -> TodoDetail:
    """The drawer: a todo of any of the user's teams (whatever the team switcher shows),
    with every attempt row kept (the history cap bounds them). The todo and its attempts
    are read in one REPEATABLE READ, read-only snapshot, so the header, the strip and the
    actions offered all describe the same instant (under READ COMMITTED a claim committed
    between the two reads showed a pending todo with an open try). Three statements: the
    snapshot's SET, the todo, its attempts; inside a caller's transaction (tests) the
    caller's own rules hold and the SET is left out."""
    limit = max(settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO, ATTEMPTS_MAX)
    if connection.in_atomic_block:
        return db.run(_drawer_detail(user, todo_id, limit))
    with transaction.atomic():
        db.fetch(sql.BEGIN_DRAWER_SNAPSHOT, {})
        return db.run(_drawer_detail(user, todo_id, limit))


# The audit kinds the drawer shows among the tries: what people (and requesters) did to it.
PEOPLE_KINDS = [
    EventKind.CLAIM,
    EventKind.RELEASE,
    EventKind.COMPLETE,
    EventKind.FAIL,
    EventKind.CANCEL,
    EventKind.RETRY_NOW,
    EventKind.RERUN,
    EventKind.TAKE_OVER,
]
PEOPLE_MAX = 500  # the newest this many (a todo reran by hand hundreds of times)


def _drawer_detail(user, todo_id, limit: int) -> Plan[TodoDetail]:
    """The drawer's snapshot: the todo, its attempts and the people's actions on it (one
    statement more than get_todo's)."""
    detail = yield from _detail_for_user(user, todo_id, limit)
    rows = yield Fetch(
        sql.SELECT_TODO_PEOPLE,
        {"todo_id": detail.todo.id, "kinds": [k.value for k in PEOPLE_KINDS], "limit": PEOPLE_MAX},
    )
    events = [EventRecord.from_row(row) for row in reversed(rows)]
    return replace(detail, events=events)


@dataclass(frozen=True, slots=True)
class Activity:
    """One line of the Activity feed: an attempt that ended, or something a person (or a
    requester) did. ``attempt`` or ``event`` is set."""

    at: datetime
    todo_id: int | None
    title: str
    agent_id: str
    attempt: ActivityEnding | None = None
    event: ActivityEvent | None = None


@dataclass(frozen=True, slots=True)
class ActivityFilters:
    """Activity narrowed to one todo, one endpoint's queue (and the endpoint's own team-level
    events: vend, rotate, revoke, notify URL), or one person (what they did, and how the tries
    they held by hand ended). Ids the caller took from the teams' own lists."""

    todo_id: int | None = None
    endpoint: Endpoint | None = None
    person_id: int | None = None

    @property
    def active(self) -> bool:
        return bool(self.todo_id or self.endpoint or self.person_id)


def board_activity(
    team_ids: list[int],
    *,
    before: datetime | None = None,
    limit: int = 50,
    filters: ActivityFilters | None = None,
) -> list[Activity]:
    """Recent attempt endings and audited actions across the teams' queues, newest first.
    Two statements (queues/sql/activity.py), each walking an index newest first (the
    events' team by team), merged here."""
    if not team_ids:
        return []
    filters = filters or ActivityFilters()
    endpoint = filters.endpoint
    params = {
        "team_ids": team_ids,
        "before": before,
        "todo_id": filters.todo_id,
        "endpoint_id": endpoint.pk if endpoint else None,
        "endpoint_team": endpoint.team_id if endpoint else None,
        "endpoint_agent": endpoint.agent_id if endpoint else None,
        "person_id": filters.person_id,
        "limit": limit,
    }
    endings = db.fetch(sql.ACTIVITY_ENDINGS, params)
    events = db.fetch(sql.ACTIVITY_EVENTS, params)
    items = [
        Activity(at=e.ended_at, todo_id=e.todo_id, title=title, agent_id=agent, attempt=e)
        for e, title, agent in map(ActivityEnding.from_row, endings)
    ] + [
        Activity(at=e.created_at, todo_id=e.todo_id, title=title, agent_id=agent, event=e)
        for e, title, agent in map(ActivityEvent.from_row, events)
    ]
    items.sort(key=lambda item: item.at, reverse=True)
    return items[:limit]


# ---------------------------------------------------------------------------------------
# The Board's other reads: endpoints, teams and their sinks, scoped by the team ids the
# caller took from the user's own memberships.


def board_endpoint(team_ids: list[int], endpoint_id: int) -> Endpoint | None:
    """An endpoint of one of these teams, or None (unknown and foreign alike)."""
    return (
        Endpoint.objects.filter(pk=endpoint_id, team_id__in=team_ids)
        .select_related("team", "paused_by")
        .first()
    )


def board_endpoint_choices(team_ids: list[int]) -> list[Endpoint]:
    """The queue page's endpoint filter: id, agent id, team name, whether revoked or paused."""
    return list(
        Endpoint.objects.filter(team_id__in=team_ids)
        .select_related("team")
        .only("id", "agent_id", "revoked_at", "paused_at", "team__name")
        .order_by("agent_id")
    )


def board_endpoint_list(team_ids: list[int]):
    """The endpoints page: each endpoint with its live todo counts and last activity, in one
    GROUP BY query for the whole list (not a query per row); active ones first."""
    live = Q(todos__state__in=LIVE_STATES)
    return (
        Endpoint.objects.filter(team_id__in=team_ids)
        .select_related("team")
        .defer("token_hash")
        .annotate(
            last_activity=Max("todos__updated_at"),
            live=Count("todos", filter=live),
            pending=Count("todos", filter=Q(todos__state=TodoState.PENDING)),
            claimed=Count("todos", filter=Q(todos__state=TodoState.CLAIMED)),
            retry_wait=Count("todos", filter=Q(todos__state=TodoState.RETRY_WAIT)),
        )
        .order_by(F("revoked_at").asc(nulls_first=True), "team__name", "agent_id")
    )


def endpoint_todo_counts(endpoint: Endpoint) -> dict[str, int]:
    """Todos of one endpoint, by state (one GROUP BY)."""
    return dict(
        Todo.objects.filter(endpoint=endpoint)
        .values("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )


def endpoint_live_todos(endpoint: Endpoint) -> int:
    return Todo.objects.filter(endpoint=endpoint, state__in=LIVE_STATES).count()


def endpoint_newest_doorbell(endpoint: Endpoint) -> Delivery | None:
    return (
        Delivery.objects.filter(endpoint=endpoint, kind=Delivery.Kind.DOORBELL)
        .order_by("-id")
        .first()
    )


def board_people(team_ids: list[int]) -> list[tuple[int, str]]:
    """(user id, username) of every member of these teams, by name: Activity's person
    filter. One query."""
    rows = (
        Membership.objects.filter(team_id__in=team_ids)
        .values_list("user_id", "user__username")
        .distinct()
        .order_by("user__username")
    )
    return list(rows)


def is_team_owner(user, team_id: int) -> bool:
    return Membership.objects.filter(
        user=user, team_id=team_id, role=Membership.Role.OWNER
    ).exists()


def team_members(team: Team) -> list[Membership]:
    """A team's members, owners first, then by username."""
    rows = Membership.objects.filter(team=team).select_related("user")
    return sorted(
        rows, key=lambda m: (m.role != Membership.Role.OWNER, m.user.get_username().lower())
    )


def team_sink(team: Team, sink_id: int) -> DeadLetterSink | None:
    """One of this team's sinks, or None (another team's sink id reads as unknown)."""
    return DeadLetterSink.objects.filter(pk=sink_id, team=team).first()


def team_sinks(team: Team) -> list[DeadLetterSink]:
    """The team's sinks, each with its newest delivery (``last_delivery``, a JSON object) and
    how many wait to be sent, in one query (correlated subqueries on the outbox's sink index),
    active ones first. Never the secret."""
    deliveries = Delivery.objects.filter(sink=OuterRef("pk"))
    newest = deliveries.order_by("-id").values(
        last=JSONObject(
            status="last_status",
            error="last_error",
            attempts="attempts",
            created_at="created_at",
            delivered_at="delivered_at",
            gave_up_at="gave_up_at",
        )
    )[:1]
    waiting = (
        deliveries.filter(delivered_at__isnull=True, gave_up_at__isnull=True)
        .values("sink")
        .annotate(n=Count("id"))
        .values("n")
    )
    return list(
        DeadLetterSink.objects.filter(team=team)
        .defer("secret")
        .annotate(
            last_delivery=Subquery(newest),
            waiting=Coalesce(Subquery(waiting, output_field=IntegerField()), 0),
        )
        .order_by("-active", "-created_at", "-id")
    )
