"""Plans: what a transition asks of the database, with no connection in sight.

- A **Statement** is one named, parameterised SQL statement of ``queues/sql/``.
- A **plan** is a generator: it yields ``Fetch(statement, params)`` for each statement it
  needs (receiving the rows) and ``Atomic(plan)`` for a part that must be one transaction
  (receiving its result), and returns its result. It never touches a connection itself, so the
  same plan, with all its rules, runs on either executor (``queues.db.executor``).

Nothing of the project is imported here: the SQL catalogue, the executors and the breaker all
build on this module, and it on none of them.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Statement:
    """One named SQL statement. ``why`` says what the ORM could not say (or cost) here.

    ``text`` is written with psycopg's named placeholders (``%(name)s``). Derived from it once,
    when the statement is made: ``native``, the same text with PostgreSQL's own placeholders
    (``$1``, ``$2`` ...; a name used twice is one placeholder), ``names``, the parameter each
    stands for, and ``writes``. The executors run ``native`` on psycopg's ``RawCursor`` with
    the parameters as a tuple (``bind``), so psycopg never parses the text again: it caches
    that parse only for statements under 4 KB, and the claim statements are longer
    (docs/benchmarks.md, "ADR-0039's bar", what issue 13 changed)."""

    name: str
    text: str = field(repr=False)
    why: str = field(repr=False)
    # Server-side prepared (planned once per connection): the hot statements. Rare ones are
    # not, so a connection does not keep a plan for every statement it ever ran.
    prepare: bool = False
    native: str = field(init=False, repr=False, compare=False)
    names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    # Does it insert, update or delete (in a CTE, say)? ``SELECT … FOR UPDATE`` does not.
    writes: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names: list[str] = []

        def placeholder(match: re.Match) -> str:
            name = match.group(1)
            if name is None:  # %% is a literal %
                return "%"
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"

        native = _PLACEHOLDER.sub(placeholder, self.text)
        if _STRAY.search(_PLACEHOLDER.sub("", self.text)):
            raise ValueError(f"{self.name}: a % that is not %(name)s or %%")
        object.__setattr__(self, "native", native)
        object.__setattr__(self, "names", tuple(names))
        object.__setattr__(self, "writes", _WRITES.search(self.text) is not None)

    def bind(self, params: Mapping[str, Any]) -> tuple:
        """The parameters in ``native``'s order."""
        return tuple([params[name] for name in self.names])


_PLACEHOLDER = re.compile(r"%(?:\((\w+)\)s|%)")
_STRAY = re.compile(r"%")
_WRITES = re.compile(
    r"\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+(\s+AS)?(\s+\w+)?\s+SET)\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Fetch:
    statement: Statement
    params: Mapping[str, Any] = field(default_factory=dict)
    # A statement the plan expects may fail and catches (a keyed claim a trigger refuses):
    # inside a transaction it runs in a savepoint of its own, so its failure leaves the
    # transaction usable; outside one (autocommit) it is the one statement, and costs nothing.
    may_fail: bool = False


@dataclass(frozen=True, slots=True)
class Atomic:
    """Run ``plan`` as one transaction (a savepoint inside another)."""

    plan: Plan[Any]


type Plan[T] = Generator[Fetch | Atomic, Any, T]


def just[T](value: T) -> Plan[T]:
    """A plan that runs nothing and returns ``value`` (for a branch that needs no SQL)."""
    return value
    yield  # a generator all the same  # noqa: B901


def one(statement: Statement, params: Mapping[str, Any] | None = None) -> Plan[list]:
    """The rows of one statement, as a plan (``rows = yield from one(...)``)."""
    return (yield Fetch(statement, params or {}))
