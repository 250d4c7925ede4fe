"""The Board's search: the words of a search as a tsquery (bounded: SEARCH_LEXEMES_MAX), its
time bound and per-person slots, and the two ways of testing todos against it (the GIN
indexes over a range of ids, or row by row).

A todo is found by the words of three documents, each written once, where its text is
written, and never again:

- its title and body: ``todo_search_documents``, by a trigger when the todo is made
  (``todo_search_document_on_insert``);
- each try's summary: ``todo_attempts.summary_document``, by the close that writes the
  summary, held to it by the row's CHECK (``todo_attempts_valid``);
- each try's result (the JSON an agent or a person gave ``complete`` or ``fail``):
  ``todo_attempts.result_document``, its strings, numbers and keys, by a trigger on the
  attempt row as the close writes the result (``todo_attempt_result_words``; migration 0028
  gave the results already written their words). The column is the database's alone (the
  model does not name it), so it is read here in SQL.

The functions and triggers are in queues/schema/functions.sql.

A result is a try's, like a summary: a todo is found by what any of its kept tries reported,
the result of record (a done todo's) included, since it is its completing try's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db import OperationalError, transaction
from django.db.models import (
    BooleanField,
    Q,
    QuerySet,
)
from django.db.models.expressions import RawSQL

from switchboard.queues import db, sql
from switchboard.queues.db.plans import Statement
from switchboard.queues.models import (
    SUMMARY_SEARCHABLE,
    Todo,
    TodoAttempt,
    TodoSearchDocument,
)

SEARCH_WORDS_MAX = 16
# At most this many lexemes in all: PostgreSQL's parser makes a hyphenated word one lexeme
# for the whole and one per part ("a-b-c" is four), each a prefix that the GIN indexes look
# up on their own, so a 199-character "a-b-c-..." was 101 one-letter prefixes, each a look-up
# of every word that starts with its letter (docs/benchmarks.md, "The second hardening round").
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


def text_q(text: str, *, ids: tuple[int | None, int | None] = (None, None)) -> Q:
    """The queue's text filter: the words, in any order, in a todo's title or body or in any
    of its attempts' summaries or results (full-text search on the GIN indexes of migrations
    0018, 0020 and 0028); "#123" or "123" also finds todo 123. The matching ids are one UNION of index scans,
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
        results = Q(RawSQL(_RESULT_WORDS, [raw], output_field=BooleanField()))
        arms.append(TodoAttempt.objects.filter(results, bounds).values("todo_id"))
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


# A try's result words match (the partial GIN index todo_attempts_result_search). Why raw
# SQL: the column is not the model's (migration 0028). Unqualified: Django aliases the table
# in a subquery, and only todo_attempts has the column.
_RESULT_WORDS = (
    "result_document IS NOT NULL AND result_document @@ to_tsquery('simple'::regconfig, %s)"
)

# The walk's test of one todo, ``todos`` being the queue's own row. Why raw SQL: each probe
# must be a scalar subquery with LIMIT 1, which PostgreSQL runs per row as written (an EXISTS
# it may turn into a hashed subplan, a sequential scan of every attempt's words, when it
# expects many rows to test), and the ORM took longer to build and compile the two than this
# one condition (docs/benchmarks.md, "Issue 15 again"). ts_match_vq is ``@@`` in a form no
# index answers.
_WALK_TEST = """(
    COALESCE((SELECT ts_match_vq(d.document, to_tsquery('simple'::regconfig, %s))
                FROM todo_search_documents d WHERE d.todo_id = "todos"."id" LIMIT 1), false)
 OR COALESCE((SELECT true FROM todo_attempts a
               WHERE a.todo_id = "todos"."id"
                 AND ((a.summary > ''
                       AND ts_match_vq(a.summary_document, to_tsquery('simple'::regconfig, %s)))
                      OR ts_match_vq(a.result_document, to_tsquery('simple'::regconfig, %s)))
               LIMIT 1), false))"""


def walked_text_q(text: str) -> Q:
    """The same test as ``text_q``, asked of each todo in turn: its title and body's words
    (one probe of todo_search_documents by todo id), then its attempts' stored summary and
    result words (one probe of todo_attempts_todo_seq reads both), or its id for "#123". For a few hundred todos, a
    few ms however common the words are; the GIN indexes' cost grows with how many rows
    hold the words (``board_queue`` uses both). For a queryset of ``todos`` itself (its
    table unaliased), not inside another query."""
    raw = search_tsquery(text)
    if raw is None:
        condition = Q(title__ilike_contains=text)
    else:
        condition = Q(RawSQL(_WALK_TEST, [raw, raw, raw], output_field=BooleanField()))
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
# (``walked_text_q``): a common word fills the page there in a few ms, where reading its GIN
# posting list took 40 (70,000 attempts for one word over 1,000,000).


# ---------------------------------------------------------------------------------------
# Why a todo matched: where the words are (its title, its body, both together, a try's
# summary, a try's result) and a short stretch of that text around them, for each todo of a
# searched page (at most a page). The marks are control characters (START, STOP) that no
# stored text keeps (translate() drops any from the text first), so the Board escapes the
# text and only then turns them into <mark>: the highlight can never carry markup.

START, STOP = "\x02", "\x03"


@dataclass(frozen=True, slots=True)
class Snippet:
    part: str  # "title", "body", "title and body", "summary", "result"
    attempt: int | None  # the try's number in its round, for a summary or a result
    round: int | None
    text: str  # the stretch, START and STOP around each matching word

    @property
    def where(self) -> str:
        """ "in the title", "in try 2's summary" (round 3's, when not the first)."""
        if self.attempt is None:
            return f"in the {self.part}"
        of_round = f" (round {self.round})" if self.round and self.round > 1 else ""
        return f"in try {self.attempt}'s {self.part}{of_round}"


# Why raw SQL: ts_headline and per-todo LATERAL probes, each its own LIMIT 1 by index
# (todo_attempts_todo_seq for a try's words, newest try first), which the ORM cannot say.
# The title, then the body, then both together (a search's words may be split between
# them), then the newest try whose summary, then whose result, has the words.
_HEADLINE = (
    f"'StartSel={START}, StopSel={STOP}, MaxWords=16, MinWords=5, ShortWord=2, "
    'MaxFragments=2, FragmentDelimiter=" … "\''
)
SEARCH_SNIPPETS = Statement(
    "search_snippets",
    f"""
WITH q AS (SELECT to_tsquery('simple'::regconfig, %(query)s) AS q)
SELECT t.id, m.part, m.attempt, m.round,
       ts_headline('simple'::regconfig, translate(m.text, E'\\x02\\x03', ''), q.q, {_HEADLINE})
  FROM unnest(%(ids)s::bigint[]) AS t(id)
 CROSS JOIN q
 CROSS JOIN LATERAL (
       SELECT * FROM (
           SELECT 1 AS rank, 'title' AS part, NULL::int AS attempt, NULL::int AS round,
                  td.title AS text
             FROM todos td WHERE td.id = t.id AND to_tsvector('simple'::regconfig, td.title) @@ q.q
           UNION ALL
           SELECT 2, 'body', NULL, NULL, td.body
             FROM todos td
            WHERE td.id = t.id AND td.body > ''
              AND to_tsvector('simple'::regconfig, td.body) @@ q.q
           UNION ALL
           SELECT 3, 'title and body', NULL, NULL, td.title || ' — ' || td.body
             FROM todos td JOIN todo_search_documents d ON d.todo_id = td.id
            WHERE td.id = t.id AND d.document @@ q.q
           UNION ALL
           (SELECT 4, 'summary', a.attempt, a.round, a.summary
              FROM todo_attempts a
             WHERE a.todo_id = t.id AND a.summary > '' AND a.summary_document @@ q.q
             ORDER BY a.seq DESC LIMIT 1)
           UNION ALL
           (SELECT 5, 'result', a.attempt, a.round, a.result::text
              FROM todo_attempts a
             WHERE a.todo_id = t.id AND a.result_document IS NOT NULL
               AND a.result_document @@ q.q
             ORDER BY a.seq DESC LIMIT 1)
       ) found ORDER BY rank LIMIT 1) m
""",
    why="ts_headline over the first of five LATERAL probes per todo",
)


def search_snippets(text: str, ids: list[int]) -> dict[int, Snippet]:
    """Where each of these todos (a searched page's) matched the search, and the text
    around it; a todo found only by its id ("#123") has none. One statement."""
    raw = search_tsquery(text) if ids else None
    if raw is None:
        return {}
    rows = db.fetch(SEARCH_SNIPPETS, {"query": raw, "ids": ids})
    return {
        todo_id: Snippet(part=part, attempt=attempt, round=round_no, text=headline)
        for todo_id, part, attempt, round_no, headline in rows
    }
