"""The Board's pages over a large ledger (section ``board``): one big team's todos and attempts
seeded by SQL (generate_series, INSERT ... SELECT; the tables' row rules refuse any row the
ledger could not have written), another team's interleaved by id, and a small team of a dozen
todos; each page timed in this process through django.test.Client."""

from __future__ import annotations

import html
import re
import time
from dataclasses import dataclass
from pathlib import Path

from bench import db
from bench.ledger import latency
from bench.table import f, log, table

SEED = db.named(Path(__file__).with_name("board_seed.sql"))
PLAN, PLAN_FINISH = SEED["plan"], SEED["plan_finish"]
ATTEMPTS, AGGREGATE, TODOS, ATTEMPT_ROWS = (
    SEED[name] for name in ("attempts", "aggregate", "todos", "attempt_rows")
)
TITLES, COMPLETED, FAILED, RELEASED = (
    SEED[name].splitlines() for name in ("titles", "completed", "failed", "released")
)
QUEUE_TARGET_MS = 100.0  # issue 4: queue page p95 (issue 30: the overview's too)
DRAWER_TARGET_MS = 50.0  # issue 4: drawer (50 attempts) p95
WARMUPS = 5
TEAM_B_EVERY = 11  # every 11th todo id belongs to the other team: a tenth of the measured team's
DRAWER_ATTEMPTS = 50
MIN_REQUESTS = 20  # a page over its time budget still gets this many
SMALL_TEAM_TODOS = 12  # the small team's: its pages must not read the big teams' volume
# A 199-character hyphen chain: 101 one-letter prefixes to PostgreSQL, refused before any query.
HOSTILE_SEARCH = "-".join("abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(100))


OPTIONS = [  # flag, type, default, --quick's, help
    ("--board-todos", int, 100_000, 20_000, "the big team's todos"),
    ("--board-requests", int, 200, 50, "timed requests per page"),
    ("--board-budget", float, 60.0, 60.0, "seconds per page, then it stops at 20 requests"),
]


@dataclass
class Fixture:
    user_id: int
    drawer_todo: int
    endpoint_id: int  # the endpoint page's: the busiest endpoint (4 in 10 todos)
    small_user_id: int  # the owner of a team of SMALL_TEAM_TODOS beside the big ones
    counts: dict
    seconds: float


SUBJECTS = "billing auth search uploads notifications payments reports admin sdk-python sdk-js"
SUBJECTS = [*SUBJECTS.split(), "the CLI", "the mobile app"]  # the order the seed draws from
LOG_LINE = (
    "FAILED tests/queues/test_sweeper.py::test_batch_reaps_only_lapsed - AssertionError:"
    " expected 3 reaped, got 2\n"
)


def seed(args) -> Fixture:
    """Empty the ledger tables, make the teams, users and endpoints, and write the todos and
    attempts by SQL. Returns what the pages need."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from switchboard.queues import endpoints, teams
    from switchboard.queues.models import Membership

    started, ids = time.monotonic(), args.board_todos * 11 // 10  # team B: every 11th id
    db.with_cursor("TRUNCATE todos, todo_attempts, todo_events RESTART IDENTITY CASCADE")
    users = get_user_model().objects
    owner, member, other_owner = (
        users.create_user(username=name, password=None)
        for name in ("acme-owner", "acme-member", "globex-owner")
    )
    acme = teams.get_or_create_team("acme-agents", name="Acme agents")
    teams.add_member(acme, owner, role=Membership.Role.OWNER)
    teams.add_member(acme, member, role=Membership.Role.MEMBER, by=owner)
    globex = teams.get_or_create_team("globex", name="Globex")
    teams.add_member(globex, other_owner, role=Membership.Role.OWNER)
    agents = ["docs-builder", "ci-fixer", "triage-bot", "translator"]
    endpoint_ids = [endpoints.vend(acme, a, verbs="all", user=owner)[0].pk for a in agents]
    endpoint_ids.append(endpoints.vend(globex, "globex-agent", verbs="all")[0].pk)
    drawer_todo = next(i for i in range(ids - 3, 0, -1) if i % TEAM_B_EVERY)
    texts = {"titles": TITLES, "subjects": SUBJECTS, "completed": COMPLETED, "failed": FAILED}
    params = {"ids": ids, "endpoints": endpoint_ids, "agents": [*agents, "globex-agent"]}
    params |= {"member": member.pk, "other_owner": other_owner.pk, "log_line": LOG_LINE}
    for name, values in {**texts, "released": RELEASED}.items():
        params |= {name: values, f"n_{name}": len(values)}
    with connection.cursor() as cursor:

        def run(label: str, statement: str, values=None) -> None:
            t = time.monotonic()
            cursor.execute(statement, values)
            log(f"board:   {label}: {time.monotonic() - t:.1f}s")

        cursor.execute("SELECT setseed(0.4242)")
        run("plan", PLAN.format(every=TEAM_B_EVERY), params)
        cursor.execute(
            "ALTER TABLE board_plan ADD COLUMN max_attempts int, ADD COLUMN endpoint_id bigint,"
            " ADD COLUMN agent_id text, ADD COLUMN human_id int, ADD COLUMN created_at timestamptz"
        )
        # The drawer's todo: 50 tries over 3 rounds (dead, then canceled, then done).
        cursor.execute(
            "UPDATE board_plan SET state = 'done', total = %s, rounds = 3, at_cap = false,"
            " forced_ends = '{failed,canceled,completed}', ep_slot = 1 WHERE id = %s",
            (DRAWER_ATTEMPTS, drawer_todo),
        )
        run("plan counters", PLAN_FINISH, params)
        run("attempts (temp)", ATTEMPTS, params)
        run("per-todo aggregates", AGGREGATE)
        # ANALYZE before each: the rows' deferred foreign-key checks (to todos) run at commit
        # on this session's cached plans (bench/seed.py add_history).
        run("ANALYZE", "ANALYZE todos")
        run("todos", TODOS, params)
        run("ANALYZE", "ANALYZE todos")
        run("todo_attempts", ATTEMPT_ROWS)
        cursor.execute("SELECT setval(pg_get_serial_sequence('todos', 'id'), %s)", (ids,))
        cursor.execute("DROP TABLE board_plan, board_att, board_agg")
        run("VACUUM (ANALYZE)", "VACUUM (ANALYZE) todos, todo_attempts, todo_events")
    counts = _counts(acme.pk, drawer_todo)
    if counts["drawer_attempts"] != DRAWER_ATTEMPTS:
        raise RuntimeError(f"the drawer's todo has {counts['drawer_attempts']} attempts")
    fixture = Fixture(
        user_id=member.pk,
        drawer_todo=drawer_todo,
        endpoint_id=endpoint_ids[0],
        small_user_id=_small_team(users).pk,
        counts=counts,
        seconds=round(time.monotonic() - started, 1),
    )
    log(f"board: seeded {counts['team_todos']:,} todos / {counts['team_attempts']:,} attempts")
    return fixture


def _counts(team_id: int, drawer_todo: int) -> dict:
    mine = "coalesce(sum({}) FILTER (WHERE e.team_id {} %(team)s), 0)"
    columns = ", ".join(
        mine.format(x, op) for x in ("1", "t.last_attempt_seq") for op in ("=", "<>")
    )
    joined = "FROM todos t JOIN endpoints e ON e.id = t.endpoint_id"
    counts = db.with_cursor(f"SELECT {columns} {joined}", {"team": team_id})
    states = db.with_cursor(
        f"SELECT json_object_agg(state, n) FROM (SELECT t.state, count(*) n {joined}"
        " WHERE e.team_id = %s GROUP BY 1 ORDER BY 2 DESC) x",
        (team_id,),
    )[0]
    keys = ("team_todos", "other_todos", "team_attempts", "other_attempts")
    drawer = db.with_cursor("SELECT count(*) FROM todo_attempts WHERE todo_id = %s", (drawer_todo,))
    return dict(zip(keys, map(int, counts), strict=True)) | {
        "states": states,
        "drawer_attempts": drawer[0],
    }


def _small_team(users):
    """A team of SMALL_TEAM_TODOS todos, each claimed and completed through the ledger."""
    from switchboard.queues import endpoints, teams, transitions
    from switchboard.queues.models import Membership

    owner = users.create_user(username="initech-owner", password=None)
    initech = teams.get_or_create_team("initech", name="Initech")
    teams.add_member(initech, owner, role=Membership.Role.OWNER)
    agent = transitions.Actor.agent(endpoints.vend(initech, "initech-agent", verbs="all")[0])
    for i in range(SMALL_TEAM_TODOS):
        todo, _ = transitions.create_todo(agent, title=f"small chore {i}")
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id, summary="done")
    return owner


@dataclass(frozen=True)
class Page:
    name: str
    path: str
    kind: str = "queue"  # or "drawer": which target applies
    htmx_target: str | None = None  # sent as HX-Target with HX-Request: true; None: no htmx

    @property
    def target_ms(self) -> float:
        return DRAWER_TARGET_MS if self.kind == "drawer" else QUEUE_TARGET_MS

    @property
    def headers(self) -> dict:
        return {"HX-Request": "true", "HX-Target": self.htmx_target} if self.htmx_target else {}


def pages(fixture: Fixture) -> list[Page]:
    """The Board's URL contract (the older page is added once the first page names it); the
    drawer is held to its target as the htmx partial and as a whole page."""
    todo = f"/todos/{fixture.drawer_todo}/"
    return [
        Page("overview (the landing page)", "/"),
        Page("queue", "/queue/"),
        Page("queue ?state=dead", "/queue/?state=dead"),
        Page("queue ?died=1", "/queue/?died=1"),
        Page("queue ?q=docs", "/queue/?q=docs"),
        Page("search ?q=upload flaky (two words)", "/queue/?q=upload+flaky"),
        Page("search ?q=resolutionimpossible (summaries)", "/queue/?q=resolutionimpossible"),
        Page("dead letters ?state=dead&q=sandbox", "/queue/?state=dead&q=sandbox"),
        Page("triage: confirm rerun of all dead", "/triage/?do=rerun&all=1&state=dead"),
        Page("dead letters by reason (2,000 grouped)", "/queue/dead/"),
        Page("queue refresh (htmx #queue)", "/queue/", htmx_target="queue"),
        Page("drawer (htmx)", todo, "drawer", htmx_target="drawer"),
        Page("drawer ?attempt=5 (htmx)", f"{todo}?attempt=5", "drawer", htmx_target="drawer"),
        Page("drawer, whole page (no JS)", todo, "drawer"),
        Page("endpoint page (health)", f"/endpoints/{fixture.endpoint_id}/"),
        Page("search ?q=a-b-c-... (199 chars: refused)", f"/queue/?q={HOSTILE_SEARCH}"),
    ]


SMALL = [  # the small team's pages
    Page(f"small team ({SMALL_TEAM_TODOS} todos): overview", "/"),
    Page(f"small team ({SMALL_TEAM_TODOS} todos): queue", "/queue/"),
    Page(f"small team ({SMALL_TEAM_TODOS} todos): activity", "/activity/"),
]
OLDER = re.compile(r'href="(\?[^"]*\bbefore=\d+[^"]*)"')  # the queue's link to older todos


def measure(client, page: Page, requests: int, budget_s: float) -> dict:
    """Warm up, count one request's statements, then time ``requests`` requests and the time
    inside cursor.execute; a page past ``budget_s`` stops at MIN_REQUESTS or later."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(WARMUPS):
        client.get(page.path, headers=page.headers)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(page.path, headers=page.headers)
    queries = len(captured)  # now: the next request's start empties the connection's log
    in_sql: list[float] = []

    def timed(execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            in_sql[-1] += time.perf_counter() - t

    totals, deadline = [], time.monotonic() + budget_s
    with connection.execute_wrapper(timed):
        while len(totals) < requests and (
            len(totals) < MIN_REQUESTS or time.monotonic() < deadline
        ):
            in_sql.append(0.0)
            t = time.perf_counter()
            client.get(page.path, headers=page.headers).content  # noqa: B018 - the whole body
            totals.append(time.perf_counter() - t)
    older = OLDER.search(response.content.decode("utf-8", "replace"))
    return {
        "page": page.name,
        "kind": page.kind,
        "target_ms": page.target_ms,
        "status": response.status_code,
        "kib": round(len(response.content) / 1024),
        "queries": queries,
        **latency(totals),
        "sql": latency(in_sql),
        "older": "/queue/" + html.unescape(older.group(1)) if older else None,
    }


def run_section(ctx) -> dict:
    """Seed, measure every page; the section's note."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    args = ctx.args
    fixture = seed(args)
    rows: list[dict] = []
    for user_id, todo in ((fixture.user_id, pages(fixture)), (fixture.small_user_id, SMALL)):
        client = Client(HTTP_HOST="127.0.0.1", raise_request_exception=False)
        client.force_login(get_user_model().objects.get(pk=user_id))
        while todo:
            page = todo.pop(0)
            rows.append(row := measure(client, page, args.board_requests, args.board_budget))
            log(
                f"board: {page.name}: {row['status']}, {row['queries']} queries, p95 {row['p95_ms']}"
            )
            if page.name == "queue" and row["older"]:
                todo.insert(0, Page("queue, older page", row["older"]))
    note = {"requests": args.board_requests, "quick": args.quick, "rows": rows}
    return note | {"fixture": {"seed_s": fixture.seconds, **fixture.counts}}


def render(note: dict) -> str:
    fx, f1, rows = note["fixture"], (lambda x: f(x, "{:.1f}")), []
    for r in note["rows"]:
        times = [f1(r[k]) for k in ("p50_ms", "p95_ms", "max_ms")]
        sql, target = f"{f1(r['sql']['p50_ms'])}/{f1(r['sql']['p95_ms'])}", r["target_ms"]
        met = ("met" if r["p95_ms"] <= target else "NOT met") if r["status"] == 200 else "-"
        rows.append([r["page"], str(r["status"]), r["n"], r["kib"], r["queries"], *times, sql])
        rows[-1] += [f"<= {target:.0f} ms", met]
    states = ", ".join(f"{k} {v:,}" for k, v in fx["states"].items())
    headers = "page|status|n|KiB|queries|p50 ms|p95 ms|max ms|SQL p50/p95 ms|target p95|verdict"
    return "\n".join(
        [
            f"The Board in-process (django.test.Client), {note['requests']} requests per page after "
            f"{WARMUPS} warm-ups; the user's team {fx['team_todos']:,} todos / "
            f"{fx['team_attempts']:,} attempts ({states}), another team's {fx['other_todos']:,} "
            f"between them by id; seeded in {fx['seed_s']:.0f} s; {db.code_line(note['git'])}",
            "",
            *table(headers.split("|"), rows, left=2),
            f"board section took {note['duration_s']:.0f} s",
        ]
    )
