"""The rooms stay apart (docs/architecture.md): what each app may import, where raw SQL and
state changes may live. Read from the source, so a change that crosses a wall fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("queues", "agents", "board")
# Who may import whom (the project, switchboard/, may import every room).
MAY_IMPORT = {"queues": set(), "agents": {"queues"}, "board": {"queues"}}


def _sources(room: str) -> list[Path]:
    return [p for p in (ROOT / room).rglob("*.py") if "migrations" not in p.parts]


def _imported_rooms(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names}
    return found & {*APPS, "switchboard"}


@pytest.mark.parametrize("room", APPS)
def test_each_room_imports_only_what_it_may(room):
    crossings = {
        str(path.relative_to(ROOT)): sorted(_imported_rooms(path) - {room} - MAY_IMPORT[room])
        for path in _sources(room)
    }
    assert {path: rooms for path, rooms in crossings.items() if rooms} == {}


def _literal_sql_calls(path: Path) -> list[int]:
    """Lines where ``.execute(…)`` is called with SQL written in place (a string literal)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "execute"
        and node.args
        and isinstance(node.args[0], ast.Constant | ast.JoinedStr | ast.BinOp)
    ]


def test_no_sql_is_written_outside_the_sql_package():
    """Every raw statement is a named Statement in queues/sql/ (the migrations keep theirs)."""
    offenders = {
        str(path.relative_to(ROOT)): lines
        for room in (*APPS, "switchboard")
        for path in _sources(room)
        if (lines := _literal_sql_calls(path))
    }
    assert offenders == {}


def test_only_the_sql_package_writes_todos():
    """State changes are statements of queues/sql (run by queues/transitions): no other source
    updates or inserts todos, nor saves a Todo through the ORM."""
    writes = re.compile(
        r"(UPDATE|INSERT INTO)\s+todos\b|Todo\.objects\.[a-z_.()]*\b(update|create)\("
    )
    offenders = [
        str(path.relative_to(ROOT))
        for room in (*APPS, "switchboard")
        for path in _sources(room)
        if writes.search(path.read_text())
        and "queues/sql/" not in path.relative_to(ROOT).as_posix()
    ]
    assert offenders == []
