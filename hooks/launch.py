"""The plugin launcher's slow half (hooks/launch.sh is the fast half and decides where things are).

Standard library only: it runs with the system's python3 before retained is installed anywhere.

- A `retained` on PATH of this plugin's version is used (noted in the data folder, so that the next
  start takes launch.sh's fast path).
- Else a private environment is made, once, in the plugin's data folder: `python3 -m venv`, then
  `pip install` of a copy of the plugin's own source (its dependencies from the package index). Never in
  the plugin's folder: pip would write build files there, and it may be the user's checkout.
- While it is made, hooks fail open (exit 0, nothing on stdout, one line on stderr), and the server is a
  stand-in that answers the MCP handshake and tools/list at once, from the replies retained itself gives
  (retained/handshake.json), so the host's first session lists retained's tools; a tool call waits for
  the environment (up to RETAINED_PLUGIN_WAIT_S seconds), and once it is ready the stand-in starts the
  real server, replays the client's initialize to it and from then on passes every line through.

Every message goes to stderr; stdout carries the protocol (the server) or the hook's answer only.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.environ.get("RETAINED_PLUGIN_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSION = os.environ.get("RETAINED_PLUGIN_VERSION") or ""
DATA = os.environ.get("RETAINED_PLUGIN_DATA") or os.path.join(
    os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"), "retained-plugin")
ENV = os.path.join(DATA, f"env-{VERSION}")
READY = os.path.join(ENV, "ready")
LOCK = os.path.join(DATA, "build.lock")
LOG = os.path.join(DATA, "build.log")
FAILED = os.path.join(DATA, f"build-failed-{VERSION}")
RETRY_AFTER_S = 600  # a failed build is tried again by the next start this long after it failed
WAIT_S = float(os.environ.get("RETAINED_PLUGIN_WAIT_S") or 50)  # a tool call waits this long for the environment
MIN_PYTHON = (3, 10)
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # handshake versions retained speaks
# What `pip install` needs of the plugin's folder (not .git, tests, benchmarks, a .venv of the user's).
SOURCE = ("pyproject.toml", "README.md", "LICENSE", "retained", "installers", "hooks", "templates")


def say(text: str) -> None:
    try:
        sys.stderr.write(f"retained plugin: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def version_of(exe: str) -> str | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    words = (out.stdout or "").split()
    return words[-1] if out.returncode == 0 and words else None


def on_path() -> str | None:
    """A `retained` on PATH of this plugin's version (noted for launch.sh), else None."""
    exe = shutil.which("retained")
    if not exe or os.path.realpath(exe).startswith(os.path.realpath(ENV) + os.sep):
        return None
    if version_of(exe) != VERSION:
        return None
    try:
        os.makedirs(DATA, exist_ok=True)
        with open(os.path.join(DATA, f"on-path-{VERSION}"), "w") as f:
            f.write(exe)
    except OSError:
        pass
    return exe


def ready_exe() -> str | None:
    return os.path.join(ENV, "bin", "retained") if os.path.isfile(READY) else None


# -- the private environment -------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def building() -> bool:
    """Whether a live build holds the lock (a lock left by a build that died is removed). A lock with no
    pid yet is one being taken this moment: building (removing it would let a second build start)."""
    try:
        with open(LOCK) as f:
            pid = int(f.read().strip() or 0)
        age = time.time() - os.stat(LOCK).st_mtime
    except (OSError, ValueError):
        return False
    if pid and _alive(pid) or not pid and age < 10:
        return True
    try:
        os.unlink(LOCK)
    except OSError:
        pass
    return False


def failed_recently() -> str | None:
    try:
        if time.time() - os.stat(FAILED).st_mtime < RETRY_AFTER_S:
            with open(FAILED) as f:
                return f.read().strip() or "the build failed"
    except OSError:
        pass
    return None


_STARTED: list[float] = []  # when this process last started a build (its lock may not be taken yet)


def start_build() -> None:
    """Start making the environment in the background, unless it is ready, being made, or just failed."""
    if ready_exe() or building() or failed_recently() or _STARTED and time.monotonic() - _STARTED[-1] < 30:
        return
    _STARTED.append(time.monotonic())
    os.makedirs(DATA, exist_ok=True)
    with open(LOG, "ab") as log:
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "_build"], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True, close_fds=True)
    say(f"first run of version {VERSION}: making a private environment in {ENV} "
        f"(once, a minute or two; the log is {LOG})")


def build() -> int:
    """Make the environment here and now (under the lock). 0 when it is ready."""
    os.makedirs(DATA, exist_ok=True)
    try:
        fd = os.open(LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        if building():
            return wait_ready(None)
        return build()  # the lock of a build that died was just removed
    start = time.monotonic()
    try:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        if ready_exe():
            return 0
        if tuple(sys.version_info[:2]) < MIN_PYTHON:  # this file runs under any python3; retained needs 3.10
            raise OSError(f"retained needs Python 3.10 or newer and python3 here is {sys.version.split()[0]}: "
                          "put a newer python3 first on PATH, or set RETAINED_PLUGIN_PYTHON")
        src = os.path.join(DATA, f"src-{VERSION}")
        for path in (ENV, src):
            shutil.rmtree(path, ignore_errors=True)
        os.makedirs(src)
        for name in SOURCE:
            here = os.path.join(ROOT, name)
            if os.path.isdir(here):
                shutil.copytree(here, os.path.join(src, name),
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
            elif os.path.isfile(here):
                shutil.copy2(here, os.path.join(src, name))
        say(f"making {ENV} with {sys.executable} ({sys.version.split()[0]})")
        subprocess.run([sys.executable, "-m", "venv", ENV], check=True, stdin=subprocess.DEVNULL,
                       stdout=sys.stderr)
        pip = [os.path.join(ENV, "bin", "python"), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
               "--quiet", src]
        subprocess.run(pip, check=True, stdin=subprocess.DEVNULL, stdout=sys.stderr)
        shutil.rmtree(src, ignore_errors=True)
        took = time.monotonic() - start
        with open(READY, "w") as f:
            f.write(f"{VERSION} {took:.1f}\n")
        for name in os.listdir(DATA):  # older versions' environments and notes
            if name.startswith(("env-", "src-", "on-path-", "build-failed-")) and not name.endswith(VERSION):
                shutil.rmtree(os.path.join(DATA, name), ignore_errors=True)
                if os.path.isfile(os.path.join(DATA, name)):
                    os.unlink(os.path.join(DATA, name))
        try:
            os.unlink(FAILED)
        except OSError:
            pass
        say(f"made the private environment of version {VERSION} in {took:.1f} s: {ENV}")
        return 0
    except (OSError, subprocess.SubprocessError) as e:
        took = time.monotonic() - start
        why = f"making {ENV} failed after {took:.1f} s ({type(e).__name__}: {e}); the log is {LOG}"
        say(why)
        try:
            with open(FAILED, "w") as f:
                f.write(why + "\n")
        except OSError:
            pass
        return 1
    finally:
        try:
            os.unlink(LOCK)
        except OSError:
            pass


def wait_ready(limit: float | None) -> int:
    deadline = None if limit is None else time.monotonic() + limit
    while not ready_exe():
        if not building() and (failed_recently() or not ready_exe()):
            return 0 if ready_exe() else 1
        if deadline is not None and time.monotonic() > deadline:
            return 1
        time.sleep(0.25)
    return 0


# -- the stand-in server ---------------------------------------------------------------------------------
def _snapshot() -> dict:
    try:
        with open(os.path.join(ROOT, "retained", "handshake.json"), encoding="utf-8") as f:
            return json.load(f)["replies"]["handshake"]
    except (OSError, ValueError, KeyError):
        return {"initialize": {"capabilities": {"tools": {"listChanged": False}},
                               "serverInfo": {"name": "retained", "version": VERSION}},
                "tools/list": {"tools": []}}


NOT_YET = ("retained is making its private environment (the first run of this version of the plugin); "
           "its tools answer as soon as that is done, usually within a minute or two. Try again shortly.")
INSTRUCTIONS = ("retained is this project's long-term memory (memory_write, memory_search, memory_list, "
                "memory_get, memory_checkpoint). " + NOT_YET)


class StandIn:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.snapshot = _snapshot()
        self.out = sys.stdout.buffer
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.initialize: dict | None = None
        self.initialized: bytes | None = None
        self.pending: list[bytes] = []
        self.since: float | None = None

    def reply(self, rid: object, result: object = None, error: dict | None = None) -> None:
        msg: dict = {"jsonrpc": "2.0", "id": rid}
        if error is not None:
            msg["error"] = error
        else:
            msg["result"] = result
        self.out.write(json.dumps(msg, ensure_ascii=False).encode("utf-8") + b"\n")
        self.out.flush()

    def read(self) -> None:
        for line in sys.stdin.buffer:
            self.lines.put(line)
        self.lines.put(None)

    def answer(self, line: bytes) -> bool:
        """Answer `line` here; False when it must wait for the real server."""
        try:
            msg = json.loads(line)
        except ValueError:
            return True
        if not isinstance(msg, dict):
            return True
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize" and rid is not None:
            self.initialize = msg
            params = msg.get("params")
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            result = dict(self.snapshot["initialize"], instructions=INSTRUCTIONS,
                          protocolVersion=asked if asked in VERSIONS else VERSIONS[-1])
            self.reply(rid, result)
        elif method == "notifications/initialized":
            self.initialized = line
        elif rid is None:
            pass  # other notifications (cancelled, progress) concern nothing the stand-in runs
        elif method == "ping":
            self.reply(rid, {})
        elif method in self.snapshot:
            self.reply(rid, self.snapshot[method])
        elif method == "tools/call":
            return False  # waits for the real server
        else:
            # Anything else now, at once: a client that probes first (Claude Code asks `server/discover`
            # of the 2026 protocol, then falls back to initialize) must not wait for an environment.
            self.reply(rid, error={"code": -32601, "message": f"method not found: {method}"})
        return True

    def refuse_pending(self, why: str) -> None:
        for line in self.pending:
            msg = json.loads(line)
            if msg.get("method") == "tools/call":
                self.reply(msg.get("id"), {"content": [{"type": "text", "text": why}], "isError": True})
            else:
                self.reply(msg.get("id"), error={"code": -32603, "message": why})
        self.pending, self.since = [], None

    def run(self) -> int:
        threading.Thread(target=self.read, daemon=True).start()
        while True:
            exe = ready_exe()
            if exe:
                return self.hand_over(exe)
            try:
                line = self.lines.get(timeout=0.25)
            except queue.Empty:
                line = b""
            if line is None:
                return 0  # the host closed stdin before the environment was ready
            if line and not self.answer(line):
                self.pending.append(line)
                self.since = self.since or time.monotonic()
            if self.pending and self.since is not None:
                failed = failed_recently()
                if failed:
                    self.refuse_pending(f"retained could not make its environment: {failed}")
                elif time.monotonic() - self.since > WAIT_S:
                    self.refuse_pending(NOT_YET)
                elif not building():
                    start_build()

    def hand_over(self, exe: str) -> int:
        """Start the real server, replay the client's initialize to it, then pass every line through."""
        proc = subprocess.Popen([exe, *self.argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        if self.initialize is not None:
            first = dict(self.initialize, id="retained-plugin-initialize")
            proc.stdin.write(json.dumps(first).encode("utf-8") + b"\n")
            proc.stdin.flush()
            for raw in proc.stdout:  # the real server's reply to the replayed initialize: the client has one
                try:
                    if json.loads(raw).get("id") == "retained-plugin-initialize":
                        break
                except (ValueError, AttributeError):
                    continue
            if self.initialized is not None:
                proc.stdin.write(self.initialized)
        for line in self.pending:
            proc.stdin.write(line)
        proc.stdin.flush()
        out = proc.stdout

        def pump() -> None:
            for raw in out:
                self.out.write(raw)
                self.out.flush()

        pumping = threading.Thread(target=pump, daemon=True)
        pumping.start()
        try:
            while True:
                more = self.lines.get()
                if more is None:
                    break
                proc.stdin.write(more)
                proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        try:
            proc.stdin.close()
        except OSError:
            pass
        code = proc.wait()
        pumping.join(timeout=5)
        return code


def main(argv: list[str]) -> int:
    if argv[:1] == ["_build"]:
        return build()
    if not VERSION:
        say("run hooks/launch.sh, not this file (it says where the plugin and its data are)")
        return 0 if argv[:1] == ["hook"] else 2
    exe = ready_exe() or on_path()
    if exe:
        os.execv(exe, [exe, *argv])
    if argv[:1] == ["hook"]:
        start_build()
        if building():
            say("hook skipped: the private environment is being made")
        return 0  # fail open: a hook never stops a session
    if argv[:1] == ["serve"]:
        start_build()
        return StandIn(argv).run()
    # anything else (`doctor`, `write`, ...): make the environment here and now, then run it
    code = build() if not building() else wait_ready(None)
    exe = ready_exe()
    if code or not exe:
        return 1
    os.execv(exe, [exe, *argv])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
