"""A server on 127.0.0.1 that never answers its first connection: the clients' timeout tests
(tests/test_client.py, tests/test_async_client.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ANSWER = (
    b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"todos": []}'
)


@contextmanager
def first_connection_unanswered() -> Iterator[str]:
    """Yields the URL of a server that reads nothing from its first connection and never
    answers it (a client times out), and answers its second with an empty list of todos."""
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
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()
