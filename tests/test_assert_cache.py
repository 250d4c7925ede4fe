"""tests/assert_cache.py writes the very cache pytest writes for a test module (so the
workers read it instead of each rewriting every module), and nothing when it is there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import assert_cache

MODULE = "def test_two_numbers():\n    left, right = 1, 2\n    assert left == right\n"


def _pytest(folder: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:django",
            "-p",
            "no:xdist",
            str(folder / "test_numbers.py"),
        ],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=120,
    )


def test_the_cache_written_is_the_one_pytest_writes_and_reads(tmp_path):
    (tmp_path / "test_numbers.py").write_text(MODULE)
    cache = tmp_path / "__pycache__"

    assert assert_cache.modules([str(tmp_path)]) == [str(tmp_path / "test_numbers.py")]
    assert assert_cache._rewritten(str(tmp_path / "test_numbers.py")) is True
    (ours,) = cache.glob("test_numbers.*-pytest-*.pyc")
    written, inode = ours.read_bytes(), ours.stat().st_ino
    assert assert_cache._rewritten(str(tmp_path / "test_numbers.py")) is False  # kept

    ran = _pytest(tmp_path)
    assert ran.returncode == 1 and "assert 1 == 2" in ran.stdout, ran.stdout + ran.stderr
    assert ours.stat().st_ino == inode  # read as it was: pytest writes a new file and renames

    ours.unlink()  # now pytest's own
    assert _pytest(tmp_path).returncode == 1
    assert ours.read_bytes() == written
