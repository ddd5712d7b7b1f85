"""A running `retained serve` lends its loaded model to the prompt hook.

The prompt hook is a fresh process for every prompt: importing numpy and onnxruntime and loading the
model would cost it most of half a second, which the server of the same store (started by the host
at session start) has already paid. So after the MCP handshake the server warms the semantic tier
in a background thread and answers the hook's search on a unix socket in the store directory
(`recall.sock`, mode 0600 in the store's 0700 directory: this user only). The hook asks with a short
timeout and searches by itself when nobody answers: no server running, another retained version,
another embedder configuration, a server whose semantic tier is off, no unix sockets (Windows), or a
store path too long for one.

Two questions are served: a search (what the CLI's `search` asks `Store.search_scored` for, bounded),
and a prompt's recall whole (`recall`: the server searches, applies the bar and renders the block
itself), so that a prompt hook with a warm server imports neither the store nor the index. The
asking side uses the standard library only.
"""

from __future__ import annotations

import _socket  # the hook's side: socket.py would cost every prompt ~4 ms of imports (selectors, array)
import json
import os
import stat
import sys
import time
from pathlib import Path

from . import __version__, safejson

TYPE_CHECKING = False  # typing's, without importing typing (~5 ms of every prompt)
if TYPE_CHECKING:
    import socket
    import threading
    from typing import Any

    from .store import Store

SOCKET_NAME = "recall.sock"
PROTOCOL = 2  # 2: the `recall` request
ASK_TIMEOUT_S = 1.5  # a hook waits this long for a server before searching by itself
MAX_REPLY = 4 << 20
_MAX_REQUEST = 64 << 10
_SUN_PATH_MAX = 100  # sockaddr_un holds 104 (macOS) to 108 (Linux) bytes with its terminator


def socket_path(directory: Path) -> Path | None:
    """Where a server of the store in `directory` listens, or None where no unix socket can be used."""
    path = Path(directory) / SOCKET_NAME
    if not hasattr(_socket, "AF_UNIX") or len(os.fsencode(str(path))) >= _SUN_PATH_MAX:
        return None
    return path


def peer_uid(sock: Any) -> int | None:
    """The user id of the process at the other end of a connected unix socket (Linux: SO_PEERCRED,
    `struct ucred` = pid, uid, gid as C ints), or None where the system does not say."""
    opt = getattr(_socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        raw = sock.getsockopt(_socket.SOL_SOCKET, opt, 12)
    except OSError:
        return None
    return int.from_bytes(raw[4:8], sys.byteorder) if len(raw) >= 8 else None


def ours(sock: Any) -> bool:
    """Whether the other end of `sock` runs as this user (true where the system cannot say: the socket
    file's owner and its folder are checked before connecting)."""
    uid = peer_uid(sock)
    return uid is None or not hasattr(os, "getuid") or uid == os.getuid()


def trusted_socket(path: Path) -> bool:
    """Whether the socket at `path` may be asked: a socket file of this user, in a folder no other user
    can write (nor replace: the folders above it are checked too). Issue 29: a `recall.sock` someone
    else put in a folder they can write would answer the hook with their text."""
    from .paths import others_can_write

    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISSOCK(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
        return False
    return others_can_write(path.parent) is None


def listen_private(path: Path, backlog: int) -> socket.socket:
    """A unix socket listening at `path`, mode 0600 from the moment it exists: this user only (the
    lender's)."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old)
    return sock


def _stamp(request: dict[str, Any]) -> dict[str, Any]:
    from .switches import embed_config_key

    return dict(request, v=PROTOCOL, retained=__version__, embed=list(embed_config_key()))


# -- the hook's side ------------------------------------------------------------------------------
def ask(directory: Path, request: dict[str, Any], timeout: float = ASK_TIMEOUT_S) -> dict[str, Any] | None:
    """The server's reply to `request`, or None (no server, a timeout, a refusal, anything odd)."""
    path = socket_path(directory)
    if path is None or not trusted_socket(path):
        return None
    deadline = time.monotonic() + timeout
    data = (json.dumps(_stamp(request), ensure_ascii=False) + "\n").encode("utf-8")
    try:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(str(path))
            if not ours(s):
                return None  # a listener of another user: its answer is not this store's
            s.sendall(data)
            chunks: list[bytes] = []
            size = 0
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                s.settimeout(left)
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_REPLY:
                    return None
                if chunk.endswith(b"\n"):
                    break
        finally:
            s.close()
        reply = safejson.loads(b"".join(chunks), max_bytes=MAX_REPLY, errors="surrogatepass")
    except (OSError, ValueError):
        return None
    if not isinstance(reply, dict) or reply.get("v") != PROTOCOL or "error" in reply:
        return None
    return reply


def search(directory: Path, query: str, **kw: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """(result, cosines) of `Store.search_scored` run by a server of this store with meaning on, or None.
    `kw`: scopes, k, kind, max_tokens, include_superseded, as_of, inline_embed, need_vectors."""
    reply = ask(directory, {"op": "search", "query": query, **kw})
    if reply is None:
        return None
    result, cosines = reply.get("result"), reply.get("cosines")
    if not isinstance(result, dict) or not isinstance(cosines, dict) or result.get("semantic") != "on":
        return None  # a server without meaning: this process may still have it
    return result, cosines


def recall(directory: Path, prompt: str, *, project: str | None, shown: list[str]) -> tuple[bool, dict[str, Any] | None]:
    """A prompt's recall answered by a warm server of this store: (True, the block or None when nothing
    clears the bar), or (False, None) when no server answered it with meaning (the hook then recalls
    by itself)."""
    reply = ask(directory, {"op": "recall", "prompt": prompt, "project": project, "shown": shown})
    if reply is None or "recall" not in reply:
        return False, None
    found = reply["recall"]
    if found is None:
        return True, None
    if not (isinstance(found, dict) and isinstance(found.get("text"), str) and isinstance(found.get("ids"), list)):
        return False, None
    return True, found


# -- the server's side ----------------------------------------------------------------------------
_SEARCH_ARGS: dict[str, type | tuple[type, ...]] = {
    "scopes": (list, type(None)), "k": int, "inline_embed": int, "need_vectors": bool,
    "kind": (str, type(None)), "max_tokens": (int, type(None)), "include_superseded": bool,
    "as_of": (str, type(None))}
_DEFAULTS = {"kind": None, "max_tokens": None, "include_superseded": False, "as_of": None}


class Lender:
    """The server's socket: answers `search` (and `ping`) for the hook of the same store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = socket_path(store.directory)
        self._sock: socket.socket | None = None
        self._ino: int | None = None
        self.warm = False
        self.thread: threading.Thread | None = None
        from .switches import embed_config_key

        self.embed_key = list(embed_config_key())  # this process's embedder, as it was when the server started
        self.version = __version__

    def start(self) -> bool:
        """Listen, unless the path cannot hold a socket or another live server already does."""
        if self.path is None or getattr(self.store, "read_only", True):
            return False
        import threading

        try:
            if os.path.lexists(self.path):
                if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                    return False  # not ours to replace
                if self._alive():
                    return False  # another server of this store lends its model already
                os.unlink(self.path)  # left by a server that was killed
            sock = listen_private(self.path, 8)
        except OSError:
            return False
        self._sock = sock
        self._ino = os.stat(self.path).st_ino
        threading.Thread(target=self._accept, name="retained-lender", daemon=True).start()
        return True

    def _alive(self) -> bool:
        import socket

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            try:
                s.connect(str(self.path))
                return True
            except OSError:
                return False

    def stop(self) -> None:
        """Stop listening; wait for a warm-up still inside onnxruntime (exiting under it aborts)."""
        import threading

        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=30)
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            if self.path is not None and os.stat(self.path).st_ino == self._ino:
                os.unlink(self.path)  # only our own: a later server may have taken the name
        except OSError:
            pass
        sock.close()

    def _accept(self) -> None:
        import threading

        while self._sock is not None:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="retained-lend", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            if not ours(conn):
                return  # only this user's hooks are answered (the socket is 0600; this holds if it is not)
            try:
                conn.settimeout(5)
                raw = b""
                while not raw.endswith(b"\n") and len(raw) <= _MAX_REQUEST:
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    raw += chunk
                reply = self.answer(raw)
                conn.sendall((json.dumps(reply, ensure_ascii=False) + "\n").encode("utf-8"))
            except OSError:
                pass

    def answer(self, raw: bytes) -> dict[str, Any]:
        try:
            req = safejson.loads(raw, max_bytes=_MAX_REQUEST + (1 << 16), errors="surrogatepass")
        except ValueError:
            return {"v": PROTOCOL, "error": "not JSON"}
        if (not isinstance(req, dict) or req.get("v") != PROTOCOL or req.get("retained") != self.version
                or req.get("embed") != self.embed_key):
            return {"v": PROTOCOL, "error": "another retained version or embedder configuration"}
        if req.get("op") == "ping":
            return {"v": PROTOCOL, "warm": self.warm}
        if req.get("op") == "recall":
            return self._recall(req)
        if req.get("op") != "search" or not isinstance(req.get("query"), str):
            return {"v": PROTOCOL, "error": "unknown request"}
        kw = {name: req[name] for name in _SEARCH_ARGS if name in req}
        if not all(isinstance(v, _SEARCH_ARGS[k]) and not (isinstance(v, bool) and _SEARCH_ARGS[k] is int)
                   for k, v in kw.items()):
            return {"v": PROTOCOL, "error": "bad arguments"}
        if kw.get("scopes") is not None and not all(isinstance(s, str) for s in kw["scopes"]):
            return {"v": PROTOCOL, "error": "bad arguments"}
        kw["inline_embed"] = min(max(kw.get("inline_embed", 16), 0), 256)
        kw = {**_DEFAULTS, "k": 8, **kw}
        try:
            result, cosines = self.store.search_scored(req["query"], **kw)
        except Exception as e:
            return {"v": PROTOCOL, "error": f"{type(e).__name__}: {e}"}
        return {"v": PROTOCOL, "result": result, "cosines": cosines}

    def _recall(self, req: dict[str, Any]) -> dict[str, Any]:
        """recall.recall's answer for the hook, from this server's store and model; refused (so the hook
        recalls by itself) when the search could not use meaning."""
        prompt, project, shown = req.get("prompt"), req.get("project"), req.get("shown")
        if not (isinstance(prompt, str) and (project is None or isinstance(project, str))
                and isinstance(shown, list) and all(isinstance(i, str) for i in shown)):
            return {"v": PROTOCOL, "error": "bad arguments"}
        from .recall import candidates, pick

        try:  # the hook decided recall is on (its switch, not this server's)
            found = candidates(self.store, prompt, project)
            if found is None:
                return {"v": PROTOCOL, "recall": None}
            if found[0].get("semantic") != "on":
                return {"v": PROTOCOL, "error": "no meaning here"}  # the hook may still have it
            block = pick(self.store, prompt, *found, project=project, shown=set(shown))
        except Exception as e:
            return {"v": PROTOCOL, "error": f"{type(e).__name__}: {e}"}
        return {"v": PROTOCOL, "recall": block}


def after_handshake(store: Store) -> Lender | None:
    """Start lending and warm the semantic tier, on a background thread; returns the lender at once."""
    from .paths import read_only_requested

    if not hasattr(store, "semantic") or read_only_requested():
        return None  # an unusable store, or a server doctor runs (it changes no file: onnxruntime writes some)
    import threading

    lender = Lender(store)

    def run() -> None:
        try:
            lender.start()
            store.semantic().warm()
        except Exception:
            pass
        lender.warm = True

    lender.thread = threading.Thread(target=run, name="retained-warm", daemon=True)
    lender.thread.start()
    return lender
