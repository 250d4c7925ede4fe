"""The client alone (issue 46): the switchboard-client wheel, built from clients/python and
installed into a fresh virtualenv with nothing else, talks to the server without Django or
psycopg, reports the server's version, and brings the relay (`switchboard-relay`)."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.wheels import built_wheel, installed_in_a_fresh_venv, probe, source, version


@pytest.fixture(scope="module")
def client_alone(tmp_path_factory) -> Path:
    """A fresh virtualenv holding the switchboard-client wheel and nothing else (its bin)."""
    work = tmp_path_factory.mktemp("client")
    wheel = built_wheel(
        source(work) / "clients" / "python", work / "dist", "switchboard_client-*.whl"
    )
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[1] for n in names if n.startswith("switchboard/")} == {
        "client",
        "relay",
        "tasks",
    }
    assert "switchboard/__init__.py" not in names  # a namespace: the server's wheel has one
    bin_ = installed_in_a_fresh_venv(work / "venv", str(wheel), no_deps=True)
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
    seen = probe(client_alone, script, live_server.url, token)
    assert seen["django"] is False and seen["psycopg"] is False and seen["loaded"] == []
    # One number: the client's, the server's capability document's, this checkout's.
    assert seen["version"] == seen["server"] == VERSION == capabilities()["version"] == version()
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
