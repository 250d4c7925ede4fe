"""The summary's ADR-0039 row (bench/adr0039.py summary_rows): MET only when every history
measured at that worker count reaches the bar, not the largest history alone (a run on
2026-12-02 passed two rows on its 200,000-history cells while the empty history was 0.71)."""

from __future__ import annotations

from bench import adr0039


def _cell(history: int, workers: int, ratio: float) -> dict:
    system = {"todos_per_s": 1000.0, "cpu_ms_per_todo": 1.0}
    return {
        "history": history,
        "workers": workers,
        "systems": {"ours": system, "nohist": system, "bare": system},
        "ratios": {"ours/nohist": {"median": ratio, "min": ratio, "max": ratio}},
    }


class _Ledger:
    def __init__(self, cells: list[dict]):
        self._cells = cells

    def cells(self, section: str | None = None) -> list[dict]:
        assert section == "adr"
        return self._cells


def _verdicts(cells: list[dict]) -> dict[str, str]:
    rows = adr0039.summary_rows(_Ledger(cells))
    return {r["wk"]: r["note"].split(";")[0] for r in rows}


def test_a_row_is_met_only_when_every_history_at_its_worker_count_is():
    cells = [
        _cell(0, 1, 0.75),
        _cell(0, 4, 0.95),
        _cell(200_000, 1, 0.92),  # the largest history alone would pass
        _cell(200_000, 4, 1.00),
    ]
    assert _verdicts(cells) == {
        "1": "bar >= 0.90 at every history: NOT MET",
        "4": "bar >= 0.90 at every history: MET",
    }


def test_the_section_verdict_and_the_rows_agree_on_one_history():
    cells = [_cell(200_000, 1, 0.89), _cell(200_000, 4, 0.90)]
    assert _verdicts(cells) == {
        "1": "bar >= 0.90 at every history: NOT MET",
        "4": "bar >= 0.90 at every history: MET",
    }
    assert adr0039.verdict(cells).endswith("NOT MET")
    assert adr0039.verdict(cells[1:]).endswith("=> MET")
