"""The shipped systemd units (deploy/systemd/): each starts a `switchboard` command that
exists with the flags it gives, and stops it by the drain: SIGTERM to the main process, with
more time than gunicorn's grace before systemd kills what is left."""

from __future__ import annotations

import configparser
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.conftest import DEPLOY

SWITCHBOARD = str(Path(sys.executable).with_name("switchboard"))
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))


def _unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # systemd's keys are case-sensitive
    parser.read_string(path.read_text())
    return parser


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_each_unit_runs_a_real_command_and_stops_it_by_the_drain(path):
    from switchboard import gunicorn_conf

    service = _unit(path)["Service"]
    program, command, *flags = shlex.split(service["ExecStart"])
    assert program.endswith("/switchboard")
    # The command and its flags are the switchboard command's own: its help lists each.
    shown = subprocess.run(
        [SWITCHBOARD, command, "--help"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    for flag in (f for f in flags if f.startswith("--")):
        assert flag in shown.stdout, (flag, shown.stdout)
    assert service["KillMode"] == "mixed" and service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) > gunicorn_conf.graceful_timeout


def test_there_is_a_unit_for_the_web_server_and_one_for_the_sweeper():
    assert [p.name for p in UNITS] == ["switchboard-serve.service", "switchboard-sweep.service"]
