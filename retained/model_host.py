"""One model process per user, shared by every `retained serve` of that user.

Each agent host starts its own server, and a server that loaded the model itself held ~40 MB of it
(onnxruntime, the session, the tokenizer): three open agents paid for it three times. With the model
host, a server embeds by asking one process of this user over a unix socket, and imports neither
onnxruntime nor the tokenizer (`HostedEmbedder`, below).

* Where: `m-<hash>.sock` (mode 0600) in a directory of this user only (0700): `$XDG_RUNTIME_DIR/retained`
  when set, else `host/` in the user cache dir that holds `model-verified.json`. The hash covers the
  protocol, retained's version and the embedder configuration (`config_key`): a host of another model
  or version has another name and is never asked; a request stamped otherwise is refused anyway.
* Who starts it: the first server that needs a vector and finds none answering, under a lock in that
  directory (two servers starting at once make one host), as a detached process
  (`python -m retained.model_host`, a session of its own, output to `m-<hash>.log` there). The server
  waits START_WAIT_S for it to answer, else embeds in-process as before.
* How long it lives: exactly as long as some server uses it. Each server holds a **lease** for its
  whole life: one connection (`{"op": "lease"}`), taken before its first vector from the host and again
  after a host was replaced, that the server never closes; its end (exit, crash, SIGKILL: the kernel
  closes it) is seen by the host at once. With no lease held for GRACE_S (a host just started: for
  START_WAIT_S, the server that started it takes one next) the host exits, removing its socket file.
  It also exits after RETAINED_EMBED_IDLE_S seconds without a request (default 600; 0: never)
  even with leases held (the servers start a new one on their next need), or when its socket file is
  removed or taken by another host.
* What it answers: one request per connection, a JSON line `{"v", "retained", "embed", "op", "texts"}`
  (at most MAX_TEXTS texts, each cut to what the tokenizer reads, MAX_REQUEST bytes in all); the reply is
  a JSON line `{"v", "n", "dim"}` then n x dim float32 (little-endian), or `{"v", "error"}`. A lease
  (`"op": "lease"`) is answered `{"v", "pid", "leased": true}` and then held open. `"op": "status"`
  (`retained doctor`) is answered `{"v", "pid", "ready", "leases"}` and, unlike every other request,
  does not count as use: a look keeps no idle host alive.

A host that is gone, refuses, or does not answer within the timeouts raises `HostUnavailable`; the
embedder then starts a new host once (when the old one is gone) or embeds in-process. Nothing here
is on the write path: a record is appended before anything is embedded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__, safejson
from .embed import (
    LOCAL_DIM,
    RETRY_AFTER_S,
    LocalEmbedder,
    Unavailable,
    config_key,
    idle_seconds,
    numpy_module,
    one_heap,
)
from .paths import others_can_write
from .warm import listen_private, ours

if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 1
MAX_TEXTS = 512  # texts per request (retained asks for at most NEW_BATCH = 512 at a time)
MAX_REQUEST = 16 << 20  # bytes of one request line: 512 texts of 4096 characters, escaped
MAX_CONNECTIONS = 8  # requests answered at once; more are refused (the asker embeds in-process)
CONNECT_S = 1.0  # a unix connect either succeeds at once or nobody listens
START_WAIT_S = 5.0  # how long a server waits for a host it started (or another server starts) to answer
REPLY_BASE_S = 10.0  # a reply may wait for the model to load (0.3-0.5 s, more on a loaded machine) ...
REPLY_PER_TEXT_S = 0.05  # ... and for its texts (about 200 a second on two cores)
POLL_S = 2.0  # how often an idle host looks at the clock and at its socket file
GRACE_S = 0.5  # a host with no lease held exits this long after the last one ended (or its last request)
MAX_LEASES = 256  # leases held at once (one per server); more are refused (that server embeds unleased)
_SUN_PATH_MAX = 100  # sockaddr_un holds 104 (macOS) to 108 (Linux) bytes with its terminator


class HostUnavailable(Unavailable):
    """The host did not embed; `gone` when nobody answered (a new host may be started)."""

    def __init__(self, reason: str, gone: bool) -> None:
        super().__init__(reason)
        self.gone = gone


def wanted(env: dict[str, str]) -> bool:
    """RETAINED_MODEL_HOST (default on): off embeds in the server's own process, as before."""
    from .switches import switch

    return switch("RETAINED_MODEL_HOST", True, env)


def _identity(env: dict[str, str]) -> list[Any]:
    return [PROTOCOL, __version__, list(config_key(env))]


def host_dir(env: dict[str, str], create: bool = True) -> Path | None:
    """This user's directory for the host's socket, lock and log (made 0700), or None if none is usable
    (without `create`, None as well when it is not there: a look that changes nothing)."""
    d = _where(env)
    try:
        if create:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
            return None  # a symlink, or someone else's: not a place for this user's socket
        if st.st_mode & 0o077:
            if not create:
                return None
            os.chmod(d, 0o700)
    except OSError:
        return None
    if others_can_write(d, itself=False) is not None:
        return None  # another user could put another folder (and a socket of theirs) in its place
    return d


def _where(env: dict[str, str]) -> Path:
    from .embed import cache_dir

    runtime = env.get("XDG_RUNTIME_DIR", "").strip()
    usable = runtime and os.path.isabs(runtime) and os.path.isdir(runtime)
    return Path(runtime) / "retained" if usable else cache_dir() / "host"


def socket_path(env: dict[str, str], create: bool = True) -> Path | None:
    """Where the host of this embedder configuration and version listens, or None where no unix socket
    can be used (no AF_UNIX, a path too long for one, no private directory; without `create`, a directory
    not made yet)."""
    if not hasattr(socket, "AF_UNIX"):
        return None
    d = host_dir(env, create)
    if d is None:
        return None
    digest = hashlib.sha256(json.dumps(_identity(env)).encode()).hexdigest()[:12]
    path = d / f"m-{digest}.sock"
    return path if len(os.fsencode(str(path))) < _SUN_PATH_MAX else None


# -- the asking side ------------------------------------------------------------------------------
def _exchange(path: Path, request: dict[str, Any], timeout: float) -> tuple[dict[str, Any], bytes]:
    """(header, payload) of the host's reply; HostUnavailable saying why not."""
    from .wordpiece import MAX_CHARS

    if "texts" in request:
        request = dict(request, texts=[t[:MAX_CHARS] for t in request["texts"]])
    data = (json.dumps(request, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
    if len(data) > MAX_REQUEST:
        raise HostUnavailable("request too large for the model host", gone=False)
    deadline = time.monotonic() + timeout
    with _connect(path) as s:
        try:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            s.sendall(data)
            f = s.makefile("rb")
            head = safejson.loads(f.readline(1 << 16) or b"null", max_bytes=1 << 16)
            if not isinstance(head, dict) or head.get("v") != PROTOCOL:
                raise HostUnavailable("model host closed the connection or answered nonsense", gone=True)
            if "error" in head:
                raise HostUnavailable(f"model host refused: {head['error']}", gone=False)
            size = int(head.get("n", 0)) * int(head.get("dim", 0)) * 4
            payload = f.read(size) if size > 0 else b""
        except TimeoutError:
            raise HostUnavailable(f"model host gave no answer within {timeout:.0f} s", gone=False) from None
        except (OSError, ValueError, TypeError) as e:
            raise HostUnavailable(f"model host connection failed ({e})", gone=True) from None
    if len(payload) != size:
        raise HostUnavailable("model host closed the connection mid-reply", gone=True)
    return head, payload


def _connect(path: Path) -> socket.socket:
    """A connection to the host at `path`; HostUnavailable (gone when nobody answers there)."""
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as e:
        raise HostUnavailable(f"no unix socket ({e})", gone=False) from None
    try:
        s.settimeout(CONNECT_S)
        s.connect(str(path))
    except OSError as e:
        s.close()
        raise HostUnavailable(f"model host not answering ({e.strerror or e})", gone=True) from None
    if not ours(s):
        s.close()
        raise HostUnavailable("the model host's socket is another user's: not asked", gone=False)
    return s


def _stamped(env: dict[str, str], op: str, **kw: Any) -> dict[str, Any]:
    return {"v": PROTOCOL, "retained": __version__, "embed": list(config_key(env)), "op": op, **kw}


def ping(path: Path, env: dict[str, str], timeout: float = 1.0) -> dict[str, Any] | None:
    """The host's `{"pid", "ready"}`, or None when no host of this configuration answers."""
    try:
        head, _ = _exchange(path, _stamped(env, "ping"), timeout)
    except HostUnavailable:
        return None
    return head


def status(env: dict[str, str]) -> str:
    """How the model host of this configuration stands, for `retained doctor`: starts nothing, makes no file."""
    if not wanted(env):
        return "model host off (RETAINED_MODEL_HOST=off): each server loads the model itself"
    if not hasattr(socket, "AF_UNIX"):
        return "no model host on this system (no unix sockets): each server loads the model itself"
    path = socket_path(env, create=False)
    foreign = others_can_write(_where(env), itself=False) if path is None else None
    if foreign is not None:
        return (f"no model host: another user can change the folder its socket would be in ({foreign}); "
                "each server loads the model itself")
    try:
        answer = _exchange(path, _stamped(env, "status"), 1.0)[0] if path is not None else None
    except HostUnavailable:
        answer = None
    if answer is None:
        return "no model host running: the first server that needs a vector starts one, which all servers share"
    loading = "" if answer.get("ready", True) else ", loading the model"
    leases = answer.get("leases")
    servers = f"{leases} server{'' if leases == 1 else 's'}" if isinstance(leases, int) else "servers"
    return f"model host running (pid {answer.get('pid')}{loading}), shared by {servers}"


def lease(path: Path, env: dict[str, str], timeout: float = START_WAIT_S) -> socket.socket:
    """A lease on the host at `path`: a connection the host keeps until this side closes it (or exits,
    however). The host lives while some lease is held. HostUnavailable (gone when nobody answers)."""
    s = _connect(path)
    try:
        try:
            s.settimeout(timeout)
            s.sendall((json.dumps(_stamped(env, "lease")) + "\n").encode())
            line = b""
            while not line.endswith(b"\n") and len(line) < 1 << 16:
                chunk = s.recv(1)  # byte by byte: nothing may be left in a buffer this side never reads
                if not chunk:
                    break
                line += chunk
            head = safejson.loads(line or b"null", max_bytes=1 << 16)
        except TimeoutError:
            raise HostUnavailable(f"model host gave no lease within {timeout:.0f} s", gone=False) from None
        except (OSError, ValueError) as e:
            raise HostUnavailable(f"model host connection failed ({e})", gone=True) from None
        if not isinstance(head, dict) or head.get("v") != PROTOCOL:
            raise HostUnavailable("model host closed the connection or answered nonsense", gone=True)
        if not head.get("leased"):
            raise HostUnavailable(f"model host refused a lease: {head.get('error')}", gone=False)
    except BaseException:
        s.close()
        raise
    s.settimeout(None)
    return s


def held(lease_sock: socket.socket | None) -> bool:
    """Whether a lease is still held: the host never writes on it, so readable means closed."""
    if lease_sock is None or lease_sock.fileno() < 0:
        return False
    try:
        readable, _, _ = select.select([lease_sock], [], [], 0)
        return not readable or lease_sock.recv(1, socket.MSG_PEEK) != b""
    except (OSError, ValueError):
        return False


def embed(path: Path, env: dict[str, str], texts: list[str]) -> Any:
    """(n, LOCAL_DIM) float32 vectors of `texts` from the host, L2-normalised as LocalEmbedder's."""
    np = numpy_module()
    parts = []
    for start in range(0, len(texts), MAX_TEXTS):
        chunk = texts[start:start + MAX_TEXTS]
        timeout = REPLY_BASE_S + REPLY_PER_TEXT_S * len(chunk)
        head, payload = _exchange(path, _stamped(env, "embed", texts=chunk), timeout)
        if head.get("n") != len(chunk) or head.get("dim") != LOCAL_DIM:
            raise HostUnavailable("model host answered the wrong shape", gone=False)
        parts.append(_checked(np, np.frombuffer(payload, dtype="<f4").reshape(len(chunk), LOCAL_DIM), chunk))
    if not parts:
        return np.zeros((0, LOCAL_DIM), dtype=np.float32)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class BadVectors(HostUnavailable):
    """The host answered vectors no embedder makes: none of them is used (the texts are embedded in this
    process instead), and `bad` says how many were unfit."""

    def __init__(self, bad: int, why: str) -> None:
        super().__init__(f"model host answered {bad} unfit vector{'s' if bad != 1 else ''} ({why}): not used",
                         gone=False)
        self.bad = bad


def _checked(np: Any, vecs: Any, texts: list[str]) -> Any:
    """`vecs` when every row is a vector of the model (finite, unit length: kept.unit_rows) and three or
    more distinct texts did not all get one same vector (a squatter's constant answer); else BadVectors."""
    from .index.kept import unit_rows

    ok = unit_rows(vecs, LOCAL_DIM)
    if not ok.all():
        raise BadVectors(int((~ok).sum()), "not finite, or not of unit length")
    if len(vecs) > 2 and bool((vecs == vecs[0]).all()) and len(_as_read(texts)) > 2:
        raise BadVectors(len(texts), "one same vector for different texts")
    return vecs


def _as_read(texts: list[str]) -> set[str]:
    """The texts as the model tells them apart, nearly (case and spacing aside, as far as it reads):
    three of them that differ so and got one same vector were not embedded by the model."""
    from .wordpiece import MAX_CHARS

    return {" ".join(t[:MAX_CHARS].split()).lower()[:512] for t in texts}


def start(path: Path, env: dict[str, str]) -> None:
    """Make sure a host answers at `path`: start one unless another is there or being started (under a
    lock in its directory); waits at most ~2 x START_WAIT_S. HostUnavailable when none answers."""
    from . import durable

    lock = path.with_suffix(".lock")
    try:
        with durable.try_locked(lock, START_WAIT_S) as held:
            if ping(path, env) is not None:
                return
            if not held:
                raise HostUnavailable("another server is starting the model host and it does not answer",
                                      gone=False)
            _spawn(path, env)
            deadline = time.monotonic() + START_WAIT_S
            while time.monotonic() < deadline:
                if ping(path, env, timeout=0.5) is not None:
                    return
                time.sleep(0.05)
    except OSError as e:
        raise HostUnavailable(f"the model host's lock cannot be taken ({e.strerror or e})", gone=False) from None
    raise HostUnavailable(f"the model host did not start within {START_WAIT_S:.0f} s", gone=False)


def _spawn(path: Path, env: dict[str, str]) -> None:
    import subprocess

    log = path.with_suffix(".log")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "retained.model_host"], stdin=subprocess.DEVNULL,
                                stdout=fd, stderr=fd, cwd=str(path.parent), env=dict(env),
                                start_new_session=True, close_fds=True)
    except OSError as e:
        raise HostUnavailable(f"the model host could not be started ({e})", gone=False) from None
    finally:
        os.close(fd)
    # Reaped when it ends (else it stays a zombie of this server until the server exits).
    threading.Thread(target=proc.wait, name="retained-host-reaper", daemon=True).start()


class HostedEmbedder(LocalEmbedder):
    """The local model, run by this user's model host (this module) instead of this process.

    Same `key` and `dim` as LocalEmbedder, and the same vectors: nothing is embedded again when a store
    moves from one to the other. This process imports neither onnxruntime nor the tokenizer while the
    host answers. A host that is gone is started again once; when that fails, or the host refuses or is
    too slow, this process embeds by itself (LocalEmbedder's way, dropped when idle like it) and asks
    the host again after RETRY_AFTER_S. Before its first vector from a host, this process takes a lease
    on it and holds it until it exits: the host lives no longer than the servers that use it."""

    def __init__(self, env: dict[str, str], path: Path) -> None:
        super().__init__(env)
        self.env = env
        self.host_path = path
        self._host_down_until = 0.0
        self.host_reason: str | None = None  # why the last texts were embedded in-process, if they were
        self.bad_vectors = 0  # vectors the host answered that were unfit (never used: embedded here instead)
        self._lease: socket.socket | None = None
        self._lease_lock = threading.Lock()

    def runtime(self) -> None:
        numpy_module()  # onnxruntime is the host's; an in-process fallback that cannot import it says so

    def embed(self, texts: list[str]) -> Any:
        if time.monotonic() >= self._host_down_until:
            try:
                try:
                    self._hold_lease()
                    return embed(self.host_path, self.env, texts)
                except HostUnavailable as e:
                    if not e.gone:
                        raise
                    start(self.host_path, self.env)  # gone (never started, killed, idle): once more
                    self._hold_lease()
                    return embed(self.host_path, self.env, texts)
            except HostUnavailable as e:
                self.host_reason = str(e)
                self.bad_vectors += getattr(e, "bad", 0)
                self._host_down_until = time.monotonic() + RETRY_AFTER_S
        return super().embed(texts)

    def _hold_lease(self) -> None:
        """Hold a lease on the host at our path (a new one when the last ended with its host); raises
        HostUnavailable(gone) when nobody answers there. A host that refuses the lease (too many) still
        embeds: this server then merely does not keep it alive."""
        with self._lease_lock:
            if held(self._lease):
                return
            if self._lease is not None:
                self._lease.close()
                self._lease = None
            try:
                self._lease = lease(self.host_path, self.env)
            except HostUnavailable as e:
                if e.gone:
                    raise


def hosted_or_local(env: dict[str, str]) -> LocalEmbedder:
    """The embedder of `retained serve`: through the user's model host when it is wanted and a socket can be
    used, else the model in this process."""
    path = socket_path(env) if wanted(env) else None
    return LocalEmbedder(env) if path is None else HostedEmbedder(env, path)


# -- the host ------------------------------------------------------------------------------------
class Host:
    """The model host's socket and its loop; `run` returns once no lease is held (GRACE_S after the
    last ended), idle for `idle_s`, or displaced."""

    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path = path
        self.env = env
        self.identity = {"retained": __version__, "embed": list(config_key(env))}
        self.model = LocalEmbedder(env)
        self.idle_s = idle_seconds(env)
        self.last = time.monotonic()  # the last request (any kind) ended
        self.ready = False
        self.leases = 0
        self.leased_once = False  # before the first lease, the server that started us has START_WAIT_S
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._ino: int | None = None
        self._wake_r, self._wake_w = socket.socketpair()  # a lease's end wakes the loop at once
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def bind(self) -> bool:
        """Listen at the path, replacing a socket file left by a host that died; False if another
        host answers there or the path is not a socket."""
        if os.path.lexists(self.path):
            if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                return False
            if ping(self.path, self.env, timeout=0.5) is not None:
                return False
            os.unlink(self.path)
        sock = listen_private(self.path, 16)
        self._sock = sock
        self._ino = os.stat(self.path).st_ino
        return True

    def load(self) -> None:
        """Load the model now: the server that started the host asks for a vector next."""
        with contextlib.suppress(Unavailable):
            self.model.embed(["warm up"])
        self.ready = True

    def _mine(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self._ino
        except OSError:
            return False

    def _left(self, now: float) -> float | None:
        """Seconds until this host should end (<= 0: now), or None while it has no reason to."""
        with self._busy_lock:
            if self._busy:
                return None
            ends = []
            if self.idle_s > 0:
                ends.append(self.last + self.idle_s - now)
            if self.leases == 0:
                ends.append(self.last + (GRACE_S if self.leased_once else START_WAIT_S) - now)
            return min(ends) if ends else None

    def run(self) -> None:
        assert self._sock is not None
        self._sock.setblocking(False)
        checked = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                left = self._left(now)
                if left is not None and left <= 0:
                    return
                if now - checked >= POLL_S:
                    if not self._mine():
                        return
                    checked = now
                wait = POLL_S if left is None else min(POLL_S, left + 0.01)
                readable, _, _ = select.select([self._sock, self._wake_r], [], [], wait)
                if self._wake_r in readable:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                if self._sock not in readable:
                    continue
                try:
                    conn, _ = self._sock.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                conn.setblocking(True)
                if not ours(conn):
                    conn.close()  # another user's process (the socket is 0600; this holds if it is not)
                    continue
                if not self._slots.acquire(blocking=False):
                    self._reply(conn, {"v": PROTOCOL, "error": "busy"})
                    conn.close()
                    continue
                with self._busy_lock:
                    self._busy += 1  # counted here, not in its thread: the loop must not end meanwhile
                threading.Thread(target=self._serve, args=(conn,), name="retained-host", daemon=True).start()
        finally:
            if self._mine():
                with contextlib.suppress(OSError):
                    os.unlink(self.path)  # before closing: a new asker starts a new host, never waits
            self._sock.close()

    def _done(self, counts: bool = True) -> None:
        """One request (or a lease's opening) is over; unless it `counts`, the host stays as idle as it was."""
        with self._busy_lock:
            self._busy -= 1
            if counts:
                self.last = time.monotonic()
        self._slots.release()

    def _serve(self, conn: socket.socket) -> None:
        done = False
        look = False
        try:
            with conn:
                conn.settimeout(30)
                with contextlib.suppress(OSError, ValueError):
                    raw = conn.makefile("rb").readline(MAX_REQUEST + 1)
                    head, payload = self.answer(raw)
                    look = "leases" in head  # the status op's reply
                    if head.get("leased"):
                        done = True
                        self._done()
                        self._hold(conn, head)
                        return
                    conn.sendall((json.dumps(head) + "\n").encode() + payload)
        finally:
            if not done:
                self._done(counts=not look)

    def _hold(self, conn: socket.socket, head: dict[str, Any]) -> None:
        """Keep a lease until its server closes it (exit, crash, SIGKILL), then wake the loop."""
        with self._busy_lock:
            if self.leases >= MAX_LEASES:
                head = {"v": PROTOCOL, "error": f"more than {MAX_LEASES} leases"}
            else:
                self.leases += 1
                self.leased_once = True
        if "error" in head:
            self._reply(conn, head)
            return
        try:
            conn.settimeout(None)
            conn.sendall((json.dumps(head) + "\n").encode())
            while conn.recv(4096):
                pass  # a server never writes on its lease; whatever it sends is dropped
        except OSError:
            pass
        finally:
            with self._busy_lock:
                self.leases -= 1
                self.last = time.monotonic()
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

    @staticmethod
    def _reply(conn: socket.socket, head: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            conn.sendall((json.dumps(head) + "\n").encode())

    def answer(self, raw: bytes) -> tuple[dict[str, Any], bytes]:
        """(reply header, float32 payload) for one request line."""
        from .wordpiece import MAX_CHARS

        if len(raw) > MAX_REQUEST or not raw.endswith(b"\n"):
            return {"v": PROTOCOL, "error": "request too large or cut short"}, b""
        try:
            req = safejson.loads(raw, max_bytes=MAX_REQUEST + 1, errors="surrogatepass")
        except ValueError:
            return {"v": PROTOCOL, "error": "not JSON"}, b""
        if (not isinstance(req, dict) or req.get("v") != PROTOCOL or req.get("retained") != self.identity["retained"]
                or req.get("embed") != self.identity["embed"]):
            return {"v": PROTOCOL, "error": "another retained version or embedder configuration"}, b""
        if req.get("op") == "ping":
            return {"v": PROTOCOL, "pid": os.getpid(), "ready": self.ready}, b""
        if req.get("op") == "status":  # `retained doctor`'s look: it keeps no idle host alive (see _serve)
            with self._busy_lock:
                leases = self.leases
            return {"v": PROTOCOL, "pid": os.getpid(), "ready": self.ready, "leases": leases}, b""
        if req.get("op") == "lease":
            return {"v": PROTOCOL, "pid": os.getpid(), "leased": True}, b""
        texts = req.get("texts")
        if req.get("op") != "embed" or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return {"v": PROTOCOL, "error": "unknown request"}, b""
        if len(texts) > MAX_TEXTS:
            return {"v": PROTOCOL, "error": f"more than {MAX_TEXTS} texts"}, b""
        try:
            vecs = self.model.embed([t[:MAX_CHARS] for t in texts]) if texts else None
        except Unavailable as e:
            return {"v": PROTOCOL, "error": str(e)}, b""
        if vecs is None:
            return {"v": PROTOCOL, "n": 0, "dim": LOCAL_DIM}, b""
        return {"v": PROTOCOL, "n": len(texts), "dim": LOCAL_DIM}, vecs.astype("<f4").tobytes()


def main() -> int:
    """The host process: listen, load the model, answer while a lease is held and until idle. Exit 0
    when another host answers."""
    one_heap()  # before any thread: a model's freed memory goes back to the system
    env = dict(os.environ)
    path = socket_path(env)
    if path is None:
        print("retained model host: no private directory or unix socket here", file=sys.stderr)
        return 2
    host = Host(path, env)
    try:
        if not host.bind():
            return 0
    except OSError as e:
        print(f"retained model host: cannot listen at {path}: {e.strerror or e}", file=sys.stderr)
        return 2
    threading.Thread(target=host.load, name="retained-host-load", daemon=True).start()
    host.run()
    return 0


if __name__ == "__main__":
    from retained.model_host import main as _main  # the package's module, not a second copy as __main__

    raise SystemExit(_main())
