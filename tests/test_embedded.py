"""The embedded PostgreSQL helper's bookkeeping (the server itself runs under every test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from switchboard import embedded


def test_handles_of_exited_processes_are_forgotten(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    handles = tmp_path / ".handle_pids.json"
    handles.write_text(json.dumps([os.getpid(), gone.pid]))

    embedded._forget_dead_handles(tmp_path)

    # A process that died holding a handle would otherwise keep the server running forever.
    assert json.loads(handles.read_text()) == [os.getpid()]


def test_a_missing_handle_list_is_left_missing(tmp_path):
    embedded._forget_dead_handles(tmp_path)
    assert not (tmp_path / ".handle_pids.json").exists()
