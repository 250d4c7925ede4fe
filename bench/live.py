"""The Board's live stream (section ``live``; issue 30's "Speed and scale"), against one
``switchboard serve`` with one worker process (SWITCHBOARD_WEB_WORKERS=1: one hub holds every
stream, as a small deployment's one process would).

- Freshness: a signed-in Chromium on /queue/ showing N claimed todos; N completes over HTTP
  FRESH_GAP apart; from each complete's answer to its row reading "done" in the page (a
  MutationObserver's Date.now() against time.time(): one machine, one clock).
- Viewers: V raw SSE streams (one asyncio process) in two layouts, 1 team x V and V/2 teams
  x 2: the server's RSS per viewer and idle CPU, and PostgreSQL's own count of transactions
  per change (pg_stat_database) against the same changes with no viewer, and again once the
  streams closed (a stream that vanished must cost nothing).
- Alongside a fleet: W waiting claim_next long-polls (bench/fleet.py's waiter process) on the
  viewers' team; wake-up latency of todos created one at a time, with no viewer and with V.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from contextlib import ExitStack, suppress

from bench import db, fleet, httpbench
from bench.ledger import latency
from bench.table import f, f2, log, table
from bench.workers import Child

WANT = "rows,counts,ticker"  # what the queue page asks (templates/board/todo_list.html)
FRESH_GAP = 0.5  # seconds between the page's changes
CHANGE_GAP = 0.4  # seconds between counted changes: each its own update (FLUSH_GAP 0.25)
SETTLE = 12.0  # an idle backend reports its transactions after 10 s (PGSTAT_IDLE_INTERVAL)
WAKE_GAP = 0.25
# Issue 30: fresh within a second; the work per change does not grow with viewers (the
# transactions a change adds with V viewers at most GROWTH more than with 2 of the same team).
TARGET = {"fresh_p95_ms": 1000.0, "growth_per_change": 0.5}
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
# Each row's first "done", stamped when the page patches it.
OBSERVE = """() => {
  window.__done = {};
  const look = () => {
    for (const tr of document.querySelectorAll("#queue tr[data-todo]")) {
      const state = tr.querySelector(".col-state .state");
      const id = tr.getAttribute("data-todo");
      if (!(id in window.__done) && state && state.textContent.trim() === "done")
        window.__done[id] = Date.now();
    }
  };
  new MutationObserver(look).observe(document.getElementById("queue"),
    {subtree: true, childList: true, characterData: true, attributes: true});
}"""
STATUS = "#queue [data-live-status]"

OPTIONS = [  # flag, type, default, --quick's, help
    ("--live-changes", int, 40, 20, "changes per phase (freshness, per change, wake-ups)"),
    ("--live-viewers", int, 200, 50, "open Board streams"),
    ("--live-waiters", int, 2000, 500, "waiting claim_next long-polls beside the viewers"),
]


# --- the viewers: one process, asyncio, raw SSE over HTTP/1.1 ---------------------------------


async def _viewer(port: int, cookie: str, state: dict) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        state["errors"][f"connect {type(exc).__name__}"] += 1
        return
    try:
        writer.write(
            f"GET /live/?want={WANT} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Accept: text/event-stream\r\nCookie: {cookie}\r\n\r\n".encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if (status := head.split()[1].decode()) != "200":
            state["errors"][status] += 1
            return
        rest = b""
        while chunk := await reader.read(65536):  # an event is one chunk: lines stay whole
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                if line.startswith(b"event: "):
                    state["events"][line[7:].strip().decode()] += 1
        state["errors"]["ended"] += 1  # the server closed it before the bench did
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        state["errors"][type(exc).__name__] += 1
    finally:
        writer.close()


async def _viewers(conn, port: int, cookies: list[str], n: int) -> dict:
    loop, state = asyncio.get_running_loop(), {"events": Counter(), "errors": Counter()}
    tasks = []
    for i in range(n):  # viewer i signs in as cookies[i % len(cookies)]
        tasks.append(loop.create_task(_viewer(port, cookies[i % len(cookies)], state)))
        if i % 50 == 49:
            await asyncio.sleep(0.25)
    deadline = loop.time() + 120
    while state["events"]["ready"] + sum(state["errors"].values()) < n and loop.time() < deadline:
        await asyncio.sleep(0.05)
    conn.send(("open", state))
    await loop.run_in_executor(None, conn.recv)  # ("close",)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return state


def viewers_main(conn) -> None:
    """The viewers' process: (port, cookies, n) -> ("open", state) once every stream said
    ready; ("close",) -> ("closed", state); None ends it."""
    fleet.raise_open_files()
    while (message := conn.recv()) is not None:
        conn.send(("closed", asyncio.run(_viewers(conn, *message))))


# --- this process: teams, changes, the counts ------------------------------------------------


def _team(name: str, agents: int) -> tuple[str, list[str]]:
    """A user, their personal team and ``agents`` endpoints: (session cookie, tokens)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from queues import endpoints

    user = get_user_model().objects.create_user(username=name, password=None)
    team = user.teams.get()
    tokens = [endpoints.vend(team, f"{name}-{i}", verbs="all")[1] for i in range(agents)]
    client = Client()
    client.force_login(user)
    return (
        f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}",
        tokens,
    )


def _claimed(agents: list, n: int) -> list[tuple]:
    """n todos created and claimed over HTTP, round robin over the agents: (agent, ids)."""
    out = []
    for i in range(n):
        agent = agents[i % len(agents)]
        agent.create_todo(title=f"live change {i}")
        got = agent.claim_next()
        out.append((agent, {"todo_id": got["todo"]["id"], "attempt_seq": got["attempt_seq"]}))
    return out


def _xacts(pg) -> int:
    return pg.execute(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()[0]


def _watches(pg) -> int:
    return pg.execute("SELECT count(*) FROM board_watches").fetchone()[0]


def phase(pg, server, claimed: list[tuple]) -> dict:
    """The server's idle CPU over 10 s once the preparation's updates went out; then the
    completes CHANGE_GAP apart, and PostgreSQL's transactions per change once every backend
    has reported its own."""
    time.sleep(SETTLE - 10)
    pids = server.pids()
    cpu0 = db.cpu_of(pids)
    time.sleep(10)
    idle, x0 = db.cpu_delta(cpu0, db.cpu_of(pids)) / 10, _xacts(pg)
    for agent, ids in claimed:
        t = time.monotonic()
        agent.complete(**ids)
        time.sleep(max(0.0, t + CHANGE_GAP - time.monotonic()))
    time.sleep(SETTLE)
    return {
        "idle_cpu_pct": round(100 * idle, 2),
        "per_change": round((_xacts(pg) - x0) / len(claimed), 2),
    }


def layout(pg, server, viewers: Child, cookies: list[str], n: int, agents, k: int) -> dict:
    """n streams open: RSS, idle CPU and transactions per change; then closed: how soon the
    watches went, and transactions per change again."""
    rss0, t0 = fleet.rss_mib(server.pids()), time.monotonic()
    opened = viewers.ask((server.port, cookies, n))[1]
    open_s = time.monotonic() - t0
    time.sleep(2)
    rss1 = fleet.rss_mib(server.pids())
    with_viewers = phase(pg, server, _claimed(agents, k))
    state = viewers.ask(("close",))[1]
    t0 = time.monotonic()
    while (watches := _watches(pg)) and time.monotonic() - t0 < 30:
        time.sleep(0.1)
    gone_s = time.monotonic() - t0
    closed = phase(pg, server, _claimed(agents, k))
    return {
        "viewers": n,
        "teams": min(n, len(cookies)),
        "ready": opened["events"]["ready"],
        "open_s": round(open_s, 1),
        "rss_mib": [rss0, rss1, fleet.rss_mib(server.pids())],
        "rss_kib_per_viewer": round((rss1 - rss0) * 1024 / n, 1),
        "open": with_viewers,
        "closed": closed,
        "updates_per_viewer": round(state["events"]["team"] / n, 1),
        "resyncs": state["events"]["resync"],
        "watches_after_close": watches,
        "watches_gone_s": round(gone_s, 1),
        "errors": dict(state["errors"]),
    }


def freshness(server, n: int) -> dict:
    """A signed-in Chromium on /queue/ with n claimed todos; n completes FRESH_GAP apart."""
    from playwright.sync_api import TimeoutError as PageTimeout
    from playwright.sync_api import sync_playwright

    from switchboard.client import Client

    cookie, tokens = _team("live-fresh", 1)  # the ORM before Playwright's loop, never in it
    agent = Client(server.base_url, tokens[0], timeout=30)
    claimed = _claimed([agent], n)
    name, value = cookie.split("=", 1)
    answered, errors = {}, []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(base_url=server.base_url).new_page()
            page.context.add_cookies([{"name": name, "value": value, "url": server.base_url}])
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto("/queue/")
            page.wait_for_function(
                f"() => document.querySelector('{STATUS}').textContent.startsWith('Live')"
            )
            shown = page.locator("#queue tr[data-todo]").count()
            page.evaluate(OBSERVE)
            for _, ids in claimed:
                t = time.monotonic()
                agent.complete(**ids)
                answered[str(ids["todo_id"])] = time.time()
                time.sleep(max(0.0, t + FRESH_GAP - time.monotonic()))
            with suppress(PageTimeout):
                page.wait_for_function(f"() => Object.keys(window.__done).length >= {n}")
            done, status = page.evaluate("window.__done"), page.text_content(STATUS)
        finally:
            browser.close()
    seen = [done[i] / 1000 - t for i, t in answered.items() if i in done]
    return {"changes": n, "shown": shown, "fresh": latency(seen), "status": status.strip()} | {
        "unseen": n - len(seen),
        "js_errors": errors,
    }


def alongside(server, waiters: Child, viewers: Child, cookie: str, tokens, args) -> dict:
    """W long-polls parked on the team's endpoints; todos created one at a time, first with
    no viewer, then with V streams of the same team open."""
    from switchboard.client import Client, SwitchboardError

    agents, errors = [Client(server.base_url, t, timeout=60) for t in tokens], Counter()

    def wakes() -> list[tuple]:
        created = []
        for i in range(args.live_changes):
            try:
                todo = agents[i % len(agents)].create_todo(title=f"wake {i}")["todo"]
                created.append((todo["id"], time.monotonic()))
            except (SwitchboardError, OSError) as exc:
                errors[f"create {getattr(exc, 'status', type(exc).__name__)}"] += 1
            time.sleep(WAKE_GAP)
        time.sleep(1)
        return created

    t0 = time.monotonic()
    waiters.ask((server.port, tokens, args.live_waiters))  # ("parked",)
    parked_s = time.monotonic() - t0
    time.sleep(5)  # the server takes the last waiters in
    created = {0: wakes()}
    opened = viewers.ask((server.port, [cookie], args.live_viewers))[1]
    time.sleep(2)
    created[args.live_viewers] = wakes()
    state = viewers.ask(("close",))[1]
    fleet_state = waiters.ask(("stop",))[1]
    woke = dict(fleet_state["wakes"])
    errors.update({f"waiters {k}": v for k, v in fleet_state["errors"].items()})
    errors.update({f"viewers {k}": v for k, v in state["errors"].items()})
    rows = [
        {
            "viewers": v,
            "wake": latency([woke[i] - t for i, t in made if i in woke]),
            "unwoken": sum(i not in woke for i, _ in made),
        }
        for v, made in created.items()
    ]
    return {"waiters": args.live_waiters, "parked_s": round(parked_s, 1), "rows": rows} | {
        "ready": opened["events"]["ready"],
        "errors": dict(errors),
    }


def run_section(ctx) -> None:
    from switchboard.client import Client

    args, started = ctx.args, time.monotonic()
    k, v = args.live_changes, args.live_viewers
    fleet.raise_open_files()
    cookie_a, tokens_a = _team("live-a", 1 + fleet.ENDPOINTS)  # changes; then the fleet's
    teams_b = [_team(f"live-b-{i}", 1) for i in range(v // 2)]
    note: dict = {"changes": k, "viewers": v, "target": TARGET}
    with ExitStack() as stack:
        log_path = db.RESULTS / f"live-server-{ctx.stamp}.log"
        server = stack.enter_context(
            httpbench.Server(
                log_path,
                SWITCHBOARD_WEB_WORKERS="1",
                # One person's V tabs: the per-person bound (24) is not what is measured.
                SWITCHBOARD_BOARD_STREAMS_PER_USER=str(v + 10),
            )
        )
        viewers = stack.enter_context(Child(viewers_main))
        waiters = stack.enter_context(Child(fleet.waiters_main))
        note["open_files"] = waiters.recv()[1]  # ("hello", its limit)
        pg = stack.enter_context(db.connect())
        # Autovacuum's own transactions (a worker's analyze of the tables the streams' sign-ins
        # touched) would count as the changes' in pg_stat_database: off while it counts.
        pg.execute("ALTER SYSTEM SET autovacuum = off")
        pg.execute("SELECT pg_reload_conf()")
        stack.callback(pg.execute, "SELECT pg_reload_conf()")
        stack.callback(pg.execute, "ALTER SYSTEM RESET autovacuum")
        note["freshness"] = r = freshness(server, k)
        log(f"live: freshness p95 {r['fresh']['p95_ms']} ms; status {r['status']!r}")
        agents_a = [Client(server.base_url, tokens_a[0], timeout=30)]
        agents_b = [Client(server.base_url, tokens[0], timeout=30) for _, tokens in teams_b]
        cookies_b = [cookie for cookie, _ in teams_b]
        note["baseline"] = {"one team": phase(pg, server, _claimed(agents_a, k))}
        note["baseline"][f"{len(teams_b)} teams"] = phase(pg, server, _claimed(agents_b, k))
        log(f"live: no viewer: {note['baseline']}")
        note["layouts"] = []
        for label, cookies, n, agents in (
            ("1 team x 2", [cookie_a], 2, agents_a),
            (f"1 team x {v}", [cookie_a], v, agents_a),
            (f"{len(teams_b)} teams x 2", cookies_b, v, agents_b),
        ):
            note["layouts"].append(
                r := {"layout": label, **layout(pg, server, viewers, cookies, n, agents, k)}
            )
            log(f"live: {label}: {r['open']}; closed {r['closed']}; errors {r['errors'] or 0}")
        note["fleet"] = r = alongside(server, waiters, viewers, cookie_a, tokens_a[1:], args)
        log(f"live: beside {r['waiters']} waiters: {r['rows']}; errors {r['errors'] or 0}")
    note |= {"server": {**server.settings, **server.log_summary()}, "git": db.git_state()}
    note["duration_s"] = round(time.monotonic() - started, 1)
    ctx.ledger.notes["live"] = note
    (db.RESULTS / f"live-{ctx.stamp}.txt").write_text(render(note) + "\n")


def render(note: dict) -> str:
    fr, t, log_ = note["freshness"], note["target"], note["server"]
    out = [
        f"The Board's live stream on one switchboard serve (1 worker process, DB pool "
        f"{log_['db_pool']}); {db.code_line(note['git'])}",
        "",
        f"Freshness: a complete over HTTP -> its row reads 'done' in a signed-in Chromium on "
        f"/queue/ ({fr['shown']} rows shown, one complete every {FRESH_GAP} s)",
    ]
    lat = fr["fresh"]
    out += table(
        ["changes", "seen", "p50/p95/max ms", "page status", "JS errors"],
        [
            [
                fr["changes"],
                lat["n"],
                f"{f(lat['p50_ms'])}/{f(lat['p95_ms'])}/{f(lat['max_ms'])}",
                fr["status"],
                len(fr["js_errors"]),
            ]
        ],
    )
    met = lat["n"] == fr["changes"] and (lat["p95_ms"] or 1e9) <= t["fresh_p95_ms"]
    out += [f"Target p95 <= {t['fresh_p95_ms']:.0f} ms: {'MET' if met else 'NOT MET'}", ""]
    base = note["baseline"]
    out.append(
        f"Viewers: raw SSE streams (want={WANT}); {note['changes']} completes {CHANGE_GAP} s "
        f"apart per phase; PostgreSQL transactions per change (pg_stat_database), with no "
        f"viewer: one team {f2(base['one team']['per_change'])}, spread over "
        + ", ".join(f"{k} {f2(b['per_change'])}" for k, b in base.items() if k != "one team")
    )
    rows, added = [], []
    for r in note["layouts"]:
        teams = "one team" if r["teams"] == 1 else next(k for k in base if k != "one team")
        b = base[teams]
        # What the streams add: open against closed, moments apart in the same server. Not
        # against the first baseline: by then the async pool holds more connections, lent
        # in turn, so a complete's second lend finds one idle past CHECK_IDLE_SECONDS and
        # checks it (one empty transaction), streams or none.
        added.append(r["open"]["per_change"] - r["closed"]["per_change"])
        rows.append(
            [
                r["layout"],
                f"{r['ready']} ({r['open_s']:.1f} s)",
                " / ".join(f"{x:.0f}" for x in r["rss_mib"]),
                f"{r['rss_kib_per_viewer']:.1f}",
                f"{f2(b['idle_cpu_pct'])} / {f2(r['open']['idle_cpu_pct'])}",
                f"{f2(r['open']['per_change'])} / {f2(r['closed']['per_change'])}",
                f2(added[-1]),
                f"{r['updates_per_viewer']:.1f}",
                f"{r['watches_after_close']} ({r['watches_gone_s']:.1f} s)",
                ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0",
            ]
        )
    headers = "layout|ready (open s)|server RSS MiB before/open/closed|KiB/viewer|idle CPU %: none/open|xacts/change: open/closed|added/change|updates/viewer|watches after close (s)|errors"
    out += table(headers.split("|"), rows)
    out.append(
        "added/change: transactions per change with the streams open less with them closed "
        "(the same server, moments apart)"
    )
    grew = max(added) - added[0] if added else None
    met = grew is not None and grew <= t["growth_per_change"]
    out += [
        f"Target: the transactions a change adds grow by at most {t['growth_per_change']} from "
        f"2 viewers to {note['viewers']} (one team, or spread over teams): "
        f"{'MET' if met else 'NOT MET'} (grew {f2(grew)})",
        "",
    ]
    fl = note["fleet"]
    out.append(
        f"Alongside {fl['waiters']} waiting claim_next long-polls on the viewers' team (parked in "
        f"{fl['parked_s']:.0f} s): todos created one at a time, {WAKE_GAP} s apart"
    )
    out += table(
        ["viewers", "wake p50/p95/max ms", "unwoken"],
        [
            [
                r["viewers"],
                f"{f2(r['wake']['p50_ms'])}/{f2(r['wake']['p95_ms'])}/{f2(r['wake']['max_ms'])}",
                r["unwoken"],
            ]
            for r in fl["rows"]
        ],
    )
    errors = ", ".join(f"{k} {v}" for k, v in fl["errors"].items()) or "0"
    statuses = ", ".join(f"{k}: {v:,}" for k, v in sorted(log_["statuses"].items()))
    out.append(
        f"errors: {errors}; server log {log_['log']}: {statuses}; {log_['other_lines']} other lines; took {note['duration_s']:.0f} s"
    )
    return "\n".join(out)
