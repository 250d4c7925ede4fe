"""What the wheel tests share: a copy of the checkout to build from, pip, a probe run with a
virtualenv's python, and the version (tests/test_wheel.py, tests/test_client_wheel.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source(work: Path) -> Path:
    """A copy of the checkout to build from (pip builds in place, leaving build/ and
    *.egg-info behind): what a clean clone holds, less what a build never reads."""
    skip = shutil.ignore_patterns(
        ".git",
        ".venv",
        "var",
        "node_modules",
        "build",
        "dist",
        "*.egg-info",
        "__pycache__",
        ".pytest_cache",
        ".ruff_cache",
        "tests",
        "bench",
        "docs",
    )
    return Path(shutil.copytree(ROOT, work / "source", ignore=skip, symlinks=True))


def pip(python: Path | str, *args: str, timeout: float = 600) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def probe(bin_: Path, script: str, *args: str) -> dict:
    """Run ``script`` with the virtualenv's python, from /, and read the JSON it prints."""
    run = subprocess.run(
        [str(bin_ / "python"), "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def version() -> str:
    """The version both pyproject.toml files read (switchboard/client/about.py)."""
    text = (ROOT / "switchboard" / "client" / "about.py").read_text()
    return re.search(r'^VERSION = "([^"]+)"', text, re.M)[1]
