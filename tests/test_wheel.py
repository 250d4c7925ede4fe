"""Switchboard as a package (issue 46): the wheel built from this repository, installed into a
fresh virtualenv beside the OpenAI Agents SDK, serves a signed-in Board and its stylesheet
from an empty folder (`switchboard up`, nothing else), claims no top-level name but
`switchboard`, and leaves `from agents import Agent, Runner` working.

Real parts throughout: pip builds the wheel and installs it and openai-agents from the
package registry (pip's cache makes a second run quick); the installed `switchboard up`
starts its own embedded PostgreSQL in the per-user data folder of a home made for the test."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "a wheel's first password"


def _source(work: Path) -> Path:
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


def _pip(python: Path | str, *args: str, timeout: float = 600) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _probe(bin_: Path, script: str, *args: str) -> dict:
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


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the fresh virtualenv's bin folder): the wheel and openai-agents in it."""
    work = tmp_path_factory.mktemp("wheel")
    source = _source(work)
    _pip(sys.executable, "wheel", str(source), "--no-deps", "--quiet", "-w", str(work / "dist"))
    (wheel,) = (work / "dist").glob("switchboard-*.whl")
    # The interpreter this virtualenv was made from, not the virtualenv: nothing of ours leaks.
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(work / "venv")], check=True, timeout=120)
    bin_ = work / "venv" / "bin"
    # No bytecode written at install: what a process imports is compiled then (less work).
    _pip(bin_ / "python", "install", "--quiet", "--no-compile", str(wheel), "openai-agents")
    return wheel, bin_


def test_the_wheel_holds_one_top_level_name_and_what_the_board_serves(installed):
    wheel, _ = installed
    assert wheel.name == f"switchboard-{_version()}-py3-none-any.whl"
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
    ):
        assert needed in names, needed


def test_beside_openai_agents_both_import_and_no_generic_name_is_ours(installed):
    _, bin_ = installed
    seen = _probe(
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
    version = subprocess.run(
        [str(bin_ / "switchboard"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and version.stdout.strip() == f"switchboard {_version()}"


def _version() -> str:
    """The version both pyproject.toml files read (switchboard/client/about.py)."""
    text = (ROOT / "switchboard" / "client" / "about.py").read_text()
    return re.search(r'^VERSION = "([^"]+)"', text, re.M)[1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_switchboard_up_in_an_empty_folder_serves_a_signed_in_board_and_its_stylesheet(
    installed, tmp_path
):
    _, bin_ = installed
    home, folder = tmp_path / "home", tmp_path / "empty"
    home.mkdir()
    folder.mkdir()
    port = _free_port()
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


# --- The client alone: switchboard-client (clients/python) -------------------------------


@pytest.fixture(scope="module")
def client_alone(tmp_path_factory) -> Path:
    """A fresh virtualenv holding the switchboard-client wheel and nothing else (its bin)."""
    work = tmp_path_factory.mktemp("client")
    _pip(
        sys.executable,
        "wheel",
        str(_source(work) / "clients" / "python"),
        "--no-deps",
        "--quiet",
        "-w",
        str(work / "dist"),
    )
    (wheel,) = (work / "dist").glob("switchboard_client-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[1] for n in names if n.startswith("switchboard/")} == {
        "client",
        "relay",
        "tasks",
    }
    assert "switchboard/__init__.py" not in names  # a namespace: the server's wheel has one
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(work / "venv")], check=True, timeout=120)
    bin_ = work / "venv" / "bin"
    _pip(bin_ / "python", "install", "--quiet", "--no-compile", "--no-deps", str(wheel))
    return bin_


@pytest.mark.django_db(transaction=True)
def test_the_client_alone_talks_to_the_server_without_django(client_alone, live_server, vend):
    from switchboard.agents.openapi import capabilities
    from switchboard.client import VERSION
    from switchboard.queues.models import Todo

    endpoint, token = vend("alone")
    script = (
        "import importlib.util, json, sys\n"
        "from switchboard.client import Client, VERSION\n"
        "sb = Client(sys.argv[1], sys.argv[2])\n"
        "made = sb.create_todo(title='sent by the client alone')\n"
        "print(json.dumps({'version': VERSION, 'server': sb.capabilities()['version'],"
        " 'id': made['todo']['id'], 'django': importlib.util.find_spec('django') is not None,"
        " 'psycopg': importlib.util.find_spec('psycopg') is not None,"
        " 'loaded': sorted(m for m in sys.modules if m.startswith(('django', 'psycopg')))}))"
    )
    seen = _probe(client_alone, script, live_server.url, token)
    assert seen["django"] is False and seen["psycopg"] is False and seen["loaded"] == []
    # One number: the client's, the server's capability document's, this checkout's.
    assert seen["version"] == seen["server"] == VERSION == capabilities()["version"] == _version()
    todo = Todo.objects.get(pk=seen["id"])
    assert (todo.title, todo.endpoint_id) == ("sent by the client alone", endpoint.pk)
    relay = subprocess.run(
        [str(client_alone / "switchboard-relay"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert relay.returncode == 0 and "COMMAND" in relay.stdout, relay.stderr


def test_the_client_speaks_the_servers_verbs():
    from switchboard.client import VERBS
    from switchboard.queues.verbs import VERBS as LEDGER_VERBS

    assert VERBS == LEDGER_VERBS
