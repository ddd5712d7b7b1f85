"""Something that listens on a unix socket and never answers: it holds every connection ("hangs"), or
reads what was sent and hangs up ("closes"). What a client with a deadline must survive."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def stuck_listener(path: Path, behaviour: str) -> Iterator[None]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            if behaviour == "hangs":
                held.append(conn)  # read nothing, answer nothing
            else:
                with contextlib.suppress(OSError):
                    conn.settimeout(1)
                    conn.recv(1 << 16)
                conn.close()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=5)
        for c in held:
            c.close()
        listener.close()
