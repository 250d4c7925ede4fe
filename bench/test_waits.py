"""The waits section's verdicts (bench/waits.py): each part MET only when all it stands for
is. No database: the notes are made here."""

from bench import summary, waits
from bench.ledger import Ledger


def _lat(p95: float, n: int = 30) -> dict:
    return {"n": n, "p50_ms": p95 / 2, "p95_ms": p95, "p99_ms": p95, "max_ms": p95}


def _drain(per_s: float, most=(0, 0)) -> dict:
    drain = {"todos_per_s": per_s, "todos_per_s_all": [per_s], "cpu_ms_per_todo": 2.0}
    return drain | {"looks": 100, "most_claimed_per_key": list(most), "n": 2000, "keys": 100}


def _note(**changes) -> dict:
    ratio = {"median": 0.95, "min": 0.95, "max": 0.95}
    note = {
        "wake": {"rounds": 30, "after": _lat(5.0), "create": _lat(4.0)}
        | {"complete": _lat(3.0), "wrong": 0},
        "fan_in": {"dependents": 2000, "plain_complete": _lat(1.0, 20), "complete_ms": 30.0}
        | {"released_in_commit": 1000, "batches": _lat(30.0, 1), "sweeper_calls": 1}
        | {"all_pending_ms": 70.0, "left_waiting": 0, "longest_ms": 31.0},
        "with_sweeper": {"dependents": 2000, "interval_s": 5, "all_pending_ms": 900.0}
        | {"left_waiting": 0},
        "workers": 4,
        "reps": 1,
        "parents_released": 2,
        "target": waits.TARGET,
        "server": {"workers": 2, "line": "server log"},
        "git": {"head": "0" * 40},
        "duration_s": 60.0,
    }
    note |= {
        k: _drain(500.0) for k in ("children", "plain_children", "keys", "plain", "plain_then")
    }
    note |= {k: _drain(500.0, most=(1, 1)) for k in ("keyed", "keyed_then")}
    note |= dict.fromkeys(waits.RATIOS, ratio)
    for path, value in changes.items():
        part, field = path.split("__")
        note[part] = note[part] | {field: value}
    return note


def test_a_run_within_every_target_is_met_in_each_part_and_renders():
    assert all(waits.met(_note()).values())
    assert "NOT MET" not in waits.render(_note())
    [row] = summary.rows(Ledger({}, {"waits": _note()}))
    assert (row["section"], row["ratio"], row["note"][-5:]) == ("waits", "0.950 / 0.950", ": MET")


def test_two_claimed_with_one_key_fails_the_keys_part_however_fast_the_drain():
    assert not waits.met(_note(keyed__most_claimed_per_key=[2, 1]))["keys"]
    assert not waits.met(_note(keys_ratio__median=0.89))["keys"]
    assert not waits.met(_note(keys_then_ratio__median=0.89))["keys"]
    assert not waits.met(_note(keyed_then__most_claimed_per_key=[1, 2]))["keys"]
    [slower] = summary.rows(Ledger({}, {"waits": _note(keys_then_ratio__median=0.89)}))
    assert slower["note"].endswith("NOT MET") and slower["ratio"] == "0.950 / 0.890"


def test_a_release_that_left_a_todo_waiting_is_not_met_however_soon_it_ended():
    assert not waits.met(_note(fan_in__left_waiting=1))["release"]
    assert not waits.met(_note(fan_in__all_pending_ms=1001.0))["release"]
    assert not waits.met(_note(with_sweeper__left_waiting=5))["sweeper"]


def test_a_wake_that_answered_another_todo_is_not_met():
    assert not waits.met(_note(wake__wrong=1))["wake"]
    assert not waits.met(_note(wake__after=_lat(51.0)))["wake"]
