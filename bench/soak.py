"""Soak (``make soak``, ``--soak``): minutes of mixed agent load at a fixed offered rate through
``switchboard serve`` and ``switchboard sweep``, with the tables' dead tuples and sizes sampled
every 5 s. Re-print a run: ``python -m bench.soak bench/results/soak-<stamp>.json``."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from bench import db
from bench.ledger import latency, ms, percentile
from bench.table import f, log, table

TABLES = ("todos", "todo_attempts")
ENDINGS = {  # an attempt's fate: its weight, the verb that ends it, that verb's arguments
    "complete": (84, "complete", {"result": {"ok": True}, "summary": "soak: done"}),
    "fail": (8, "fail", {"summary": "soak: failed", "retryable": True}),
    "die": (5, None, {}),  # abandoned mid-lease: the sweeper or the next claim ends it
    "release": (2, "release", {"summary": "soak: handed back"}),
    "poison": (1, "fail", {"summary": "soak: failed for good", "retryable": False}),
}
OPTIONS = [  # flag, type, default, --quick's, help
    ("--minutes", float, 10.0, 10.0, "soak length"),
    ("--rate", float, 20.0, 20.0, "offered todos per second"),
    ("--soak-workers", int, 12, 12, "agent threads"),
    ("--work", float, 0.25, 0.25, "mean seconds of work per todo"),
    ("--lease", int, 5, 5, "lease seconds of every claim"),
    ("--soak-history", int, 200_000, 20_000, "done todos loaded first"),
    ("--soak-seed", int, 6, 6, "seed of arrivals and fates"),
]


class Driver:
    """The offered load (a producer thread: Poisson arrivals, a create that falls behind is
    not skipped) and the agents (threads that claim, work an exponential time, heartbeat
    half-way for half of them, and end as ENDINGS draws); latencies (since start, seconds)."""

    def __init__(self, base_url: str, tokens: dict[str, str], args):
        from switchboard.client import Client

        self.args, self.lock, self.stop, self.t0 = args, threading.Lock(), threading.Event(), 0.0
        self.lat: dict[str, list[tuple[float, float]]] = {}
        self.counts: Counter = Counter()
        self.clients = [
            (name, Client(base_url, token, timeout=30)) for name, token in tokens.items()
        ]
        master = random.Random(args.soak_seed)
        jobs = [(self._produce, ())] + [(self._agent, (i,)) for i in range(args.soak_workers)]
        self.threads = [
            threading.Thread(
                target=job, args=(*a, random.Random(master.getrandbits(64))), daemon=True
            )
            for job, a in jobs
        ]

    def timed(self, kind: str, client, verb: str, **arguments) -> dict:
        t = time.perf_counter()
        out = client.call(verb, **arguments)
        if verb == "claim_next" and out.get("todo") is None:
            kind = "claim_next (empty)"
        with self.lock:
            self.lat.setdefault(kind, []).append((t - self.t0, time.perf_counter() - t))
        return out

    def count(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] += 1

    def run(self, seconds: float) -> tuple[float, list[dict]]:
        """Run the load for ``seconds``, the tables' counters and sizes sampled every 5 s on
        a connection of its own; returns the time it ran and the samples."""
        samples = []
        with db.connect() as conn:
            self.t0 = time.perf_counter()
            for t in self.threads:
                t.start()
            while (left := self.t0 + seconds - time.perf_counter()) > 0:
                time.sleep(min(5.0, left))
                samples.append({"t": round(time.perf_counter() - self.t0, 1), **snapshot(conn)})
            self.stop.set()
            for t in self.threads:
                t.join(timeout=15)
        log(f"soak: created {self.counts['created']:,}")
        return time.perf_counter() - self.t0, samples

    def _produce(self, rng: random.Random) -> None:
        from switchboard.client import SwitchboardError

        due, n = time.perf_counter(), 0
        while not self.stop.is_set():
            due += rng.expovariate(self.args.rate)
            if (delay := due - time.perf_counter()) > 0 and self.stop.wait(delay):
                return
            n += 1
            try:
                arguments = {"title": f"soak todo {n}", "priority": rng.choice((0, 0, 0, 10))}
                self.timed(
                    "create", self.clients[n % len(self.clients)][1], "create_todo", **arguments
                )
                self.count("created")
            except (SwitchboardError, OSError) as exc:
                self.count(f"create error {getattr(exc, 'code', type(exc).__name__)}")

    def _agent(self, index: int, rng: random.Random) -> None:
        from switchboard.client import SwitchboardError

        (name, client), args = self.clients[index % len(self.clients)], self.args
        claiming = {"lease_seconds": args.lease, "claimant": f"soak/{name}/{index}"}
        fates, weights = list(ENDINGS), [w for w, _, _ in ENDINGS.values()]
        while not self.stop.is_set():
            try:
                claimed = self.timed("claim_next", client, "claim_next", **claiming)
                if claimed.get("todo") is None:  # the long-poll is idleness, not latency
                    claimed = client.claim_next(**claiming, wait_seconds=1)
                    if claimed.get("todo") is None:
                        continue
                ids = {"todo_id": claimed["todo"]["id"], "attempt_seq": claimed["attempt_seq"]}
                work, beat = (
                    min(rng.expovariate(1 / args.work), args.lease * 0.6),
                    rng.random() < 0.5,
                )
                self.stop.wait(work / 2 if beat else work)
                if beat:
                    self.timed("heartbeat", client, "heartbeat", lease_seconds=args.lease, **ids)
                    self.stop.wait(work / 2)
                fate = rng.choices(fates, weights)[0]
                if verb := ENDINGS[fate][1]:
                    self.timed(verb, client, verb, **ENDINGS[fate][2], **ids)
                self.count(fate)
            except SwitchboardError as exc:
                self.count(f"error {exc.status} {exc.code}")
            except OSError as exc:
                self.count(f"error {type(exc).__name__}")
                self.stop.wait(0.5)


STATS = """
SELECT relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count,
       autoanalyze_count, pg_relation_size(relid), pg_indexes_size(relid)
  FROM pg_stat_user_tables WHERE relname = ANY(%s)
"""
STAT_KEYS = "live dead upd hot_upd autovacuum_count autoanalyze_count heap_bytes index_bytes"


def snapshot(conn, *, exact: bool = False) -> dict:
    """Counters and sizes of both tables; ``exact`` adds count(*) (n_live_tup is an estimate)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    out = {
        row[0]: dict(zip(STAT_KEYS.split(), row[1:], strict=True))
        for row in conn.execute(STATS, (list(TABLES),)).fetchall()
    }
    for t in TABLES if exact else ():
        out[t]["rows"] = conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
    return out


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

    setup, t = demo.prepare(team_slug="soak", roles=4), time.monotonic()
    endpoints = Endpoint.objects.filter(team=setup.team, agent_id__in=list(setup.tokens))
    for ep in endpoints.values_list("pk", flat=True):
        seed.add_history("ours", ep, args.soak_history // len(setup.tokens))
    # A backend reports its row counts to the statistics after the fact (at most once a
    # second); a VACUUM before that would count the load's inserts as new.
    _close_connections()
    time.sleep(2)
    seed.analyze("ours", vacuum=True)
    log(f"soak: {args.soak_history:,} done todos loaded in {time.monotonic() - t:.0f}s")
    _close_connections()
    with db.connect() as conn:
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
        load0, started_utc = round(os.getloadavg()[0], 2), datetime.now(UTC)
        driver = Driver(web.base_url, setup.tokens, args)
        log(f"soak: {args.minutes:g} min at {args.rate:g} todos/s, {args.soak_workers} agents")
        try:
            elapsed, samples = driver.run(args.minutes * 60)
        finally:
            driver.stop.set()
            web.stop()
            sweeper.terminate()  # our own child, by its handle
            sweeper.wait(timeout=20)
    with db.connect() as conn:
        end, since = snapshot(conn, exact=True), (started_utc,)
        outcomes = "SELECT coalesce(nullif(outcome, ''), 'open'), count(*) FROM todo_attempts"
        outcomes = dict(conn.execute(outcomes + " WHERE claimed_at >= %s GROUP BY 1", since))
        # A todo's creation to its first claim, by the server's own clocks.
        wait = conn.execute(
            "SELECT extract(epoch FROM a.claimed_at - t.created_at) FROM todos t JOIN"
            " todo_attempts a ON a.todo_id = t.id AND a.seq = 1 WHERE t.created_at >= %s",
            since,
        )
        wait = [float(w) for (w,) in wait]
    minutes = [(m * 60, m * 60 + 60) for m in range(max(1, round(elapsed / 60)))]
    claims, completes = driver.lat.get("claim_next", []), driver.lat.get("complete", [])
    return {
        **{k: getattr(args, k) for k in ("minutes", "rate", "work", "lease", "soak_history")},
        "workers": args.soak_workers,
        "elapsed_s": round(elapsed, 1),
        "counts": driver.counts,
        "outcomes": outcomes,
        "latency": {k: latency([x for _, x in v], 50, 95, 99) for k, v in driver.lat.items()},
        "queue_wait": latency(wait, 50, 95, 99),
        "claim_p95_per_minute": [
            ms(percentile([x for t, x in claims if a <= t < b], 95), 2) for a, b in minutes
        ],
        "completions_per_minute": [sum(1 for t, _ in completes if a <= t < b) for a, b in minutes],
        "start": start,
        "end": end,
        "peak_dead": {t: max((s[t]["dead"] for s in samples), default=0) for t in TABLES},
        "samples": samples,
        "server_log": web.log_line(),
        "sweep_passes": sweep_path.read_text(errors="replace").count("sweep pass"),
        "git": db.git_state(),
        "load": [load0, round(os.getloadavg()[0], 2)],
        "started_utc": started_utc.isoformat(timespec="seconds"),
    }


def render(r: dict) -> str:
    c, o, el = r["counts"], r["outcomes"], r["elapsed_s"]
    created, n1, per_minute = (
        c.get("created", 0),
        (lambda x: f(x, "{:.1f}")),
        r["completions_per_minute"],
    )
    out = [
        f"Soak: {el / 60:.1f} min at {r['rate']:g} todos/s offered (Poisson), {r['workers']} "
        f"agents over HTTP on 4 endpoints, lease {r['lease']} s, work mean {r['work']} s; "
        f"{r['soak_history']:,} done todos first; {db.code_line(r['git'])}; load "
        f"{r['load'][0]} -> {r['load'][1]}; started {r['started_utc']}",
        f"created {created:,} ({created / el:.1f}/s); attempts by outcome: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(o.items(), key=lambda kv: -kv[1]))
        + f"; completions {o.get('completed', 0) / el:.1f}/s ({min(per_minute)}-{max(per_minute)} a minute)",
        "  driver: " + ", ".join(f"{k} {v:,}" for k, v in sorted(c.items()) if k != "created"),
        "",
    ]
    lat = {**r["latency"], "queue wait: created -> first claim": r["queue_wait"]}
    rows = [
        [k, f"{s['n']:,}", *(n1(s[q]) for q in ("p50_ms", "p95_ms", "p99_ms", "max_ms"))]
        for k, s in lat.items()
    ]
    out += table(["client-observed", "n", "p50 ms", "p95 ms", "p99 ms", "max ms"], rows)
    out += ["  claim_next p95 a minute (ms): " + " ".join(map(n1, r["claim_p95_per_minute"])), ""]
    rows = []
    for t in TABLES:
        a, b = r["start"][t], r["end"][t]
        mb = [f"{a[k] / 2**20:.1f}->{b[k] / 2**20:.1f}" for k in ("heap_bytes", "index_bytes")]
        rows.append(
            [
                t,
                f"{a['rows']:,}->{b['rows']:,}",
                f"{a['dead']:,}->{b['dead']:,} ({r['peak_dead'][t]:,})",
            ]
            + [b[k] - a[k] for k in ("autovacuum_count", "autoanalyze_count")]
            + mb
        )
    headers = (
        "table|rows start->end|dead start->end (peak)|autovacuum n|autoanalyze n|heap MB|indexes MB"
    )
    out += table(headers.split("|"), rows)
    out.append(f"  {r['server_log']}; sweeper passes logged {r['sweep_passes']}")
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
