"""The WSGI entry point gunicorn serves: agent paths skip the site's middleware."""

from __future__ import annotations

import io
import json
from wsgiref.util import setup_testing_defaults

import pytest

from switchboard.wsgi import application


def call(path: str, *, method: str = "POST", body: bytes = b"{}", headers: dict | None = None):
    environ: dict = {}
    setup_testing_defaults(environ)
    environ.update(
        {
            "PATH_INFO": path,
            "REQUEST_METHOD": method,
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "SERVER_NAME": "localhost",
            "HTTP_HOST": "localhost",
        }
    )
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    seen: dict = {}

    def start_response(status, response_headers, exc_info=None):
        seen["status"] = int(status.split()[0])
        seen["headers"] = dict(response_headers)

    content = b"".join(application(environ, start_response))
    return seen["status"], seen["headers"], content


@pytest.mark.django_db(transaction=True)
def test_agent_requests_work_without_session_or_csrf_middleware(vend):
    _, token = vend("wsgi-agent")
    status, headers, content = call(
        "/api/v1/create_todo",
        body=json.dumps({"title": "through wsgi"}).encode(),
        headers={"Authorization": f"Bearer {token}"},
    )
    assert status == 200 and json.loads(content)["todo"]["title"] == "through wsgi"
    assert "Set-Cookie" not in headers and "Vary" not in headers  # no session touched
    status, _, content = call("/api/v1/list_todos", headers={})
    assert status == 401 and json.loads(content)["error"]["code"] == "unauthorized"


@pytest.mark.django_db(transaction=True)
def test_site_requests_keep_the_full_middleware():
    status, headers, _ = call("/login/", method="GET", body=b"")
    assert status == 200
    assert "csrftoken" in headers.get("Set-Cookie", "")  # CSRF middleware ran
    assert headers.get("X-Frame-Options") == "DENY"  # clickjacking middleware ran
