"""Write pytest's rewritten test modules into their __pycache__ once, before `make test`'s
workers start (the Makefile runs it): ``python tests/assert_cache.py tests bench``.

pytest rewrites each test module's asserts so that a failure explains itself, and caches the
result beside the module. In a fresh clone there is no cache yet, and each of the four xdist
workers rewrote all ~150 modules at once, none able to use another's: 7 s of CPU a worker,
28 s a run (docs/reliability.md, "The suite's time"). Here the same rewrite runs once, on
two processes, and writes the same files pytest writes (pytest's own functions, hash-checked
pycs), so the workers read them; a module already cached is left as it is (a warm run costs
a look at each file).

pytest's functions for this are its own (``_pytest.assertion.rewrite``), not an API: if a
release moves them, this says so and does nothing, and the workers rewrite as before."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def _rewritten(path: str) -> bool:
    """Rewrite ``path`` and write its cache unless a valid one is there; whether it wrote."""
    from _pytest.assertion import rewrite

    fn = Path(os.path.abspath(path))  # the code's file name, as pytest's import gives it
    cache = rewrite.get_cache_dir(fn)
    pyc = cache / (fn.name[:-3] + rewrite.PYC_TAIL)
    if rewrite._read_pyc(fn, pyc) is not None:
        return False
    source_hash, code = rewrite._rewrite_test(fn, None)
    cache.mkdir(exist_ok=True)
    with open(f"{pyc}.{os.getpid()}", "wb") as out:  # then renamed, as pytest does
        rewrite._write_pyc_fp(out, source_hash, code)
    os.replace(f"{pyc}.{os.getpid()}", pyc)
    return True


def modules(roots: list[str]) -> list[str]:
    """What pytest rewrites under ``roots``: its test files and conftest.py files."""
    found: list[str] = []
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            if "node_modules" in path.parts or "__pycache__" in path.parts:
                continue
            if path.name == "conftest.py" or path.name.startswith("test_"):
                found.append(str(path))
    return found


def main(roots: list[str]) -> int:
    if sys.dont_write_bytecode:  # pytest would not write them either
        return 0
    paths = modules(roots)
    try:
        with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
            written = sum(pool.map(_rewritten, paths, chunksize=8))
    except (ImportError, AttributeError, TypeError, ValueError, OSError) as exc:
        print(f"assert_cache: left to pytest's workers ({exc!r})", file=sys.stderr)
        return 0
    if written:
        print(
            f"assert_cache: {written} of {len(paths)} test modules rewritten once for the workers"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["tests", "bench"]))
