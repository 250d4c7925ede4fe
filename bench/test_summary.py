"""The summary table's rules (bench/summary.py): each row reads its section against its bar,
MET only when all it stands for is. No database: the notes are made here."""

from bench import cluster, fleet, summary
from bench.ledger import Ledger

TARGET = {"waiters": 2000, "p95_ms": 100.0, "wake_p95_ms": 100.0}


def _rows(**notes) -> list[dict]:
    ledger = Ledger({})
    ledger.notes.update(notes)
    return summary.rows(ledger)


def _page(name: str, p95: float, status: int = 200, kind: str = "queue") -> dict:
    target = 50.0 if kind == "drawer" else 100.0
    return {"page": name, "kind": kind, "status": status, "p95_ms": p95, "target_ms": target}


def _fleet(waiters: int, p95: float = 10.0, wake: float = 10.0, **errors) -> dict:
    lat = {"p95_ms": p95}
    return {
        "waiters": waiters,
        "with_fleet": {"list_todos": lat, "queue_page": lat},
        "wake": {"p95_ms": wake},
        "errors": errors,
    }


def test_a_board_row_is_met_only_when_every_page_of_its_kind_is():
    [row] = _rows(board={"rows": [_page("queue", 40.0), _page("queue ?q=docs", 120.0)]})
    assert row["note"] == "p95/target <= 1: NOT MET" and "(queue ?q=docs)" in row["measure"]


def test_a_page_that_did_not_answer_200_fails_its_row_however_fast_the_others():
    pages = [_page("drawer", 5.0, kind="drawer"), _page("drawer, page", 1.0, 500, kind="drawer")]
    [row] = _rows(board={"rows": pages})
    assert row["note"] == "p95/target <= 1: NOT MET; not 200: drawer, page"


def test_the_http_rows_are_each_protocol_at_the_target_clients_judged_on_both_bars():
    def cell(protocol: str, clients: int, per_s: float, p95: float) -> dict:
        lat, cpu = {"p50_ms": 1.0, "p95_ms": p95}, {"total": 4.0}
        return {
            "protocol": protocol,
            "clients": clients,
            "todos_per_s": per_s,
            "claim_next": lat,
            "complete": lat,
            "cpu_ms_per_todo": cpu,
        }

    cells = [cell("HTTP", 1, 150, 5), cell("HTTP", 4, 320, 30), cell("MCP", 4, 280, 10)]
    target = {"clients": 4, "todos_per_s": 300.0, "p95_ms": 25.0}
    notes = [r["note"] for r in _rows(http={"target": target, "cpus": 2, "cells": cells})]
    http, mcp = notes  # HTTP at 1 client is not the target's row
    assert http.startswith("throughput MET") and http.endswith("30.0 ms (< 25) NOT MET")
    assert mcp.startswith("throughput NOT MET") and mcp.endswith("10.0 ms (< 25) MET")


def test_the_mcp_rows_read_mcp_then_against_http_then_at_one_and_four_clients():
    def cell(protocol: str, clients: int, per_s: float, vs_http: float | None = None) -> dict:
        lat = {"p50_ms": 1.0, "p95_ms": 5.0}
        ratio = {"median": vs_http, "min": vs_http, "max": vs_http} if vs_http else None
        return {
            "protocol": protocol,
            "clients": clients,
            "todos_per_s": per_s,
            "claim_next": lat,
            "complete": lat,
            "cpu_ms_per_todo": {"total": 2.0},
            "vs_http": ratio,
        }

    cells = [
        cell("HTTP then", 1, 600),
        cell("HTTP then", 4, 1000),
        cell("HTTP then", 16, 1000),
        cell("MCP then", 1, 560, vs_http=0.93),
        cell("MCP then", 4, 850, vs_http=0.85),
        cell("MCP then", 16, 500, vs_http=0.5),  # 16 clients: no row
    ]
    target = {"clients": 4, "todos_per_s": 300.0, "p95_ms": 25.0}
    rows = [
        r
        for r in _rows(http={"target": target, "cpus": 2, "cells": cells})
        if r["section"] == "mcp"
    ]
    assert [(r["wk"], r["reference"], r["note"]) for r in rows] == [
        ("1", "HTTP then 600/s", "bar >= 0.90: MET"),
        ("4", "HTTP then 1000/s", "bar >= 0.90: NOT MET"),
    ]


def test_growth_is_not_met_with_a_seq_scan_whatever_the_cpu():
    def cell(history: int) -> dict:
        ours = {"cpu_ms_per_todo": 1.0}
        return {"section": "growth", "history": history, "workers": 4, "systems": {"ours": ours}}

    ledger = Ledger({})
    ledger.notes["plans"] = {"10000": {"summary": {"seq_scan_todo_attempts": True}}}
    ledger.all_cells = [cell(10_000), cell(200_000)]
    [row] = summary.rows(ledger)
    assert row["ratio"] == "1.00" and "NOT MET" in row["note"]


def test_the_peer_bars_twice_in_process_and_once_over_http():
    def cell(system: str, jobs: float) -> dict:
        vs = {"median": jobs / 500, "min": jobs / 500, "max": jobs / 500}
        return {
            "system": system,
            "workers": 1,
            "jobs_per_s": jobs,
            "claim": {"p50_ms": 1.0},
            "cpu_vs_procrastinate": 1.0,
            "vs_procrastinate": vs,
        }

    cells = [cell("procrastinate", 500), cell("ours", 900), cell("ours-http", 300)]
    notes = [r["note"] for r in _rows(peers={"jobs": 300, "cells": cells})]
    assert [n.split(";")[0] for n in notes] == ["bar >= 2.00: NOT MET", "bar >= 1.00: NOT MET"]
    cells = [cell("procrastinate", 500), cell("ours", 900), cell("ours-then", 1000)]
    rows = _rows(peers={"jobs": 300, "cells": cells})
    assert [(r["measure"].split("ours ")[1], r["note"].split(";")[0]) for r in rows] == [
        ("in-process vs Procrastinate", "bar >= 2.00: NOT MET"),
        ("in-process with then vs Procrastinate", "bar >= 2.00: MET"),
    ]
    cells = [cell("procrastinate", 500), cell("ours", 1000), cell("ours-http", 500)]
    notes = [r["note"] for r in _rows(peers={"jobs": 300, "cells": cells})]
    assert [n.split(";")[0] for n in notes] == ["bar >= 2.00: MET", "bar >= 1.00: MET"]


def test_adr_rows_read_ours_against_the_same_loop_without_history_not_against_procrastinate():
    def cell(system: str, jobs: float, vs_nohist: float | None = None) -> dict:
        ratio = {"median": vs_nohist, "min": vs_nohist, "max": vs_nohist} if vs_nohist else None
        return {
            "system": system,
            "workers": 4,
            "jobs_per_s": jobs,
            "claim": {"p50_ms": 1.0},
            "cpu_vs_procrastinate": 1.0,
            "vs_procrastinate": {"median": jobs / 500, "min": 1.0, "max": 1.0},
            "vs_nohist": ratio,
            "cpu_vs_nohist": 0.8,
        }

    cells = [
        cell("procrastinate", 500),
        cell("ours-then", 900, vs_nohist=0.89),
        cell("ours-http", 600, vs_nohist=0.95),
        cell("nohist-then", 1011),
        cell("nohist-http", 632),
    ]
    rows = _rows(peers={"jobs": 300, "cells": cells})
    # the twins have no peer row of their own: they are the adr rows' reference
    assert [r["section"] for r in rows] == ["peer", "peer", "adr", "adr"]
    adr = [(r["measure"].split(" then ")[1], r["reference"], r["note"]) for r in rows[2:]]
    assert adr == [
        (
            "in-process, with attempt history vs without",
            "no history 1011/s",
            "bar >= 0.90: NOT MET; CPU ratio 0.80",
        ),
        (
            "over the Python client (HTTP), with attempt history vs without",
            "no history 632/s",
            "bar >= 0.90: MET; CPU ratio 0.80",
        ),
    ]


def test_the_best_fleet_is_the_largest_meeting_every_bar_with_no_error():
    fleets = [_fleet(1000), _fleet(2000), _fleet(3000, unwoken=1), _fleet(4000, wake=120.0)]
    fleets += [_fleet(5000, p95=150.0), {"waiters": 6000, "failed": "RuntimeError"}]
    assert fleet.best({"target": TARGET, "fleets": fleets}) == 2000
    [row] = _rows(fleet={"fleets": fleets, "best": 2000, "target": TARGET})
    assert (row["ours"], row["note"]) == ("2,000 waiters", "fleet >= target: MET")


def _cluster(wake_p95: float = 20.0, unclaimed: int = 0, drain_errors: dict | None = None) -> dict:
    def step(claimed: int = 12, errors: dict | None = None) -> dict:
        return {
            "created": 12,
            "claimed": claimed,
            "wake": {"p95_ms": wake_p95},
            "errors": errors or {},
        }

    failover = {
        "detect_s": 1.0,
        "kill_to_200_s": 1.3,
        "acked_creates": 300,
        "acked_completions": 299,
    }
    return {
        "waiters": 600,
        "wake": step(),
        "kill": step(12 - unclaimed, {"502": 190}),  # the killed node's polls: expected
        "drain": step(errors=drain_errors),
        "failover": failover | {"missing_creates": 0, "missing_completions": 0},
    }


def test_the_cluster_row_needs_every_todo_claimed_a_quick_wake_and_a_drain_no_waiter_saw():
    assert cluster.met(_cluster()) and not cluster.met(_cluster(wake_p95=120.0))
    assert not cluster.met(_cluster(unclaimed=1))
    assert not cluster.met(_cluster(drain_errors={"IncompleteReadError": 1}))
    [wake, failover] = _rows(cluster=_cluster())
    assert wake["note"].endswith(": MET") and wake["ratio"] == "0.20"
    assert failover["note"] == "acked writes missing on the new primary 0 of 599: MET"


def test_one_acknowledged_write_missing_after_the_failover_fails_its_row():
    note = _cluster()
    note["failover"]["missing_completions"] = 1
    [_, failover] = _rows(cluster=note)
    assert failover["note"].endswith("1 of 599: NOT MET")
