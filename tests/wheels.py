"""What the wheel tests share: a copy of the checkout to build from, a wheel built from it, a
fresh virtualenv with a wheel installed in it, a probe run with a virtualenv's python, and the
version (tests/test_wheel.py, tests/test_client_wheel.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from uv import find_uv_bin

ROOT = Path(__file__).resolve().parent.parent


def source(work: Path) -> Path:
    """A copy of the checkout to build from (setuptools builds in place, leaving build/ and
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


def _ran(command: list[str], timeout: float = 600) -> None:
    """Run an installer's command; on failure, the end of what it said."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def built_wheel(project: Path, out: Path, pattern: str) -> Path:
    """The wheel of ``project`` (a folder with a pyproject.toml), built into ``out`` by uv: the
    project's own build backend (setuptools) in an isolated environment, as ``pip wheel``
    would, in 0.9 s of CPU where pip took 2.5 s."""
    _ran([find_uv_bin(), "build", "--wheel", "--quiet", "--out-dir", str(out), str(project)])
    (wheel,) = out.glob(pattern)
    return wheel


def installed_in_a_fresh_venv(where: Path, *requirements: str, no_deps: bool = False) -> Path:
    """A virtualenv made at ``where`` from the interpreter this one was made from (nothing of
    ours leaks in), holding ``requirements`` (a wheel's path, names from the registry); its
    bin folder. uv makes and fills it, as a user's ``uv pip install`` would: the same wheel and
    registry as pip's, in a second where pip took 11 s of CPU and ensurepip 3 s more. No
    bytecode is written at install: what a process imports is compiled then (less work).
    ``no_deps``: nothing but the requirements themselves."""
    base = getattr(sys, "_base_executable", sys.executable)
    uv = find_uv_bin()
    _ran([uv, "venv", "--quiet", "--python", base, str(where)])
    only = ["--no-deps"] if no_deps else []  # the requirements alone, whatever they declare
    python = str(where / "bin" / "python")
    _ran([uv, "pip", "install", "--quiet", *only, "--python", python, *requirements])
    return where / "bin"


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
