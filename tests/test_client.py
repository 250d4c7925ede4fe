"""switchboard.client beyond the verbs (which tests/queues/test_api.py covers)."""

from __future__ import annotations

import socket
import threading

import pytest

from switchboard.client import Client

ANSWER = (
    b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"todos": []}'
)


def test_a_call_after_a_timed_out_one_gets_a_fresh_connection():
    """A server that never answers the first connection and answers the second: the call
    after the timeout must not reuse the connection left mid-request."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        silent, _ = listener.accept()
        held.append(silent)  # read nothing, answer nothing: the client times out
        answered, _ = listener.accept()
        with answered:
            answered.recv(65536)
            answered.sendall(ANSWER)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}", "token", timeout=0.5)
    try:
        with pytest.raises(TimeoutError):
            client.list_todos()

        assert client.list_todos() == {"todos": []}
    finally:
        server.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()
