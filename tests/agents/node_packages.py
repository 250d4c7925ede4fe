"""The node clients the agent tests drive (tests/agents/ts_client, a2a_js, mcp_tasks_ts):
installed from the npm registry into their folder by ``npm ci``, once, under a lock, so that
parallel workers install each once."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path


def installed(folder: Path, package: str) -> Path:
    """``folder``'s client script, its packages installed (``package`` is the one whose
    folder under node_modules says they are)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, (
        "node and npm are needed (.ci/run installs them: apt-get install nodejs npm)"
    )
    with open(folder / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "node_modules" / package).is_dir():
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=folder,
                check=True,
                timeout=300,
            )
    return folder / "client.mjs"
