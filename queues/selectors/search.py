"""The Board's search: the words of a search as a tsquery (bounded: SEARCH_LEXEMES_MAX), its
time bound and per-person slots, and the two ways of testing todos against it (the GIN
indexes over a range of ids, or row by row).

A todo is found by the words of three documents, each written once, where its text is
written, and never again:

- its title and body: ``todo_search_documents``, by a trigger when the todo is made
  (migration 0018);
- each try's summary: ``todo_attempts.summary_document``, by the close that writes the
  summary, held to it by the row's CHECK (migrations 0020, 0022);
- each try's result (the JSON an agent or a person gave ``complete`` or ``fail``):
  ``todo_attempts.result_document``, its strings, numbers and keys, by a trigger on the
  attempt row as the close writes the result (migration 0028, which also gave the results
  already written their words). The column is the database's alone (the model does not
  name it), so it is read here in SQL.

A result is a try's, like a summary: a todo is found by what any of its kept tries reported,
the result of record (a done todo's) included, since it is its completing try's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

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

from queues import db, sql
from queues.models import (
    SUMMARY_SEARCHABLE,
    Todo,
    TodoAttempt,
    TodoSearchDocument,
)

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
# it may turn into a hashed subplan, a sequential scan of every attempt's words, 500 ms over
# 1,000,000, when it expects many rows to test), and the ORM took 2.5 ms of each search to
# build and compile the two. ts_match_vq is ``@@`` in a form no index answers.
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
