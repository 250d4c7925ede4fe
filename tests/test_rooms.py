"""The rooms stay apart (docs/architecture.md): what each app may import, where raw SQL and
state changes may live. Read from the source, so a change that crosses a wall fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("queues", "agents", "board")
# Who may import whom (the project, the rest of switchboard/, may import every room).
MAY_IMPORT = {"queues": set(), "agents": {"queues"}, "board": {"queues"}}
PACKAGE = ROOT / "switchboard"


def _folder(room: str) -> Path:
    """A room's folder: each app is a package inside switchboard/ (switchboard/queues, …)."""
    return PACKAGE / room if room in APPS else PACKAGE


def _sources(room: str) -> list[Path]:
    inside = [p for p in _folder(room).rglob("*.py") if "migrations" not in p.parts]
    if room in APPS:
        return inside
    apps = [_folder(app) for app in APPS]
    return [p for p in inside if not any(p.is_relative_to(folder) for folder in apps)]


def _room_of(module: str) -> str | None:
    """The room a module name belongs to: switchboard.queues.… is queues; the rest of
    switchboard.… the project."""
    parts = module.split(".")
    if parts[0] != "switchboard":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in APPS else "switchboard"


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
        found |= {room for name in names if (room := _room_of(name))}
    return found


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
    """Every raw statement is a named Statement in queues/sql/ (the migrations keep theirs,
    and queues/schema/ its reads of pg_catalog: SQL about the schema, not the ledger's)."""
    offenders = {
        str(path.relative_to(ROOT)): lines
        for room in (*APPS, "switchboard")
        for path in _sources(room)
        if not path.relative_to(ROOT).as_posix().startswith("switchboard/queues/schema/")
        and (lines := _literal_sql_calls(path))
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
        and "switchboard/queues/sql/" not in path.relative_to(ROOT).as_posix()
    ]
    assert offenders == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _product_modules() -> dict[str, Path]:
    return {_module_name(p): p for room in (*APPS, "switchboard") for p in _sources(room)}


def _imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """The product modules ``path`` imports, anywhere in it (a lazy import in a function
    counts: it is the same tie, only later). ``from X import Y`` is a tie to X.Y when that is
    a module, else to X; the packages Python loads on the way are not counted (a package's
    own modules import from their siblings while it loads)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                whole = f"{base}.{alias.name}"
                found.add(whole if whole in modules else base)
    return (found & modules) - {name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                part.append(other)
                if other == node:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_module_imports_one_that_imports_it_back():
    """Directly or through others, lazily or not: the driver (queues.db), the SQL catalogue
    and everything above them import downwards only."""
    modules = _product_modules()
    graph = {name: _imports_of(path, name, set(modules)) for name, path in modules.items()}
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_state_lists_in_sql_come_from_the_enums():
    """A list of states in a statement is made from the models' enums (queues/sql/fragments.py
    ``states``), never written out in the SQL by hand."""
    by_hand = re.compile(r"IN\s*\(\s*'(pending|claimed|retry_wait|done|dead|canceled)'")
    offenders = [
        str(path.relative_to(ROOT))
        for path in (PACKAGE / "queues" / "sql").glob("*.py")
        if by_hand.search(path.read_text())
    ]
    assert offenders == []


# No module of the product over this many lines (docs/architecture.md): past it, a module
# holds more than one job.
MODULE_LINES_MAX = 600


def test_no_product_module_is_over_600_lines():
    too_long = {
        str(path.relative_to(ROOT)): lines
        for room in (*APPS, "switchboard")
        for path in _sources(room)
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES_MAX
    }
    assert too_long == {}
