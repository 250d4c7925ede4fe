"""The summary table's rules (bench/summary.py): each row reads its section against its bar,
MET only when all it stands for is. No database: the notes are made here."""

from bench import summary
from bench.ledger import Ledger


def _rows(**notes) -> list[dict]:
    return summary.rows(Ledger({}, notes))


def _ratio(x: float | None) -> dict | None:
    return {"median": x, "min": x, "max": x} if x else None


def _http(protocol: str, clients: int, per_s: float, p95: float = 5.0, vs_http=None) -> dict:
    lat = {"p50_ms": 1.0, "p95_ms": p95}
    cell = {"protocol": protocol, "clients": clients, "todos_per_s": per_s, "claim_next": lat}
    return cell | {"complete": lat, "cpu_ms_per_todo": {"total": 4.0}, "vs_http": _ratio(vs_http)}


def _peer(system: str, jobs: float, workers: int = 1, vs_nohist=None) -> dict:
    cell = {"system": system, "workers": workers, "jobs_per_s": jobs, "claim": {"p50_ms": 1.0}}
    cell |= {"cpu_vs_procrastinate": 1.0, "vs_procrastinate": _ratio(jobs / 500)}
    return cell | {"vs_nohist": _ratio(vs_nohist), "pg_cpu_vs_nohist": 0.8}


def test_the_http_rows_are_each_protocol_at_the_target_clients_judged_on_both_bars():
    cells = [_http("HTTP", 1, 150), _http("HTTP", 4, 320, p95=30), _http("MCP", 4, 280, p95=10)]
    target = {"clients": 4, "todos_per_s": 300.0, "p95_ms": 25.0}
    http, mcp = [r["note"] for r in _rows(http={"target": target, "cpus": 2, "cells": cells})]
    assert http.startswith("throughput MET") and http.endswith("30.0 ms (< 25) NOT MET")
    assert mcp.startswith("throughput NOT MET") and mcp.endswith("10.0 ms (< 25) MET")


def test_the_mcp_rows_read_mcp_then_against_http_then_at_one_and_four_clients():
    cells = [_http("HTTP then", c, 600 if c == 1 else 1000) for c in (1, 4, 16)]
    cells += [_http("MCP then", 1, 560, vs_http=0.93), _http("MCP then", 4, 850, vs_http=0.85)]
    cells += [_http("MCP then", 16, 500, vs_http=0.5)]  # 16 clients: no row
    target = {"clients": 99, "todos_per_s": 300.0, "p95_ms": 25.0}
    rows = _rows(http={"target": target, "cpus": 2, "cells": cells})
    assert [(r["wk"], r["reference"], r["note"]) for r in rows] == [
        ("1", "HTTP then 600/s", "bar >= 0.90: MET"),
        ("4", "HTTP then 1000/s", "bar >= 0.90: NOT MET"),
    ]


def test_growth_is_not_met_with_a_sequential_scan_whatever_the_cpu_and_buffers():
    def at(history: int, seq_scans: int = 0) -> dict:
        cost = {"cpu_ms_per_todo": 1.0, "buffers_per_todo": 30.0, "seq_scans": seq_scans}
        return {"history": history, **cost}

    [row] = _rows(growth={"workers": 4, "rows": [at(10_000), at(200_000)]})
    assert row["ratio"] == "1.00" and ": MET" in row["note"]
    [row] = _rows(growth={"workers": 4, "rows": [at(10_000), at(200_000, seq_scans=1)]})
    assert row["ratio"] == "1.00" and "NOT MET" in row["note"]


def test_the_peer_bars_twice_in_process_and_once_over_http():
    def bars(*cells) -> list[str]:
        rows = _rows(peers={"jobs": 300, "cells": [_peer("procrastinate", 500), *cells]})
        return [r["note"].split(";")[0] for r in rows]

    assert bars(_peer("ours", 900), _peer("ours-http", 300)) == [
        "bar >= 2.00: NOT MET",
        "bar >= 1.00: NOT MET",
    ]
    assert bars(_peer("ours-then", 1000), _peer("ours-http", 500)) == [
        "bar >= 2.00: MET",
        "bar >= 1.00: MET",
    ]


def test_adr_rows_read_ours_then_against_its_twin_without_history_not_procrastinate():
    cells = [_peer("procrastinate", 500, 4), _peer("ours-then", 900, 4, vs_nohist=0.89)]
    cells += [_peer("nohist-then", 1011, 4)]
    rows = _rows(peers={"jobs": 300, "cells": cells})
    assert [r["section"] for r in rows] == ["peer", "adr"]  # the twin has no peer row
    assert (rows[1]["reference"], rows[1]["note"]) == (
        "no history 1011/s",
        "bar >= 0.90: NOT MET; PostgreSQL CPU ratio 0.80",
    )


def _minute(seen: float | None, max_ms: float = 500.0, once: bool = True) -> dict:
    created = {"n": 1000, "p50_ms": 100.0, "p95_ms": 400.0, "p99_ms": 450.0, "max_ms": max_ms}
    return {"slot": "2026-12-06T11:45:00+00:00", "made": 1000, "once": once, "created": created,
            "first_ms": 8.0, "all_seen_s": seen}  # fmt: skip


def test_the_schedules_row_needs_every_minute_on_time_and_once():
    note = {"schedules": 1000, "sweepers": 3, "cpus": 2, "load": [1.0, 1.0, 1.0]}
    [fine] = _rows(schedules=note | {"rows": [_minute(0.3), _minute(0.75)]})
    [late] = _rows(schedules=note | {"rows": [_minute(0.3), _minute(1.2)]})
    [twice] = _rows(schedules=note | {"rows": [_minute(0.3, once=False)]})
    [never] = _rows(schedules=note | {"rows": [_minute(None)]})

    assert (fine["ours"], fine["ratio"], fine["note"][-3:]) == ("750 ms", "0.75", "MET")
    assert late["note"].endswith("NOT MET") and late["ratio"] == "1.20"
    assert twice["note"].endswith("NOT MET")
    assert never["note"].endswith("NOT MET") and never["ours"] == "-"


def _a2a(send_p95: float = 20.0, stream_kib: float = 10.0, poll_kib: float = 10.0, **more) -> dict:
    lat = {"n": 40, "p50_ms": 1.0, "p95_ms": send_p95, "p99_ms": send_p95, "max_ms": send_p95}
    latency = {"rounds": 40, "send_to_completed": lat, "commit_to_completed": lat, "failed": {}}
    get = {"n": 20, "p50_ms": 1.0, "p95_ms": 2.0, "max_ms": 2.0, "failed": 0}
    streams = {"n": 200, "fates": {"open": 200}, "later": {}, "kib_each": stream_kib}
    polls = {"n": 200, "fates": {"open": 200}, "later": more.pop("poll_later", {})}
    target = {"send_p95_ms": 100.0, "memory_ratio": 1.10, "get_p95_ms": 25.0}
    rep = {"streams": streams | {"get_after": get} | more, "polls": polls | {"kib_each": poll_kib}}
    return {"latency": latency, "bare": {"heard": lat}, "target": target, "memory": [rep]}


def test_the_a2a_rows_read_the_send_against_its_target_and_a_stream_against_a_long_poll():
    send, memory = _rows(a2a=_a2a())
    assert send["note"].startswith("every round within the target: MET") and send["ratio"] == "0.20"
    assert memory["note"].startswith("bar <= 1.10, all open: MET") and memory["ratio"] == "1.00"
    send, memory = _rows(a2a=_a2a(send_p95=120.0, stream_kib=11.5))
    assert ": NOT MET" in send["note"] and ": NOT MET" in memory["note"]
    assert "all open: NOT MET" in _rows(a2a=_a2a(fates={"open": 199, "status 503": 1}))[1]["note"]
    assert "all open: NOT MET" in _rows(a2a=_a2a(poll_later={"answer": 1}))[1]["note"]
