"""Soak: minutes of mixed agent load at a fixed offered rate (``bench/run.py --soak``, ``make soak``).

    .venv/bin/python bench/run.py --soak                        # 10 minutes, as migrated
    .venv/bin/python bench/run.py --soak --minutes 1 --quick    # a try-out (small history)
    .venv/bin/python bench/run.py --soak --minutes 5 --autovacuum m0004,proposed
    .venv/bin/python bench/soak.py bench/results/soak-<timestamp>.json   # re-print a run

What runs, per autovacuum profile, on a fresh ``switchboard_bench`` database (bench/db.py):
``switchboard serve`` (gunicorn, the shipped settings) and ``switchboard sweep`` (the shipped
5 s interval) as subprocesses, and a driver in this process: agents over HTTP through
``switchboard.client``, on four endpoints vended the way ``switchboard demo`` vends them
(``switchboard.demo.prepare``, team ``soak``).

- **Arrivals**: open loop, Poisson at ``--rate`` todos/s (seeded), spread over the four
  endpoints' queues; a create that falls behind is not skipped, so the offered rate holds.
- **Agents**: ``--soak-workers`` threads. Each asks ``claim_next`` at once (timed: the claim
  latency of the report) and, when its queue is empty, long-polls (``wait_seconds=1``, not
  timed: that wait is idle time, not latency). A claimed todo is worked for an exponential
  time (mean ``--work`` s), with a heartbeat half-way for half of them, then meets a fate
  drawn per attempt: complete (84%), fail retryable (8%; the sweeper requeues it after the
  backoff), die mid-lease (5%: no further call; the sweeper reaps it after the lease, or the
  next claimer takes it over), release (2%), fail not retryable (1%: a dead letter).
- **History**: ``--soak-history`` done todos with closed attempts are loaded first (as the
  ledger bench does), then VACUUM (ANALYZE): a queue that has been running a while, so that
  scale-factor thresholds (a fraction of the table) mean what they mean in production.
- **Sampling** (a separate connection): every 0.5 s which tables autovacuum is working on
  (pg_stat_activity), every 5 s ``pg_stat_user_tables`` (live/dead tuples, updates, HOT
  updates, autovacuum/autoanalyze counts and times) and the sizes of ``todos`` and
  ``todo_attempts`` (heap, each index, TOAST).

Reported at the end: offered vs achieved rate, outcomes (from the attempts themselves),
client-observed latency per verb (p50/p95/p99/max) and claim p95 per minute, the wait from
create to first claim, and per table start vs end (and the peak during the run) of dead
tuples, sizes and autovacuum activity. With several ``--autovacuum`` profiles, each runs on
its own fresh database with the same seed, and a comparison table follows.

Profiles (``--autovacuum``): ``migrated`` (whatever the migrations set; the default),
``m0004`` (migration 0004's settings, written out), ``pgdefault`` (RESET: PostgreSQL's
defaults), ``proposed`` (the recommendation in docs/benchmarks.md). Applied to the bench
database only.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
TABLES = ("todos", "todo_attempts")
FATES = {"complete": 84, "fail": 8, "die": 5, "release": 2, "poison": 1}
LONG_POLL_SECONDS = 1

_RELOPTS = (
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_threshold",
    "autovacuum_analyze_scale_factor",
    "autovacuum_analyze_threshold",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_vacuum_insert_threshold",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_vacuum_cost_limit",
)
PROFILES: dict[str, list[str]] = {
    "migrated": [],
    "m0004": [f"ALTER TABLE {t} RESET ({', '.join(_RELOPTS)})" for t in TABLES]
    + [
        f"ALTER TABLE {t} SET (autovacuum_vacuum_scale_factor = 0.05, "
        "autovacuum_vacuum_threshold = 200, autovacuum_analyze_scale_factor = 0.02, "
        "autovacuum_analyze_threshold = 200)"
        for t in TABLES
    ],
    "pgdefault": [f"ALTER TABLE {t} RESET ({', '.join(_RELOPTS)})" for t in TABLES],
    "proposed": [f"ALTER TABLE {t} RESET ({', '.join(_RELOPTS)})" for t in TABLES]
    + [
        # A fixed threshold, no scale factor: the churn (dead row versions) comes at the
        # queue's rate and lands in the few hot pages of pending and claimed work, while the
        # table grows with retained history (30 days by default); a fraction of the table
        # lets dead versions pile up in proportion to history. Statistics as in 0004.
        f"ALTER TABLE {t} SET (autovacuum_vacuum_scale_factor = 0, "
        "autovacuum_vacuum_threshold = 2000, autovacuum_analyze_scale_factor = 0.02, "
        "autovacuum_analyze_threshold = 200)"
        for t in TABLES
    ],
}


def _log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- options (hooked into bench/run.py's parser) ------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("--soak", action="store_true", help="run the soak instead of the bench")
    p.add_argument("--minutes", type=float, default=None, help="soak length per profile [10]")
    p.add_argument("--rate", type=float, default=20.0, help="offered todos per second [20]")
    p.add_argument("--soak-workers", type=int, default=12, help="agent threads [12]")
    p.add_argument("--work", type=float, default=0.25, help="mean seconds of work per todo [0.25]")
    p.add_argument("--lease", type=int, default=5, help="lease seconds of every claim [5]")
    p.add_argument(
        "--soak-history",
        type=int,
        default=None,
        help="done todos (with attempts) loaded before the soak [200000; quick 20000]",
    )
    p.add_argument(
        "--autovacuum",
        default="migrated",
        help=f"comma list of autovacuum profiles, each its own run: {', '.join(PROFILES)} "
        "[migrated]",
    )
    p.add_argument("--soak-seed", type=int, default=6, help="seed of arrivals and fates [6]")


def finish_arguments(args) -> None:
    args.minutes = args.minutes if args.minutes is not None else 10.0
    args.soak_history = (
        args.soak_history if args.soak_history is not None else (20_000 if args.quick else 200_000)
    )
    args.autovacuum = [x for x in args.autovacuum.split(",") if x]
    for name in args.autovacuum:
        if name not in PROFILES:
            raise SystemExit(f"unknown --autovacuum {name!r}; known: {', '.join(PROFILES)}")


# --- latency records ----------------------------------------------------------------------


class Record:
    """Thread-safe lists of (seconds since start, latency) per kind, and counters."""

    def __init__(self, t0: float):
        self.t0 = t0
        self.lock = threading.Lock()
        self.lat: dict[str, list[tuple[float, float]]] = {}
        self.counts: dict[str, int] = {}

    def add(self, kind: str, started: float, seconds: float) -> None:
        with self.lock:
            self.lat.setdefault(kind, []).append((started - self.t0, seconds))

    def count(self, kind: str, n: int = 1) -> None:
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + n


def _timed(rec: Record, kind: str, fn, **kwargs):
    t = time.perf_counter()
    out = fn(**kwargs)
    rec.add(kind, t, time.perf_counter() - t)
    return out


# --- the driver ---------------------------------------------------------------------------


class Driver:
    def __init__(self, base_url: str, tokens: dict[str, str], args, rec: Record):
        from switchboard.client import Client

        self.args = args
        self.rec = rec
        self.stop = threading.Event()
        self.clients = [Client(base_url, token, timeout=30) for token in tokens.values()]
        self.names = list(tokens)
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        master = random.Random(self.args.soak_seed)
        self.threads.append(
            threading.Thread(
                target=self._produce, args=(random.Random(master.getrandbits(64)),), daemon=True
            )
        )
        for i in range(self.args.soak_workers):
            self.threads.append(
                threading.Thread(
                    target=self._agent,
                    args=(i, random.Random(master.getrandbits(64))),
                    daemon=True,
                    name=f"soak-agent-{i}",
                )
            )
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=LONG_POLL_SECONDS + 10)

    def _produce(self, rng: random.Random) -> None:
        from switchboard.client import SwitchboardError

        rec, rate = self.rec, self.args.rate
        due = time.perf_counter()
        n = 0
        while not self.stop.is_set():
            due += rng.expovariate(rate)
            delay = due - time.perf_counter()
            if delay > 0 and self.stop.wait(delay):
                return
            client = self.clients[n % len(self.clients)]
            n += 1
            try:
                t = time.perf_counter()
                client.create_todo(
                    title=f"soak todo {n}",
                    body="",
                    priority=rng.choice((0, 0, 0, 10)),
                )["todo"]
                rec.add("create", t, time.perf_counter() - t)
                rec.count("created")
            except (SwitchboardError, OSError) as exc:
                rec.count(f"create error {getattr(exc, 'code', type(exc).__name__)}")

    def _agent(self, index: int, rng: random.Random) -> None:
        from switchboard.client import SwitchboardError

        client = self.clients[index % len(self.clients)]
        rec, args = self.rec, self.args
        claimant = f"soak/{self.names[index % len(self.names)]}/{index}"
        fates, weights = list(FATES), list(FATES.values())
        while not self.stop.is_set():
            try:
                t = time.perf_counter()
                claimed = client.claim_next(lease_seconds=args.lease, claimant=claimant)
                spent = time.perf_counter() - t
                if claimed.get("todo") is None:
                    rec.add("claim_next (empty)", t, spent)
                    claimed = client.claim_next(
                        lease_seconds=args.lease, claimant=claimant, wait_seconds=LONG_POLL_SECONDS
                    )
                    if claimed.get("todo") is None:
                        continue
                    rec.count("claims after a long-poll")
                else:
                    rec.add("claim_next", t, spent)
                todo = claimed["todo"]
                ids = {"todo_id": todo["id"], "attempt_seq": claimed["attempt_seq"]}
                fate = rng.choices(fates, weights)[0]
                work = min(rng.expovariate(1 / args.work), args.lease * 0.6)
                beat = rng.random() < 0.5
                if beat:
                    self.stop.wait(work / 2)
                    _timed(rec, "heartbeat", client.heartbeat, lease_seconds=args.lease, **ids)
                    self.stop.wait(work / 2)
                else:
                    self.stop.wait(work)
                if fate == "die":
                    rec.count("died (abandoned mid-lease)")
                    continue
                if fate == "complete":
                    _timed(
                        rec,
                        "complete",
                        client.complete,
                        result={"ok": True, "n": rng.randint(1, 999)},
                        summary="soak: done",
                        **ids,
                    )
                elif fate in ("fail", "poison"):
                    _timed(
                        rec,
                        "fail",
                        client.fail,
                        result={"exit_code": 1},
                        summary="soak: failed",
                        retryable=fate == "fail",
                        **ids,
                    )
                else:
                    _timed(rec, "release", client.release, summary="soak: handed back", **ids)
                rec.count(fate)
            except SwitchboardError as exc:
                rec.count(f"error {exc.status} {exc.code}")
            except OSError as exc:
                rec.count(f"error {type(exc).__name__}")
                self.stop.wait(0.5)


# --- sampling the tables ------------------------------------------------------------------

STATS = """
SELECT relname, n_live_tup, n_dead_tup, n_ins_since_vacuum, n_mod_since_analyze,
       n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,
       autovacuum_count, autoanalyze_count, vacuum_count, analyze_count,
       last_autovacuum, last_autoanalyze,
       pg_relation_size(relid), pg_indexes_size(relid), pg_total_relation_size(relid)
  FROM pg_stat_user_tables WHERE relname = ANY(%s)
"""
INDEXES = """
SELECT t.relname, i.indexrelname, pg_relation_size(i.indexrelid)
  FROM pg_stat_user_indexes i JOIN pg_stat_user_tables t ON t.relid = i.relid
 WHERE t.relname = ANY(%s) ORDER BY 1, 2
"""
AUTOVACUUM_NOW = """
SELECT query FROM pg_stat_activity
 WHERE backend_type = 'autovacuum worker' AND datname = current_database()
"""
STAT_KEYS = (
    "live",
    "dead",
    "ins_since_vacuum",
    "mod_since_analyze",
    "ins",
    "upd",
    "hot_upd",
    "del",
    "autovacuum_count",
    "autoanalyze_count",
    "vacuum_count",
    "analyze_count",
    "last_autovacuum",
    "last_autoanalyze",
    "heap_bytes",
    "index_bytes",
    "total_bytes",
)


def snapshot(conn, *, exact: bool = False) -> dict:
    """Counters and sizes of both tables; ``exact`` adds count(*) (start and end only:
    n_live_tup is an estimate)."""
    out = {}
    conn.execute("SELECT pg_stat_clear_snapshot()")
    for row in conn.execute(STATS, (list(TABLES),)).fetchall():
        d = dict(zip(STAT_KEYS, row[1:], strict=True))
        for k in ("last_autovacuum", "last_autoanalyze"):
            d[k] = d[k].isoformat() if d[k] else None
        out[row[0]] = d
    for table, index, size in conn.execute(INDEXES, (list(TABLES),)).fetchall():
        out[table].setdefault("indexes", {})[index] = size
    if exact:
        for t in TABLES:
            out[t]["rows"] = conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
    return out


class Sampler(threading.Thread):
    def __init__(self, conninfo: str, t0: float):
        super().__init__(daemon=True, name="soak-sampler")
        import psycopg

        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.t0 = t0
        self.stop = threading.Event()
        self.samples: list[dict] = []
        self.busy = {t: 0.0 for t in TABLES}  # seconds autovacuum was seen on the table
        self.busy_kinds: dict[str, float] = {}
        self.tick = 0.5

    def run(self) -> None:
        n = 0
        while not self.stop.wait(self.tick):
            try:
                for (query,) in self.conn.execute(AUTOVACUUM_NOW).fetchall():
                    for t in TABLES:
                        if query.rstrip().endswith(f".{t}") or query.rstrip().endswith(
                            f".{t} (to prevent wraparound)"
                        ):
                            self.busy[t] += self.tick
                            kind = query.split(":", 1)[-1].strip().split(" public.")[0]
                            key = f"{t}: {kind}"
                            self.busy_kinds[key] = self.busy_kinds.get(key, 0.0) + self.tick
                n += 1
                if n % 10 == 0:
                    self.samples.append(
                        {"t": round(time.perf_counter() - self.t0, 1), **snapshot(self.conn)}
                    )
            except Exception as exc:  # noqa: BLE001 - a missed sample is not a failed soak
                _log(f"sampler: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.stop.set()
        self.join(timeout=5)
        self.conn.close()


# --- one run ------------------------------------------------------------------------------


def _fresh_database() -> None:
    from bench import db
    from switchboard import dburl

    _close_connections()
    db._recreate(dburl.parse(os.environ["DATABASE_URL"]), "postgres")  # noqa: SLF001
    db.migrate()


def _close_connections() -> None:
    """Close Django's connections and its connection pools (a pooled connection would
    outlive the database it pointed at)."""
    from django.db import connections

    connections.close_all()
    for conn in connections.all(initialized_only=True):
        if conn.settings_dict["OPTIONS"].get("pool"):
            conn.close_pool()


def _conninfo() -> str:
    from bench import db
    from switchboard import dburl

    settings = dburl.parse(os.environ["DATABASE_URL"])
    return db.conninfo(settings, settings["NAME"])


def _reloptions(conn) -> dict:
    return {
        name: opts or []
        for name, opts in conn.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s) AND relkind = 'r'",
            (list(TABLES),),
        ).fetchall()
    }


def _server_autovacuum(conn) -> dict:
    names = (
        "autovacuum",
        "autovacuum_naptime",
        "autovacuum_max_workers",
        "autovacuum_vacuum_cost_delay",
        "autovacuum_vacuum_cost_limit",
        "autovacuum_vacuum_scale_factor",
        "autovacuum_vacuum_threshold",
        "autovacuum_vacuum_insert_threshold",
        "autovacuum_vacuum_insert_scale_factor",
        "server_version",
    )
    return {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}


def run_profile(args, profile: str, stamp: str) -> dict:
    import psycopg
    from django.db import connection

    from bench import httpbench, seed
    from switchboard import demo

    _fresh_database()
    with connection.cursor() as cursor:
        for statement in PROFILES[profile]:
            cursor.execute(statement)
    setup = demo.prepare(team_slug="soak", roles=4)
    from queues.models import Endpoint

    endpoint_ids = list(
        Endpoint.objects.filter(team=setup.team, agent_id__in=list(setup.tokens)).values_list(
            "pk", flat=True
        )
    )
    t = time.monotonic()
    if args.soak_history:
        per = args.soak_history // len(endpoint_ids)
        for ep in endpoint_ids:
            seed.add_history("ours", ep, per)
        # A backend reports its row counts to the statistics system after the fact (at most
        # once a second); a VACUUM before that would be followed by the load's inserts
        # counted as new, and autovacuum would start with an insert-triggered pass.
        _close_connections()
        time.sleep(2)
        seed.vacuum_analyze("ours")
    _log(
        f"{profile}: history of {args.soak_history:,} done todos loaded and vacuumed in "
        f"{time.monotonic() - t:.0f}s"
    )
    _close_connections()
    conninfo = _conninfo()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        reloptions = _reloptions(conn)
        server = _server_autovacuum(conn)
        start_snap = snapshot(conn, exact=True)

    tag = f"{stamp}-{profile}"
    web = httpbench.Server(RESULTS / f"soak-server-{tag}.log")
    sweep_log = open(RESULTS / f"soak-sweep-{tag}.log", "wb")  # noqa: SIM115 - closed below
    env = dict(os.environ, SWITCHBOARD_DEV="1", LOG_LEVEL="INFO")
    sweeper = subprocess.Popen(
        [httpbench._switchboard_command(), "sweep"],  # noqa: SLF001
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=sweep_log,
        stderr=subprocess.STDOUT,
    )
    load0 = [round(x, 2) for x in os.getloadavg()]
    t0 = time.perf_counter()
    started_utc = datetime.now(UTC)
    rec = Record(t0)
    sampler = Sampler(conninfo, t0)
    driver = Driver(web.base_url, setup.tokens, args, rec)
    _log(
        f"{profile}: {args.minutes:g} min at {args.rate:g} todos/s offered, "
        f"{args.soak_workers} agents, server {web.base_url}"
    )
    try:
        sampler.start()
        driver.start()
        deadline = t0 + args.minutes * 60
        while (left := deadline - time.perf_counter()) > 0:
            time.sleep(min(60.0, left))
            done = rec.counts.get("complete", 0)
            _log(
                f"{profile}: {time.perf_counter() - t0:.0f}s, created "
                f"{rec.counts.get('created', 0):,}, completed {done:,}"
            )
        driver.finish()
        elapsed = time.perf_counter() - t0
    finally:
        driver.stop.set()
        sampler.close()
        web.stop()
        if sweeper.poll() is None:
            sweeper.terminate()  # our own child, by its handle
            try:
                sweeper.wait(timeout=20)
            except subprocess.TimeoutExpired:
                sweeper.kill()
                sweeper.wait(timeout=10)
        sweep_log.close()
    load1 = [round(x, 2) for x in os.getloadavg()]
    with psycopg.connect(conninfo, autocommit=True) as conn:
        end_snap = snapshot(conn, exact=True)
        outcomes = dict(
            conn.execute(
                "SELECT coalesce(nullif(outcome, ''), 'open'), count(*) FROM todo_attempts "
                "WHERE claimed_at >= %s GROUP BY 1",
                (started_utc,),
            ).fetchall()
        )
        # From the server's own clocks: a todo's creation to its first attempt's claim.
        wait = conn.execute(
            "SELECT count(*), "
            + ", ".join(
                f"percentile_cont({q}) WITHIN GROUP (ORDER BY w)" for q in (0.5, 0.95, 0.99)
            )
            + ", max(w) FROM (SELECT extract(epoch FROM a.claimed_at - t.created_at) * 1000 AS w"
            " FROM todos t JOIN todo_attempts a ON a.todo_id = t.id AND a.seq = 1"
            " WHERE t.created_at >= %s) x",
            (started_utc,),
        ).fetchone()
        states = dict(
            conn.execute(
                "SELECT state, count(*) FROM todos WHERE created_at >= %s GROUP BY 1",
                (started_utc,),
            ).fetchall()
        )
    from bench.run import git_state

    return {
        "profile": profile,
        "profile_sql": PROFILES[profile],
        "reloptions": reloptions,
        "server": server,
        "minutes": args.minutes,
        "elapsed_s": round(elapsed, 1),
        "rate": args.rate,
        "workers": args.soak_workers,
        "work_s": args.work,
        "lease_s": args.lease,
        "history": args.soak_history,
        "seed": args.soak_seed,
        "counts": dict(rec.counts),
        "outcomes": outcomes,
        "states": states,
        "latency": {k: _lat(v) for k, v in rec.lat.items()},
        "claim_p95_per_minute": _per_minute(rec.lat.get("claim_next", []), elapsed),
        "completions_per_minute": _per_minute_count(rec.lat.get("complete", []), elapsed),
        "queue_wait": {
            "n": wait[0],
            **{
                k: None if v is None else round(float(v), 2)
                for k, v in zip(("p50_ms", "p95_ms", "p99_ms", "max_ms"), wait[1:], strict=True)
            },
        },
        "start": start_snap,
        "end": end_snap,
        "peak_dead": {
            t: max((s[t]["dead"] for s in sampler.samples if t in s), default=None) for t in TABLES
        },
        "mean_dead": {
            t: round(statistics.fmean(s[t]["dead"] for s in sampler.samples if t in s))
            if sampler.samples
            else None
            for t in TABLES
        },
        "autovacuum_busy_s": sampler.busy,
        "autovacuum_busy_kinds": sampler.busy_kinds,
        "samples": sampler.samples,
        "server_log": web.log_summary(),
        "sweep_log": str((RESULTS / f"soak-sweep-{tag}.log").relative_to(ROOT)),
        "sweep_passes": _sweep_passes(RESULTS / f"soak-sweep-{tag}.log"),
        "git": git_state(),
        "loadavg_start": load0,
        "loadavg_end": load1,
        "started_utc": started_utc.isoformat(timespec="seconds"),
    }


def _lat(pairs: list[tuple[float, float]]) -> dict:
    from bench.ledger import percentile

    xs = [x for _, x in pairs]
    ms = lambda v: None if v is None else round(v * 1000, 2)  # noqa: E731
    return {
        "n": len(xs),
        "p50_ms": ms(percentile(xs, 50)),
        "p95_ms": ms(percentile(xs, 95)),
        "p99_ms": ms(percentile(xs, 99)),
        "max_ms": ms(max(xs)) if xs else None,
    }


def _per_minute(pairs, elapsed: float) -> list[float | None]:
    from bench.ledger import percentile

    out = []
    for m in range(max(1, int(elapsed // 60 + (1 if elapsed % 60 > 5 else 0)))):
        xs = [x for t, x in pairs if m * 60 <= t < (m + 1) * 60]
        p = percentile(xs, 95)
        out.append(None if p is None else round(p * 1000, 2))
    return out


def _per_minute_count(pairs, elapsed: float) -> list[int]:
    minutes = max(1, int(elapsed // 60 + (1 if elapsed % 60 > 5 else 0)))
    return [sum(1 for t, _ in pairs if m * 60 <= t < (m + 1) * 60) for m in range(minutes)]


def _sweep_passes(path: Path) -> int:
    try:
        return sum(
            1 for line in path.read_text(errors="replace").splitlines() if "sweep pass" in line
        )
    except OSError:
        return 0


# --- the report ---------------------------------------------------------------------------


def _mb(b) -> str:
    return "-" if b is None else f"{b / 1048576:.1f}"


def _opts(r: dict) -> str:
    return "; ".join(
        f"{t}: {', '.join(o) or 'server defaults'}" for t, o in r["reloptions"].items()
    )


def render_run(r: dict) -> str:
    from bench.ledger import _table

    c, o = r["counts"], r["outcomes"]
    created = c.get("created", 0)
    el = r["elapsed_s"]
    g = r["git"]
    sv = r["server"]
    out = [
        f"Soak [{r['profile']}]: {el / 60:.1f} min at {r['rate']:g} todos/s offered (Poisson, "
        f"open loop), {r['workers']} agents over HTTP on 4 endpoints (switchboard serve + "
        f"switchboard sweep), lease {r['lease_s']} s, work mean {r['work_s']} s;",
        f"  {r['history']:,} done todos with attempts loaded first; code {g['head'][:10]}"
        + (" + uncommitted changes in " + ", ".join(g["dirty"]) if g.get("dirty") else "")
        + f"; PostgreSQL {sv['server_version']}, autovacuum naptime {sv['autovacuum_naptime']}, "
        f"max_workers {sv['autovacuum_max_workers']}, cost_delay "
        f"{sv['autovacuum_vacuum_cost_delay']}, cost_limit {sv['autovacuum_vacuum_cost_limit']}",
        f"  table settings: {_opts(r)}",
        f"  load average before/after {r['loadavg_start']} / {r['loadavg_end']}; started "
        f"{r['started_utc']}",
        "",
        f"created {created:,} ({created / el:.1f}/s); attempts by outcome: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(o.items(), key=lambda kv: -kv[1]))
        + f"; completions {o.get('completed', 0) / el:.1f}/s (per minute "
        f"{min(r['completions_per_minute'])}-{max(r['completions_per_minute'])})",
        "  driver: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(c.items()) if k != "created")
        + "; todos created in the soak by state now: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(r["states"].items())),
        "",
    ]
    headers = ["client-observed", "n", "p50 ms", "p95 ms", "p99 ms", "max ms"]
    rows = []
    order = [
        "claim_next",
        "claim_next (empty)",
        "complete",
        "heartbeat",
        "fail",
        "release",
        "create",
    ]
    for k in order + sorted(set(r["latency"]) - set(order)):
        s = r["latency"].get(k)
        if not s:
            continue
        rows.append(
            [k, f"{s['n']:,}", _n(s["p50_ms"]), _n(s["p95_ms"]), _n(s["p99_ms"]), _n(s["max_ms"])]
        )
    q = r["queue_wait"]
    rows.append(
        [
            "queue wait: created -> first claim (server clock)",
            f"{q['n']:,}",
            _n(q["p50_ms"]),
            _n(q["p95_ms"]),
            _n(q["p99_ms"]),
            _n(q["max_ms"]),
        ]
    )
    out += _table(headers, rows, {1, 2, 3, 4, 5})
    out.append(
        "  claim_next p95 per minute (ms): " + " ".join(_n(x) for x in r["claim_p95_per_minute"])
    )
    out.append("")
    headers = [
        "table",
        "rows start->end",
        "dead start->end (peak, mean)",
        "autovacuum n",
        "autoanalyze n",
        "seen vacuuming s",
        "HOT upd %",
        "heap MB",
        "indexes MB",
        "total MB",
    ]
    rows = []
    for t in TABLES:
        a, b = r["start"][t], r["end"][t]
        upd = b["upd"] - a["upd"]
        hot = b["hot_upd"] - a["hot_upd"]
        rows.append(
            [
                t,
                f"{a['rows']:,}->{b['rows']:,}",
                f"{a['dead']:,}->{b['dead']:,} ({_i(r['peak_dead'][t])}, {_i(r['mean_dead'][t])})",
                f"{b['autovacuum_count'] - a['autovacuum_count']}",
                f"{b['autoanalyze_count'] - a['autoanalyze_count']}",
                f"{r['autovacuum_busy_s'][t]:.1f}",
                f"{100 * hot / upd:.0f}" if upd else "-",
                f"{_mb(a['heap_bytes'])}->{_mb(b['heap_bytes'])}",
                f"{_mb(a['index_bytes'])}->{_mb(b['index_bytes'])}",
                f"{_mb(a['total_bytes'])}->{_mb(b['total_bytes'])}",
            ]
        )
    out += _table(headers, rows, {1, 2, 3, 4, 5, 6, 7, 8, 9})
    for t in TABLES:
        a, b = r["start"][t].get("indexes", {}), r["end"][t].get("indexes", {})
        out.append(
            f"  {t} indexes MB start->end: "
            + ", ".join(f"{k} {_mb(a.get(k))}->{_mb(v)}" for k, v in b.items())
        )
    last = {t: r["end"][t]["last_autovacuum"] for t in TABLES}
    out.append(
        "  last autovacuum: "
        + ", ".join(f"{t} {v or 'never'}" for t, v in last.items())
        + "; last autoanalyze: "
        + ", ".join(f"{t} {r['end'][t]['last_autoanalyze'] or 'never'}" for t in TABLES)
    )
    dead = " ".join(
        f"{s['t'] / 60:.1f}m:{s['todos']['dead']}/{s['todo_attempts']['dead']}"
        for s in r["samples"][:: max(1, len(r["samples"]) // 12)]
    )
    out.append(f"  dead tuples todos/todo_attempts over time: {dead}")
    sl = r["server_log"]
    out.append(
        f"  server log {sl['log']}: statuses "
        + ", ".join(f"{k}: {v:,}" for k, v in sorted(sl["statuses"].items()))
        + f"; {sl['other_lines']} other lines; sweeper passes logged {r['sweep_passes']} "
        f"({r['sweep_log']})"
    )
    return "\n".join(out)


def _n(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def _i(x) -> str:
    return "-" if x is None else f"{x:,}"


def render_comparison(runs: list[dict]) -> str:
    from bench.ledger import _table

    headers = [
        "profile",
        "claim p50/p95/p99 ms",
        "complete p95",
        "completions/s",
        "todos dead peak/mean/end",
        "todos autovac n",
        "todos heap+idx MB growth",
        "attempts dead peak/mean/end",
        "attempts autovac n",
        "attempts heap+idx MB growth",
    ]
    rows = []
    for r in runs:
        cl = r["latency"].get("claim_next", {})
        co = r["latency"].get("complete", {})
        cells = [
            r["profile"],
            f"{_n(cl.get('p50_ms'))}/{_n(cl.get('p95_ms'))}/{_n(cl.get('p99_ms'))}",
            _n(co.get("p95_ms")),
            f"{r['outcomes'].get('completed', 0) / r['elapsed_s']:.1f}",
        ]
        for t in TABLES:
            a, b = r["start"][t], r["end"][t]
            cells += [
                f"{_i(r['peak_dead'][t])}/{_i(r['mean_dead'][t])}/{b['dead']:,}",
                str(b["autovacuum_count"] - a["autovacuum_count"]),
                f"{_mb(b['heap_bytes'] - a['heap_bytes'])}+"
                f"{_mb(b['index_bytes'] - a['index_bytes'])}",
            ]
        rows.append(cells)
    out = ["Autovacuum profiles compared (same seed, same offered load, each on a fresh database):"]
    out += _table(headers, rows, set(range(1, len(headers))))
    for r in runs:
        out.append(f"  {r['profile']}: {_opts(r)}")
    return "\n".join(out)


def render(data: dict) -> str:
    parts = [render_run(r) for r in data["runs"]]
    if len(data["runs"]) > 1:
        parts.append(render_comparison(data["runs"]))
    return "\n\n".join(parts)


def main(args) -> int:
    """``bench/run.py --soak``: one run per profile; the report on stdout."""
    from bench import db

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    env = db.prepare_environment()
    db.setup_django()
    db.migrate()
    runs = []
    try:
        for profile in args.autovacuum:
            runs.append(run_profile(args, profile, stamp))
            _log(f"{profile}: done")
    finally:
        if runs:
            data = {"embedded": env["embedded"], "runs": runs}
            path = RESULTS / f"soak-{stamp}.json"
            path.write_text(json.dumps(data, indent=1, default=str) + "\n")
            text = render(data)
            (RESULTS / f"soak-{stamp}.txt").write_text(text + "\n")
            print(text)
            print(f"\nsoak ledger: {path.relative_to(ROOT)}")
        if not env["embedded"] and not args.keep_db:
            _close_connections()
            db.drop_bench_database()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python bench/soak.py bench/results/soak-<timestamp>.json", file=sys.stderr)
        raise SystemExit(2)
    print(render(json.loads(Path(sys.argv[1]).read_text())))
