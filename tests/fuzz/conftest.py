"""After a long fuzzing run (make fuzz), say what the fuzzer reached: responses by verb,
caller and status (a run that only ever hit 400 and 404 proves little)."""

from __future__ import annotations

import os


def pytest_terminal_summary(terminalreporter) -> None:
    if not os.environ.get("SWITCHBOARD_FUZZ_EXAMPLES"):
        return
    from tests.fuzz.test_api_fuzz import TALLY

    if not TALLY:
        return
    terminalreporter.section("fuzzed responses (verb: status x count, by caller)")
    for verb in sorted({verb for verb, _, _ in TALLY}):
        parts = []
        for caller in sorted({c for v, c, _ in TALLY if v == verb}):
            statuses = sorted((s, n) for (v, c, s), n in TALLY.items() if v == verb and c == caller)
            parts.append(f"{caller} " + " ".join(f"{s}x{n}" for s, n in statuses))
        terminalreporter.write_line(f"{verb:12} " + "; ".join(parts))
