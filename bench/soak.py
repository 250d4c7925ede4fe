"""Soak: minutes of mixed agent load at a fixed offered rate (``make soak``, ``--soak``).

On a fresh ``switchboard_bench``: ``switchboard serve`` and ``switchboard sweep`` as
subprocesses with the shipped settings, and a driver here working like the demo agents
through ``switchboard.client`` on four endpoints (``switchboard.demo``): todos created
open-loop (Poisson at ``--rate``), agent threads that claim, work an exponential time (half
heartbeat half-way), then complete (84%), fail and retry (8%), die mid-lease (5%), release
(2%) or fail for good (1%); ``--soak-history`` done todos loaded first. A sampler records
which table autovacuum works on (every 0.5 s), ``pg_stat_user_tables`` and the sizes (every
5 s). Autovacuum is as the migrations set it (0009's fixed threshold, the profile this soak
once compared). Re-print a run: ``python -m bench.soak bench/results/soak-<stamp>.json``.
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

from bench import db
from bench.ledger import percentile
from bench.table import f, table

TABLES = ("todos", "todo_attempts")
FATES = {"complete": 84, "fail": 8, "die": 5, "release": 2, "poison": 1}
LONG_POLL_SECONDS = 1


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def add_arguments(p, ints=None) -> None:
    p.add_argument("--soak", action="store_true", help="run the soak instead of the bench")
    p.add_argument("--minutes", type=float, default=10.0, help="soak length [10]")
    p.add_argument("--rate", type=float, default=20.0, help="offered todos per second [20]")
    p.add_argument("--soak-workers", type=int, default=12, help="agent threads [12]")
    p.add_argument("--work", type=float, default=0.25, help="mean seconds of work per todo [0.25]")
    p.add_argument("--lease", type=int, default=5, help="lease seconds of every claim [5]")
    p.add_argument(
        "--soak-history", type=int, default=None, help="done todos first [200000; quick 20000]"
    )
    p.add_argument("--soak-seed", type=int, default=6, help="seed of arrivals and fates [6]")


def finish_arguments(args) -> None:
    if args.soak_history is None:
        args.soak_history = 20_000 if args.quick else 200_000


class Driver:
    """The offered load (one producer thread) and the agents (``--soak-workers`` threads);
    latencies are (seconds since start, seconds) per kind."""

    def __init__(self, base_url: str, tokens: dict[str, str], args):
        from switchboard.client import Client

        self.args, self.t0, self.lock, self.stop = (
            args,
            time.perf_counter(),
            threading.Lock(),
            threading.Event(),
        )
        self.lat: dict[str, list[tuple[float, float]]] = {}
        self.counts: dict[str, int] = {}
        self.clients = [Client(base_url, token, timeout=30) for token in tokens.values()]
        self.names = list(tokens)
        master = random.Random(args.soak_seed)
        self.threads = [
            threading.Thread(
                target=self._produce, args=(random.Random(master.getrandbits(64)),), daemon=True
            )
        ]
        for i in range(args.soak_workers):
            rng = random.Random(master.getrandbits(64))
            self.threads.append(threading.Thread(target=self._agent, args=(i, rng), daemon=True))

    def add(self, kind: str, started: float, seconds: float) -> None:
        with self.lock:
            self.lat.setdefault(kind, []).append((started - self.t0, seconds))

    def count(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def timed(self, kind: str, call, **kwargs):
        t = time.perf_counter()
        out = call(**kwargs)
        self.add(kind, t, time.perf_counter() - t)
        return out

    def start(self) -> None:
        self.t0 = time.perf_counter()
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=LONG_POLL_SECONDS + 10)

    def _produce(self, rng: random.Random) -> None:
        from switchboard.client import SwitchboardError

        due, n = time.perf_counter(), 0
        while not self.stop.is_set():
            due += rng.expovariate(self.args.rate)  # a create that falls behind is not skipped
            if (delay := due - time.perf_counter()) > 0 and self.stop.wait(delay):
                return
            n += 1
            try:
                client = self.clients[n % len(self.clients)]
                self.timed(
                    "create",
                    client.create_todo,
                    title=f"soak todo {n}",
                    body="",
                    priority=rng.choice((0, 0, 0, 10)),
                )
                self.count("created")
            except (SwitchboardError, OSError) as exc:
                self.count(f"create error {getattr(exc, 'code', type(exc).__name__)}")

    def _agent(self, index: int, rng: random.Random) -> None:
        from switchboard.client import SwitchboardError

        client, args = self.clients[index % len(self.clients)], self.args
        claiming = {
            "lease_seconds": args.lease,
            "claimant": f"soak/{self.names[index % len(self.names)]}/{index}",
        }
        while not self.stop.is_set():
            try:
                t = time.perf_counter()
                claimed = client.claim_next(**claiming)
                if claimed.get("todo") is None:
                    self.add("claim_next (empty)", t, time.perf_counter() - t)
                    # not timed: the wait is idleness, not latency
                    claimed = client.claim_next(**claiming, wait_seconds=LONG_POLL_SECONDS)
                    if claimed.get("todo") is None:
                        continue
                    self.count("claims after a long-poll")
                else:
                    self.add("claim_next", t, time.perf_counter() - t)
                ids = {"todo_id": claimed["todo"]["id"], "attempt_seq": claimed["attempt_seq"]}
                fate = rng.choices(list(FATES), list(FATES.values()))[0]
                work = min(rng.expovariate(1 / args.work), args.lease * 0.6)
                if rng.random() < 0.5:
                    self.stop.wait(work / 2)
                    self.timed("heartbeat", client.heartbeat, lease_seconds=args.lease, **ids)
                    self.stop.wait(work / 2)
                else:
                    self.stop.wait(work)
                if fate == "die":
                    self.count("died (abandoned mid-lease)")
                    continue
                if fate == "complete":
                    result = {"ok": True, "n": rng.randint(1, 999)}
                    self.timed(
                        "complete", client.complete, result=result, summary="soak: done", **ids
                    )
                elif fate in ("fail", "poison"):
                    self.timed(
                        "fail",
                        client.fail,
                        result={"exit_code": 1},
                        summary="soak: failed",
                        retryable=fate == "fail",
                        **ids,
                    )
                else:
                    self.timed("release", client.release, summary="soak: handed back", **ids)
                self.count(fate)
            except SwitchboardError as exc:
                self.count(f"error {exc.status} {exc.code}")
            except OSError as exc:
                self.count(f"error {type(exc).__name__}")
                self.stop.wait(0.5)


# --- sampling the tables ------------------------------------------------------------------

STATS = """
SELECT relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count,
       autoanalyze_count, last_autovacuum, last_autoanalyze,
       pg_relation_size(relid), pg_indexes_size(relid), pg_total_relation_size(relid)
  FROM pg_stat_user_tables WHERE relname = ANY(%s)
"""
STAT_KEYS = "live dead upd hot_upd autovacuum_count autoanalyze_count last_autovacuum last_autoanalyze heap_bytes index_bytes total_bytes".split()
INDEXES = """
SELECT t.relname, i.indexrelname, pg_relation_size(i.indexrelid)
  FROM pg_stat_user_indexes i JOIN pg_stat_user_tables t ON t.relid = i.relid
 WHERE t.relname = ANY(%s) ORDER BY 1, 2
"""
AUTOVACUUM_NOW = """
SELECT query FROM pg_stat_activity
 WHERE backend_type = 'autovacuum worker' AND datname = current_database()
"""


def snapshot(conn, *, exact: bool = False) -> dict:
    """Counters and sizes of both tables; ``exact`` adds count(*) (n_live_tup is an estimate)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    out = {}
    for row in conn.execute(STATS, (list(TABLES),)).fetchall():
        d = dict(zip(STAT_KEYS, row[1:], strict=True))
        for k in ("last_autovacuum", "last_autoanalyze"):
            d[k] = d[k].isoformat() if d[k] else None
        out[row[0]] = d
    for name, index, size in conn.execute(INDEXES, (list(TABLES),)).fetchall():
        out[name].setdefault("indexes", {})[index] = size
    for t in TABLES if exact else ():
        out[t]["rows"] = conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
    return out


class Sampler(threading.Thread):
    def __init__(self, t0: float):
        super().__init__(daemon=True, name="soak-sampler")
        self.conn, self.t0, self.stop = db.connect(), t0, threading.Event()
        self.samples: list[dict] = []
        self.busy = dict.fromkeys(TABLES, 0.0)  # seconds autovacuum was seen on the table

    def run(self) -> None:
        n = 0
        while not self.stop.wait(0.5):
            try:
                for (query,) in self.conn.execute(AUTOVACUUM_NOW).fetchall():
                    for t in TABLES:
                        if (
                            query.rstrip()
                            .removesuffix(" (to prevent wraparound)")
                            .endswith(f".{t}")
                        ):
                            self.busy[t] += 0.5
                n += 1
                if n % 10 == 0:
                    self.samples.append(
                        {"t": round(time.perf_counter() - self.t0, 1), **snapshot(self.conn)}
                    )
            except Exception as exc:  # noqa: BLE001 - a missed sample is not a failed soak
                log(f"sampler: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.stop.set()
        self.join(timeout=5)
        self.conn.close()


# --- the run ------------------------------------------------------------------------------


def _close_connections() -> None:
    """Close Django's connections and pools (a pooled one would outlive its database)."""
    from django.db import connections

    connections.close_all()
    for conn in connections.all(initialized_only=True):
        if conn.settings_dict["OPTIONS"].get("pool"):
            conn.close_pool()


def run(args, stamp: str) -> dict:
    from bench import httpbench, seed
    from queues.models import Endpoint
    from switchboard import demo

    setup = demo.prepare(team_slug="soak", roles=4)
    endpoints = Endpoint.objects.filter(team=setup.team, agent_id__in=list(setup.tokens))
    t = time.monotonic()
    if args.soak_history:
        for ep in endpoints.values_list("pk", flat=True):
            seed.add_history("ours", ep, args.soak_history // len(setup.tokens))
        # A backend reports its row counts to the statistics after the fact (at most once a
        # second); a VACUUM before that would count the load's inserts as new, and
        # autovacuum would start with an insert-triggered pass.
        _close_connections()
        time.sleep(2)
        seed.vacuum_analyze("ours")
    log(
        f"history of {args.soak_history:,} done todos loaded and vacuumed in {time.monotonic() - t:.0f}s"
    )
    _close_connections()
    with db.connect() as conn:
        reloptions = dict(
            conn.execute(
                "SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s) AND relkind = 'r'",
                (list(TABLES),),
            ).fetchall()
        )
        names = "autovacuum_naptime autovacuum_max_workers autovacuum_vacuum_cost_delay autovacuum_vacuum_cost_limit server_version"
        server = {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names.split()}
        start = snapshot(conn, exact=True)
    web = httpbench.Server(db.RESULTS / f"soak-server-{stamp}.log")
    sweep_path = db.RESULTS / f"soak-sweep-{stamp}.log"
    with open(sweep_path, "wb") as sweep_log:
        sweeper = subprocess.Popen(
            [httpbench.switchboard_command(), "sweep"],
            cwd=db.ROOT,
            env=dict(os.environ, SWITCHBOARD_DEV="1", LOG_LEVEL="INFO"),
            stdin=subprocess.DEVNULL,
            stdout=sweep_log,
            stderr=subprocess.STDOUT,
        )
        load0, started_utc = [round(x, 2) for x in os.getloadavg()], datetime.now(UTC)
        driver = Driver(web.base_url, setup.tokens, args)
        sampler = Sampler(time.perf_counter())
        log(
            f"{args.minutes:g} min at {args.rate:g} todos/s offered, {args.soak_workers} agents, server {web.base_url}"
        )
        try:
            sampler.start()
            driver.start()
            deadline = driver.t0 + args.minutes * 60
            while (left := deadline - time.perf_counter()) > 0:
                time.sleep(min(60.0, left))
                log(
                    f"{time.perf_counter() - driver.t0:.0f}s, created {driver.counts.get('created', 0):,}, completed {driver.counts.get('complete', 0):,}"
                )
            driver.finish()
            elapsed = time.perf_counter() - driver.t0
        finally:
            driver.stop.set()
            sampler.close()
            web.stop()
            sweeper.terminate()  # our own child, by its handle
            sweeper.wait(timeout=20)
    with db.connect() as conn:
        end = snapshot(conn, exact=True)
        since = (started_utc,)
        outcomes = dict(
            conn.execute(
                "SELECT coalesce(nullif(outcome, ''), 'open'), count(*) FROM todo_attempts WHERE claimed_at >= %s GROUP BY 1",
                since,
            ).fetchall()
        )
        # From the server's own clocks: a todo's creation to its first attempt's claim.
        quantiles = ", ".join(
            f"percentile_cont({q}) WITHIN GROUP (ORDER BY w)" for q in (0.5, 0.95, 0.99)
        )
        wait = conn.execute(
            f"SELECT count(*), {quantiles}, max(w) FROM (SELECT extract(epoch FROM a.claimed_at - t.created_at) * 1000 AS w"
            " FROM todos t JOIN todo_attempts a ON a.todo_id = t.id AND a.seq = 1 WHERE t.created_at >= %s) x",
            since,
        ).fetchone()
        states = dict(
            conn.execute(
                "SELECT state, count(*) FROM todos WHERE created_at >= %s GROUP BY 1", since
            ).fetchall()
        )
    sweeps = sweep_path.read_text(errors="replace").count("sweep pass")
    minutes = range(max(1, round(elapsed / 60)))
    claims, completes = driver.lat.get("claim_next", []), driver.lat.get("complete", [])
    return {
        "profile": "migrated",
        "reloptions": {k: v or [] for k, v in reloptions.items()},
        "server": server,
        **{
            k: getattr(args, k)
            for k in ("minutes", "rate", "work", "lease", "soak_history", "soak_seed")
        },
        "workers": args.soak_workers,
        "elapsed_s": round(elapsed, 1),
        "counts": driver.counts,
        "outcomes": outcomes,
        "states": states,
        "latency": {k: _lat([x for _, x in v]) for k, v in driver.lat.items()},
        "claim_p95_per_minute": [
            ms(percentile([x for t, x in claims if m * 60 <= t < m * 60 + 60], 95)) for m in minutes
        ],
        "completions_per_minute": [
            sum(1 for t, _ in completes if m * 60 <= t < m * 60 + 60) for m in minutes
        ],
        "queue_wait": dict(
            zip(
                ("n", "p50_ms", "p95_ms", "p99_ms", "max_ms"),
                [wait[0], *(None if v is None else round(float(v), 2) for v in wait[1:])],
                strict=True,
            )
        ),
        "start": start,
        "end": end,
        "peak_dead": {
            t: max((s[t]["dead"] for s in sampler.samples), default=None) for t in TABLES
        },
        "mean_dead": {
            t: round(statistics.fmean(s[t]["dead"] for s in sampler.samples))
            if sampler.samples
            else None
            for t in TABLES
        },
        "autovacuum_busy_s": sampler.busy,
        "samples": sampler.samples,
        "server_log": web.log_summary(),
        "sweep_log": str(sweep_path.relative_to(db.ROOT)),
        "sweep_passes": sweeps,
        "git": db.git_state(),
        "loadavg": [load0, [round(x, 2) for x in os.getloadavg()]],
        "started_utc": started_utc.isoformat(timespec="seconds"),
    }


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def _lat(xs: list[float]) -> dict:
    return {
        "n": len(xs),
        **{f"p{q}_ms": ms(percentile(xs, q)) for q in (50, 95, 99)},
        "max_ms": ms(max(xs, default=None)),
    }


# --- the report ---------------------------------------------------------------------------


def _mb(b) -> str:
    return "-" if b is None else f"{b / 1048576:.1f}"


def render(r: dict) -> str:
    c, o, el, sv = r["counts"], r["outcomes"], r["elapsed_s"], r["server"]
    created, n1 = c.get("created", 0), (lambda x: f(x, "{:.1f}"))
    out = [
        f"Soak [{r['profile']}]: {el / 60:.1f} min at {r['rate']:g} todos/s offered (Poisson, open loop), "
        f"{r['workers']} agents over HTTP on 4 endpoints (switchboard serve + switchboard sweep), lease "
        f"{r['lease']} s, work mean {r['work']} s;",
        f"  {r['soak_history']:,} done todos with attempts loaded first; {db.code_line(r['git'])}; PostgreSQL "
        f"{sv['server_version']}, autovacuum naptime {sv['autovacuum_naptime']}, max_workers "
        f"{sv['autovacuum_max_workers']}, cost_delay {sv['autovacuum_vacuum_cost_delay']}, cost_limit "
        f"{sv['autovacuum_vacuum_cost_limit']}",
        "  table settings: "
        + "; ".join(
            f"{t}: {', '.join(v) or 'server defaults'}" for t, v in r["reloptions"].items()
        ),
        f"  load average before/after {r['loadavg'][0]} / {r['loadavg'][1]}; started {r['started_utc']}",
        "",
        f"created {created:,} ({created / el:.1f}/s); attempts by outcome: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(o.items(), key=lambda kv: -kv[1]))
        + f"; completions {o.get('completed', 0) / el:.1f}/s (per minute {min(r['completions_per_minute'])}-"
        f"{max(r['completions_per_minute'])})",
        "  driver: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(c.items()) if k != "created")
        + "; todos created in the soak by state now: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(r["states"].items())),
        "",
    ]
    order = [
        "claim_next",
        "claim_next (empty)",
        "complete",
        "heartbeat",
        "fail",
        "release",
        "create",
    ]
    rows = [
        [k, f"{s['n']:,}", n1(s["p50_ms"]), n1(s["p95_ms"]), n1(s["p99_ms"]), n1(s["max_ms"])]
        for k in order + sorted(set(r["latency"]) - set(order))
        if (s := r["latency"].get(k))
    ]
    q = r["queue_wait"]
    rows.append(
        [
            "queue wait: created -> first claim (server clock)",
            f"{q['n']:,}",
            *(n1(q[k]) for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")),
        ]
    )
    out += table(["client-observed", "n", "p50 ms", "p95 ms", "p99 ms", "max ms"], rows)
    out += [
        "  claim_next p95 per minute (ms): " + " ".join(n1(x) for x in r["claim_p95_per_minute"]),
        "",
    ]
    rows = []
    for t in TABLES:
        a, b = r["start"][t], r["end"][t]
        upd, hot = b["upd"] - a["upd"], b["hot_upd"] - a["hot_upd"]
        rows.append(
            [
                t,
                f"{a['rows']:,}->{b['rows']:,}",
                f"{a['dead']:,}->{b['dead']:,} ({f(r['peak_dead'][t], '{:,}')}, {f(r['mean_dead'][t], '{:,}')})",
                b["autovacuum_count"] - a["autovacuum_count"],
                b["autoanalyze_count"] - a["autoanalyze_count"],
                f"{r['autovacuum_busy_s'][t]:.1f}",
                f"{100 * hot / upd:.0f}" if upd else "-",
                *(
                    f"{_mb(a[k])}->{_mb(b[k])}"
                    for k in ("heap_bytes", "index_bytes", "total_bytes")
                ),
            ]
        )
    headers = "table|rows start->end|dead start->end (peak, mean)|autovacuum n|autoanalyze n|seen vacuuming s|HOT upd %|heap MB|indexes MB|total MB"
    out += table(headers.split("|"), rows)
    for t in TABLES:
        a, b = r["start"][t].get("indexes", {}), r["end"][t].get("indexes", {})
        out.append(
            f"  {t} indexes MB start->end: "
            + ", ".join(f"{k} {_mb(a.get(k))}->{_mb(v)}" for k, v in b.items())
        )
    out.append(
        "  last autovacuum: "
        + ", ".join(f"{t} {r['end'][t]['last_autovacuum'] or 'never'}" for t in TABLES)
        + "; last autoanalyze: "
        + ", ".join(f"{t} {r['end'][t]['last_autoanalyze'] or 'never'}" for t in TABLES)
    )
    dead = " ".join(
        f"{s['t'] / 60:.1f}m:{s['todos']['dead']}/{s['todo_attempts']['dead']}"
        for s in r["samples"][:: max(1, len(r["samples"]) // 12)]
    )
    sl = r["server_log"]
    out += [
        f"  dead tuples todos/todo_attempts over time: {dead}",
        f"  server log {sl['log']}: statuses "
        + ", ".join(f"{k}: {v:,}" for k, v in sorted(sl["statuses"].items()))
        + f"; {sl['other_lines']} other lines; sweeper passes logged {r['sweep_passes']} ({r['sweep_log']})",
    ]
    return "\n".join(out)


def main(args) -> int:
    """``python -m bench.run --soak``: the report on stdout, the run in bench/results/."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    env = db.prepare_environment()
    db.setup_django()
    db.migrate()
    try:
        data = {"embedded": env["embedded"], "runs": [run(args, stamp)]}
        path = db.RESULTS / f"soak-{stamp}.json"
        path.write_text(json.dumps(data, indent=1, default=str) + "\n")
        text = render(data["runs"][0])
        (db.RESULTS / f"soak-{stamp}.txt").write_text(text + "\n")
        print(f"{text}\n\nsoak ledger: {path.relative_to(db.ROOT)}")
    finally:
        if not env["embedded"] and not args.keep_db:
            _close_connections()
            db.drop_database()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m bench.soak bench/results/soak-<stamp>.json")
    print("\n\n".join(render(r) for r in json.loads(Path(sys.argv[1]).read_text())["runs"]))
