"""Catching the index up on a thread of its own, for a process whose every read catches up first (the MCP
server's tools): a write's receipt then need not wait for the index to take in its line.

`Index.catch_up_in_background()` turns it on; after each append `Index.catch_up_later()` pokes the thread,
which runs `Index.catch_up` under the index's lock (~0.3-0.5 ms: one transaction of ~15 pages). A read or
write that comes first waits for it under that lock, or catches up itself. What a background catch-up
finds (damage repaired, a failure) the next read or write says, as for a line another process appended.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Follower:
    """One thread that runs `catch_up` each time it is poked (pokes while it runs fold into one more run)."""

    def __init__(self, catch_up: Callable[[], object]) -> None:
        self._catch_up = catch_up
        self._cond = threading.Condition()
        self._pending = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def poke(self) -> None:
        with self._cond:
            if self._stopped:
                return
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="retained-index", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if not self._pending:
                    return
                self._pending = False
            try:
                self._catch_up()
            except Exception:  # the next read or write catches up again, and says what failed
                pass

    def stop(self) -> None:
        """Let a catch-up under way (or poked) finish; no more after it."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
