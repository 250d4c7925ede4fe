"""`make test`'s last lines: its wall time and the ten slowest tests of both parts, read from
the JUnit XML each pytest run wrote (a test's time there is its setup, call and teardown), so
a slow test is seen the day it arrives. Usage: python tests/timings.py START_EPOCH XML...
(a missing file, from a part that did not run, is skipped)."""

from __future__ import annotations

import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

SLOWEST = 10


def cases(path: Path) -> list[tuple[float, str]]:
    if not path.exists():
        return []
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):
        test = case.get("name") or ""
        if test.rfind("@") > test.rfind("]"):  # xdist's group suffix (--dist loadgroup)
            test = test[: test.rfind("@")]
        name = f"{case.get('classname', '').replace('.', '/')}.py::{test}"
        found.append((float(case.get("time") or 0.0), name))
    return found


def main(argv: list[str]) -> int:
    started, paths = float(argv[0]), [Path(p) for p in argv[1:]]
    timed = sorted((c for p in paths for c in cases(p)), reverse=True)
    print(f"\nmake test: the {SLOWEST} slowest tests (setup + call + teardown):")
    for seconds, name in timed[:SLOWEST]:
        print(f"  {seconds:7.2f} s  {name}")
    total = time.time() - started
    print(f"make test: {len(timed)} tests in {total:.0f} s wall ({total / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
