"""Team memory test kit: bare remotes, a `git daemon` on 127.0.0.1, and machines.

A machine is what a teammate's computer is to retained: its own HOME (with its own `user.name` and
`user.email` in ~/.gitconfig), its own store (a real `Store`, so records are the log's own lines) and
its own team directory. Its outgoing records are chosen from its log the way phase 2's store will:
kinds decision/convention/fact/todo, and retractions of them; its purge records become purge requests.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retained import records
from retained.team import git as team_git
from retained.team import state, wlog
from retained.team.sync import SEGMENT_LINES, PurgeRequest, SyncResult, sync

SHARED_KINDS = ("decision", "convention", "fact", "todo")
PROJECT = "example.com/acme/shop"
HELPER = Path(__file__).with_name("team_machine.py")


def read_log(store_dir: Path) -> list[dict]:
    path = store_dir / "log.jsonl"
    return [json.loads(raw) for raw in path.read_bytes().split(b"\n")[:-1]] if path.exists() else []


def outgoing_of(log: list[dict]) -> tuple[list[dict], list[PurgeRequest]]:
    """What of a local log a sync is given: shared kinds, retractions of them, purges as requests."""
    recs, purges = [], []
    shared = set()
    for rec in log:
        if records.is_tombstone(rec):
            continue
        if rec["kind"] in SHARED_KINDS:
            recs.append(rec)
            shared.add(rec["id"])
        elif rec["kind"] == records.FORGET_KIND and rec.get("action") == "purge":
            purges.append(PurgeRequest(rec["id"], tuple(p["id"] for p in rec["purged"]), rec["ts"], rec.get("reason")))
        elif rec["kind"] == records.FORGET_KIND and set(rec.get("targets", [])) & shared:
            recs.append(rec)
    return recs, purges


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, input: bytes | None = None,
        check: bool = True) -> subprocess.CompletedProcess[bytes]:
    full = {**team_git.environment(), **(env or {})}
    return subprocess.run(["git", *args], cwd=cwd, env=full, input=input, capture_output=True, check=check, timeout=60)


def bare_remote(path: Path) -> str:
    git("init", "--bare", "--quiet", str(path))
    return path.as_uri()


def all_objects(git_dir: Path) -> bytes:
    """Every object of a repository, reachable or not, concatenated (`cat-file --batch-all-objects`)."""
    return git("--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch").stdout


def reachable_objects(git_dir: Path, ref: str = team_git.MEMORY_REF) -> bytes:
    """Every object reachable from `ref`: commits, trees and blobs of its whole history."""
    listing = git("--git-dir", str(git_dir), "rev-list", "--objects", ref).stdout.decode().split("\n")
    oids = "\n".join(line.split()[0] for line in listing if line.strip()) + "\n"
    return git("--git-dir", str(git_dir), "cat-file", "--batch", input=oids.encode()).stdout


def remote_log(git_dir: Path, writer: str, ref: str = team_git.MEMORY_REF) -> bytes:
    """A writer's log on the memory ref of a repository: its segments joined, as a reader does."""
    from retained.team import verifier

    return verifier.writer_logs(verifier.read_ref(str(git_dir), ref), 2).get(writer, b"")


def put_remote_log(git_dir: Path, writer: str, data: bytes, *, ref: str = team_git.MEMORY_REF,
                   to: str | None = None, segment_lines: int = SEGMENT_LINES) -> str:
    """What a person (or a broken tool) outside retained could do: put other bytes in a writer's log,
    cut into segments of `segment_lines` lines, in a commit on top of `ref`, and set `to` (default:
    `ref`, a forced update) to it. Returns the commit."""
    g = ["--git-dir", str(git_dir)]
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]  # what followed the last newline: a torn line, or nothing
    if not lines[-1]:
        lines.pop()
    segments = []
    for n in range(0, len(lines), segment_lines):
        blob = git(*g, "hash-object", "-w", "--stdin", input=b"".join(lines[n:n + segment_lines])).stdout.decode().strip()
        segments.append(f"100644 blob {blob}\t{n // segment_lines:06d}.jsonl\n")
    log_tree = git(*g, "mktree", input="".join(segments).encode()).stdout.decode().strip()
    others = [line + "\n" for line in git(*g, "ls-tree", f"{ref}:writers").stdout.decode().splitlines()
              if not line.endswith(f"\t{writer}")]
    writers = git(*g, "mktree", input="".join([*others, f"040000 tree {log_tree}\t{writer}\n"]).encode()).stdout.decode().strip()
    # everything else at the root (format, signatures/, allowed_signers) stays as it was
    rest = [line + "\n" for line in git(*g, "ls-tree", f"{ref}^{{tree}}").stdout.decode().splitlines()
            if not line.endswith("\twriters")]
    tree = git(*g, "mktree", input="".join([*rest, f"040000 tree {writers}\twriters\n"]).encode()).stdout.decode().strip()
    who = {"GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@e", "GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@e"}
    parent = git(*g, "rev-parse", ref).stdout.decode().strip()
    commit = git(*g, "commit-tree", tree, "-p", parent, "-m", "tampered", env=who).stdout.decode().strip()
    git(*g, "update-ref", to or ref, commit)
    return commit


def files_under(directory: Path) -> bytes:
    """The bytes of every file below `directory` (mirror, state, bare repository, everything)."""
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file() and not p.is_symlink())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def git_daemon(base: Path):
    """`git daemon` serving every repository under `base` on 127.0.0.1, pushes allowed. Yields the
    URL prefix (git://127.0.0.1:PORT/); stops the daemon when done."""
    port = free_port()
    proc = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
                             "--listen=127.0.0.1", f"--port={port}", f"--base-path={base}", str(base)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("git daemon did not start")
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def local_record(text: str, kind: str = "decision", **fields) -> dict:
    """A record as another machine's store writes it, for a writer whose store cannot name a teammate's
    record yet (the index reads the mirror in phase 2): sealed, seq 1 of its own log."""
    return records.seal({"seq": 1, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": kind, "text": text,
                         "prev": "0" * 64, **fields})


@pytest.fixture
def remote_dir(tmp_path):
    path = tmp_path / "remote.git"
    bare_remote(path)
    return path


@pytest.fixture
def machines(tmp_path, remote_dir):
    """make(name, url=None) -> Machine on the test's bare remote (or `url`); closed at the end."""
    made = []

    def make(name, url=None):
        made.append(Machine(tmp_path, name, url or remote_dir.as_uri()))
        return made[-1]

    yield make
    for m in made:
        m.close()


class Machine:
    """One teammate's computer: a HOME, a store, a team directory for PROJECT."""

    def __init__(self, root: Path, name: str, remote: str, email: str | None = None) -> None:
        self.name, self.remote = name, remote
        self.home = root / name / "home"
        self.store_dir = root / name / "store"
        self.home.mkdir(parents=True)
        (self.home / ".gitconfig").write_text(f"[user]\n\tname = {name.title()} Tester\n"
                                              f"\temail = {email or name + '@example.com'}\n", encoding="utf-8")
        self.env = {"HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config"),
                    "RETAINED_DIR": str(self.store_dir), "RETAINED_EMBED": "off"}
        with self.environment():
            from retained.store import Store

            self.store = Store(self.store_dir)
            self.writer = state.writer_id(self.store_dir)

    @property
    def team_dir(self) -> Path:
        return state.project_dir(self.store_dir, PROJECT)

    @contextlib.contextmanager
    def environment(self):
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def write(self, text: str, kind: str = "decision", **kw) -> str:
        with self.environment():
            receipt = self.store.write(text, kind=kind, scope=PROJECT, **kw)
        assert receipt["durable"], receipt
        return receipt["id"]

    def log(self) -> list[dict]:
        return read_log(self.store_dir)

    def outgoing(self) -> tuple[list[dict], list[PurgeRequest]]:
        return outgoing_of(self.log())

    def sync(self, purges: tuple[PurgeRequest, ...] = (), **kw) -> SyncResult:
        recs, local_purges = self.outgoing()
        with self.environment():
            author = team_git.author(self.home)
            return sync(self.team_dir, self.remote, self.writer, recs, [*local_purges, *purges], author=author, **kw)

    def spawn_sync(self, *extra: str) -> subprocess.Popen[str]:
        """The same sync in a process of its own (for kill -9 and concurrency), printing its result as JSON."""
        env = {**os.environ, **self.env}
        return subprocess.Popen([sys.executable, str(HELPER), str(self.store_dir), self.remote, PROJECT, *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def mirror(self) -> dict[str, list[dict]]:
        """The records of every writer's log as this machine's mirror holds them."""
        out = {}
        for path in sorted((self.team_dir / state.MIRROR).glob("*.jsonl")):
            parsed = wlog.parse_log(path.stem, path.read_bytes())
            assert parsed.problem is None, parsed.problem
            out[path.stem] = [e.rec for e in parsed.entries]
        return out

    def mirror_bytes(self) -> dict[str, bytes]:
        return {p.stem: p.read_bytes() for p in sorted((self.team_dir / state.MIRROR).glob("*.jsonl"))}

    def close(self) -> None:
        self.store.close()


def texts(machine: Machine) -> set[str]:
    """Every memory's text this machine holds from every writer's log (tombstones have none; purge
    and retraction records are not memories)."""
    return {r["text"] for recs in machine.mirror().values() for r in recs
            if "text" in r and r["kind"] != records.FORGET_KIND}


def share_all(*ms) -> None:
    """Turn sharing of PROJECT on for each machine, to its remote."""
    from retained.team import state

    for m in ms:
        state.share(m.store_dir, PROJECT, m.remote)


def store_sync(m):
    """What `retained sync` does: the store's own selection (team/share.py), the engine, the index."""
    from retained.team import share, state

    with m.environment():
        return share.sync_one(m.store, state.shared(m.store_dir)[PROJECT])
