"""Switchboard as a package (issue 46): the wheel built from this repository, installed into a
fresh virtualenv beside the OpenAI Agents SDK, serves a signed-in Board and its stylesheet
from an empty folder (`switchboard up`, nothing else), claims no top-level name but
`switchboard`, and leaves `from agents import Agent, Runner` working.

Real parts throughout: uv builds the wheel (setuptools, as pip would) and installs it and openai-agents from the
package registry into a virtualenv of its own (tests/wheels.py); the installed `switchboard up`
starts its own embedded PostgreSQL in the per-user data folder of a home made for the test."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import subprocess
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.crash.harness import free_port
from tests.wheels import built_wheel, installed_in_a_fresh_venv, probe, source, version

PASSWORD = "a wheel's first password"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the fresh virtualenv's bin folder): the wheel and openai-agents in it."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = built_wheel(source(work), work / "dist", "switchboard-*.whl")
    bin_ = installed_in_a_fresh_venv(work / "venv", str(wheel), "openai-agents")
    return wheel, bin_


def test_the_wheel_holds_one_top_level_name_and_what_the_board_serves(installed):
    wheel, _ = installed
    assert wheel.name == f"switchboard-{version()}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "switchboard",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    for needed in (
        "switchboard/templates/registration/login.html",
        "switchboard/templates/board/todo_list.html",
        "switchboard/static/board/board.css",
        "switchboard/static/board/board.js",
        "switchboard/queues/schema/functions.sql",
        "switchboard/queues/migrations/0001_initial.py",
        "switchboard/queues/migrations/0001_squashed_0047_attempts_start_empty.py",
        "switchboard/queues/migrations/0001_squashed_0047_attempts_start_empty.sql",
    ):
        assert needed in names, needed


def test_beside_openai_agents_both_import_and_no_generic_name_is_ours(installed):
    _, bin_ = installed
    seen = probe(
        bin_,
        "import json, importlib.metadata as m\n"
        "from agents import Agent, Runner\n"
        "import agents, switchboard.client\n"
        "ours = {str(f).split('/')[0] for f in m.files('switchboard')}\n"
        "print(json.dumps({'agents': agents.__file__, 'agent': Agent.__module__,"
        " 'runner': Runner.__name__, 'client': switchboard.client.Client.__name__,"
        " 'ours': sorted(ours)}))",
    )
    assert seen["agent"].startswith("agents.") and seen["runner"] == "Runner"
    assert "/site-packages/agents/" in seen["agents"]  # the SDK's, not a package of ours
    assert seen["client"] == "Client"
    # In site-packages (the console script is the RECORD's ../../../bin/switchboard).
    inside = [n for n in seen["ours"] if n != ".." and not n.endswith(".dist-info")]
    assert inside == ["switchboard"]
    said = subprocess.run(
        [str(bin_ / "switchboard"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert said.returncode == 0 and said.stdout.strip() == f"switchboard {version()}"


def test_switchboard_up_in_an_empty_folder_serves_a_signed_in_board_and_its_stylesheet(
    installed, tmp_path
):
    _, bin_ = installed
    home, folder = tmp_path / "home", tmp_path / "empty"
    home.mkdir()
    folder.mkdir()
    port = free_port()
    # A user's shell: no SECRET_KEY, no SWITCHBOARD_DEV, no DATABASE_URL, no checkout.
    env = {
        "PATH": f"{bin_}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "SWITCHBOARD_PASSWORD": PASSWORD,
        "SWITCHBOARD_WEB_WORKERS": "1",  # one serves the page as well as two
    }
    log = tmp_path / "up.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(bin_ / "switchboard"), "up", "--no-demo", "--port", str(port)],
            env=env,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while "Stop with Ctrl-C" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        base = f"http://127.0.0.1:{port}/"
        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        with opener.open(f"{base}login/", timeout=30) as response:
            csrf = re.search(
                r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode()
            )
        form = urllib.parse.urlencode(
            {"csrfmiddlewaretoken": csrf[1], "username": "admin", "password": PASSWORD}
        ).encode()
        with opener.open(f"{base}login/", data=form, timeout=30) as response:
            assert response.status == 200 and response.url == base
            page = response.read().decode()
        assert "Sign out" in page and "Overview" in page, page[:2000]
        stylesheet = re.search(r'<link rel="stylesheet" href="([^"]+\.css)"', page)
        assert stylesheet, page[:2000]
        with opener.open(urllib.parse.urljoin(base, stylesheet[1]), timeout=30) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/css")
            assert len(response.read()) > 1000
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        code = process.wait(timeout=60)
    printed = log.read_text()
    assert code == 0, printed
    assert "running as a laptop" in printed
    assert "Traceback" not in printed
    # The data went to the user's data folder, and nothing into the folder it ran in.
    assert (home / ".local" / "share" / "switchboard" / "pgdata" / "PG_VERSION").is_file()
    assert list(folder.iterdir()) == []
