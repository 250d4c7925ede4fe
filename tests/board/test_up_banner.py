"""``switchboard up`` on a first run: the access log is off in development (the children are
told so), unless asked for."""

from __future__ import annotations

from switchboard.management.commands import up


def test_the_children_are_told_to_keep_the_access_log_off_in_development(settings, monkeypatch):
    settings.SWITCHBOARD_DEV = True
    monkeypatch.delenv(up.ACCESS_LOG, raising=False)
    assert up._child_environment()[up.ACCESS_LOG] == "0"
    monkeypatch.setenv(up.ACCESS_LOG, "1")  # one line per request, when asked for
    assert up._child_environment()[up.ACCESS_LOG] == "1"


def test_outside_development_the_access_log_is_left_alone(settings, monkeypatch):
    settings.SWITCHBOARD_DEV = False
    monkeypatch.delenv(up.ACCESS_LOG, raising=False)
    assert up.ACCESS_LOG not in up._child_environment()
