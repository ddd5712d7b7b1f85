"""Team memory benchmark: syncs against a local bare remote, beside bare git doing the same transfer.

    python bench/team_bench.py [--writers 5] [--records 10000] [--growth 10000] [--dir DIR] [--code TREE] [--no-hook]

Targets (issue 28): 5 writers x 10,000 records: the first sync of a new clone <= 3 s and <= 100 MB peak
(the engine alone, from the remote as the pushes left it and again after the remote's own `git gc`, as
a hosted remote packs what it receives; and a real store's `retained sync`: pulled, verified and
indexed, so that search finds them; each run in a process of its own, so that its peak memory is its
own; "CPU" is that process's own CPU time, a steadier figure than wall time on a busy machine); a sync that pulls 10 new
records <= 0.3 s plus git's own time (printed: "git" is the time spent inside git processes); a sync
that publishes one record at 10,000 lines per writer adds <= 20 kB to the remote (and what it adds to
retained's own bare repository); the session-start hook's p50 with sharing on within 1.10x of sharing
off; the remote's size per record after `git gc`, its growth over 10,000 more records, and retained's
bare repository after them (loose objects and packs, which it keeps within a bound).
The baseline is bare git in the same run: a `git fetch` of the whole memory ref into an empty
repository, and a `git push` of one commit that appends 10 lines to one writer's log. `--code TREE`
runs the same bench against another checkout's retained (e.g. a worktree of the issue's start commit).
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(Path(__file__).resolve().parents[1]))

from retained import records
from retained.team import git as team_git
from retained.team.sync import sync

_code = sys.path[0]

WORDS = ("deploy release cache schema index migration api token queue worker retry timeout staging "
         "database replica shard backup feature flag tenant billing invoice webhook cron lint test").split()
SCOPE = "example.com/acme/shop"


def git(*args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], input=input, capture_output=True, check=True,
                          env=team_git.environment()).stdout


def make_records(n: int, rng: random.Random, start: int = 1) -> list[dict]:
    out = []
    for i in range(start, start + n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40)))
        out.append(records.seal({"seq": i, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": "decision",
                                 "text": f"{text} ({i})", "prev": "0" * 64, "scope": SCOPE}))
    return out


class Writer:
    def __init__(self, root: Path, i: int, remote: str) -> None:
        self.dir, self.remote, self.id = root / f"machine{i}", remote, f"wbench{i:04d}"
        self.records: list[dict] = []
        self.author = {"name": f"Writer {i}", "email": f"w{i}@example.com"}

    def sync(self):
        cpu = time.process_time()
        result = sync(self.dir, self.remote, self.id, self.records, author=self.author)
        result.cpu = time.process_time() - cpu  # type: ignore[attr-defined]  # this process's own CPU time
        assert result.ok, result.error
        return result


def line(label: str, result, target: str = "") -> None:
    own = result.seconds - result.git_seconds
    print(f"  {label:<44} {result.seconds:7.3f} s   git {result.git_seconds:6.3f} s ({result.git_calls} calls)"
          f"   retained {own:6.3f} s (CPU {result.cpu:6.3f} s) {target}")


def remote_size(remote: Path) -> int:
    git("--git-dir", str(remote), "gc", "--prune=now", "--quiet")
    stats = dict(ln.split(": ") for ln in git("--git-dir", str(remote), "count-objects", "-v").decode().splitlines())
    return (int(stats["size"]) + int(stats["size-pack"])) * 1024


def first_syncs(writers: list[Writer], root: Path, remote: str, n: int, rng: random.Random) -> None:
    print(f"first syncs: {len(writers)} writers x {n:,} records")
    for w in writers:
        w.records = make_records(n, rng)
        line(f"{w.id} publishes {n:,}", w.sync())
    for label, where in (("a new clone pulls ", "machine98"), ("... after the remote's own git gc ", "machine99")):
        if where == "machine99":  # a hosted remote packs what it receives; fetching loose objects costs it more
            git("--git-dir", remote.removeprefix("file://"), "gc", "--quiet")
        bare = bare_fetch(remote, root / f"{where}-bare.git")
        got = child("engine", root / where, remote)
        print(f"  {label + format(len(writers) * n, ','):<44} {got['seconds']:7.3f} s   git {got['git']:6.3f} s"
              f"   retained {got['seconds'] - got['git']:6.3f} s (CPU {got['cpu']:6.3f} s)   peak {got['peak_mb']:5.0f} MB"
              f" (target <= 3 s, <= 100 MB; bare git fetch of the same ref from the same remote {bare:.3f} s)")


def bare_fetch(remote: str, into: Path) -> float:
    """Seconds for plain git to fetch the whole memory ref into an empty repository: on a remote that
    was never packed, most of it is the remote's own pack-objects (its delta search), whoever asks."""
    git("init", "--bare", "--quiet", str(into))
    started = time.perf_counter()
    git("--git-dir", str(into), "fetch", "--quiet", remote, f"{team_git.MEMORY_REF}:refs/x")
    return time.perf_counter() - started


def child(what: str, where: Path, remote: str) -> dict:
    """Run one first sync in a process of its own (its peak memory is then its own); its figures."""
    import json

    proc = subprocess.run([sys.executable, __file__, "--code", _code, "--child", what, str(where), remote],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_child(what: str, where: str, remote: str) -> None:
    import json
    import os

    os.environ["RETAINED_EMBED"] = "off"
    out: dict = {}
    cpu = time.process_time()
    if what == "engine":
        result = sync(Path(where), remote, "wbench0099")
        assert result.ok, result.error
        out.update(seconds=result.seconds, git=result.git_seconds)
    else:
        from retained.store import Store
        from retained.team import share, state

        with Store(Path(where)) as store:
            shared = state.share(Path(where), SCOPE, remote)
            started = time.perf_counter()
            result = share.sync_one(store, shared)
            out.update(seconds=time.perf_counter() - started, git=result.git_seconds, engine=result.seconds)
            assert result.ok, result.error
            hits = store.search("deploy release", scopes=[SCOPE], k=5)["hits"]
            assert hits and all("writer" in h for h in hits)
            out["rows"] = store.index.counts()["records"]
    out["peak_mb"], out["cpu"] = peak_mb(), time.process_time() - cpu
    print(json.dumps(out))


def peak_mb() -> float:
    """This process's peak resident memory. Linux's VmHWM, not getrusage: a process started from a
    big one (this bench, holding every record) inherits the parent's high-water mark through exec."""
    import resource

    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def small_syncs(writers: list[Writer], rng: random.Random, rounds: int = 7) -> None:
    print(f"syncs that move 10 new records (median of {rounds})")
    pushes, pulls = [], []
    for _ in range(rounds):
        a, b = writers[0], writers[1]
        a.records += make_records(10, rng, len(a.records) + 1)
        pushes.append(a.sync())
        pulls.append(b.sync())
    for label, results in (("push 10", pushes), ("pull 10", pulls)):
        mid = sorted(results, key=lambda r: r.seconds)[len(results) // 2]
        line(label, mid, "(target <= 0.3 s + git)")


def baseline(remote: Path, root: Path, writer: str) -> None:
    print("baseline: bare git, same run")
    empty = root / "baseline.git"
    git("init", "--bare", "--quiet", str(empty))
    started = time.perf_counter()
    git("--git-dir", str(empty), "fetch", "--quiet", remote.as_uri(), f"{team_git.MEMORY_REF}:refs/x")
    print(f"  {'git fetch of the whole memory ref':<44} {time.perf_counter() - started:7.3f} s")
    g = ["--git-dir", str(empty)]
    times = []
    for k in range(5):
        started = time.perf_counter()
        new_lines = b"".join(records.format_line(r) for r in make_records(10, random.Random(k)))
        listing = git(*g, "ls-tree", "refs/x:writers").decode().splitlines()
        mine = next(ln for ln in listing if ln.split("\t")[1] in (writer, f"{writer}.jsonl"))
        if " tree " in mine:  # a log in segments: append to the last one
            segments = git(*g, "ls-tree", f"refs/x:writers/{writer}").decode().splitlines()
            last = segments[-1].split("\t")[1]
            data = git(*g, "show", f"refs/x:writers/{writer}/{last}") + new_lines
            blob = git(*g, "hash-object", "-w", "--stdin", input=data).decode().strip()
            segments[-1] = f"100644 blob {blob}\t{last}"
            log = git(*g, "mktree", input=("\n".join(segments) + "\n").encode()).decode().strip()
            changed = f"040000 tree {log}\t{writer}"
        else:
            data = git(*g, "show", f"refs/x:writers/{writer}.jsonl") + new_lines
            blob = git(*g, "hash-object", "-w", "--stdin", input=data).decode().strip()
            changed = f"100644 blob {blob}\t{writer}.jsonl"
        entries = [changed if ln == mine else ln for ln in listing]
        writers_tree = git(*g, "mktree", input=("\n".join(entries) + "\n").encode()).decode().strip()
        fmt = git(*g, "rev-parse", "refs/x:format").decode().strip()
        tree = git(*g, "mktree", input=f"100644 blob {fmt}\tformat\n040000 tree {writers_tree}\twriters\n".encode()).decode().strip()
        parent = git(*g, "rev-parse", "refs/x").decode().strip()
        commit = subprocess.run(["git", *g, "commit-tree", tree, "-p", parent, "-m", "b"], capture_output=True, check=True,
                                env={**team_git.environment(), "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e",
                                     "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@e"}).stdout.decode().strip()
        git(*g, "push", "--quiet", remote.as_uri(), f"{commit}:refs/baseline/x{k}")
        times.append(time.perf_counter() - started)
    print(f"  {'append 10 lines by hand and git push':<44} {statistics.median(times):7.3f} s")


def store_first_sync(root: Path, remote: str, total: int) -> None:
    """A real store shares the project and syncs once: fetch, verify, merge, then the index reads every
    writer's log (what `retained share` / `retained sync` do), and a search finds a teammate's record."""
    print(f"a store's first `retained sync` of {total:,} teammates' records (sync + index)")
    got = child("store", root / "store-clone", remote)
    print(f"  {'sync, then the index takes in ' + format(got['rows'], ',') + ' rows':<44} {got['seconds']:7.3f} s   "
          f"git {got['git']:6.3f} s   (sync {got['engine']:6.3f} s, index {got['seconds'] - got['engine']:6.3f} s; "
          f"CPU {got['cpu']:6.3f} s)   "
          f"peak {got['peak_mb']:5.0f} MB (target <= 3 s, <= 100 MB)")


def objects_on_disk(git_dir: Path) -> dict[str, int]:
    """{oid: bytes on disk} of every object of a repository, loose or packed."""
    out = git("--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objectsize:disk)")
    return {oid: int(size) for oid, size in (ln.split() for ln in out.decode().splitlines())}


def one_record_growth(writers: list[Writer], remote: Path, rng: random.Random) -> None:
    """A sync that publishes one record, on a log of len(w.records) lines: the bytes of the objects it
    adds to the remote and to retained's own bare repository."""
    w = writers[0]
    w.sync()
    repo = w.dir / "repo.git"
    before_remote, before_local = objects_on_disk(remote), objects_on_disk(repo)
    w.records += make_records(1, rng, len(w.records) + 1)
    result = w.sync()
    after_remote, after_local = objects_on_disk(remote), objects_on_disk(repo)
    added = {k: sum(size for oid, size in after.items() if oid not in before)
             for k, before, after in (("remote", before_remote, after_remote), ("local", before_local, after_local))}
    count = len(set(after_remote) - set(before_remote))
    print(f"a sync that publishes 1 record at {len(w.records) - 1:,} lines per writer: {result.seconds:6.3f} s "
          f"(CPU {result.cpu:6.3f} s); adds "
          f"{added['remote'] / 1000:6.1f} kB to the remote ({count} objects) (target <= 20 kB) and "
          f"{added['local'] / 1000:6.1f} kB to retained's bare repository")


def repository_bound(writers: list[Writer]) -> None:
    import os

    for w in writers[:2]:
        objects = w.dir / "repo.git" / "objects"
        loose = sum(len(os.listdir(objects / d)) for d in os.listdir(objects) if len(d) == 2)
        packs = len(list((objects / "pack").glob("*.pack")))
        size = sum(p.stat().st_size for p in objects.rglob("*") if p.is_file())
        print(f"  {w.id}'s bare repository: {size / 1e6:6.1f} MB, {loose} loose objects, {packs} packs")


def hook_p50(root: Path, rounds: int = 21, records_n: int = 2000) -> None:
    """The session-start hook with sharing on and off, on one project with the same records."""
    import json
    import os
    import shutil

    from retained.store import Store
    from retained.team import background

    origin = root / "hook-origin.git"
    git("init", "--bare", "--quiet", str(origin))
    checkout = root / "hook-checkout"
    git("init", "--quiet", str(checkout))
    git("-C", str(checkout), "remote", "add", "origin", origin.as_uri())
    store_dir = root / "hook-store"
    env = {**os.environ, "RETAINED_DIR": str(store_dir), "RETAINED_EMBED": "off", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@e"}
    os.environ["RETAINED_EMBED"] = "off"
    rng = random.Random(7)
    scope = None
    with Store(store_dir) as store:
        from retained.project import scope_of

        scope = scope_of(checkout)
        for i in range(records_n):
            store.write(" ".join(rng.choice(WORDS) for _ in range(20)) + f" ({i})", kind=rng.choice(
                ["decision", "fact", "note", "convention"]), scope=scope)
    payload = json.dumps({"cwd": str(checkout), "session_id": "bench", "hook_event_name": "SessionStart",
                          "source": "startup"})

    def once(label: str, k: int, where: Path) -> float:
        data = json.loads(payload)
        data["session_id"] = f"bench-{label}-{k}"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "retained", "hook", "session-start", "--host", "claude"],
                       input=json.dumps(data).encode(), capture_output=True, check=True,
                       env={**env, "RETAINED_DIR": str(where)}, cwd=checkout)
        return time.perf_counter() - started

    # The same store twice, one of them shared; the two take turns run by run (the first of a round
    # alternating), so that they share whatever load the machine has. The first shared run starts the
    # background sync a session start starts; it has ended before the timed runs begin.
    off_dir = root / "hook-store-off"
    shutil.copytree(store_dir, off_dir)
    subprocess.run([sys.executable, "-m", "retained", "share"], capture_output=True, check=True, env=env, cwd=checkout)
    once("warm", 0, store_dir)
    background_settles(store_dir)
    times: dict[str, list[float]] = {"off": [], "on": []}
    for k in range(rounds):
        for label in (("off", "on") if k % 2 else ("on", "off")):
            times[label].append(once(label, k, off_dir if label == "off" else store_dir))
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    kicked = []
    for k in range(rounds):
        (store_dir / "team" / background.STAMP).unlink(missing_ok=True)
        kicked.append(once("kick", k, store_dir))
    on_kick = statistics.median(kicked)
    time.sleep(3)  # let the background syncs end before the folder goes
    print(f"session-start hook p50 over {rounds} runs, {records_n:,} records: sharing off {off * 1000:6.1f} ms, "
          f"on {on * 1000:6.1f} ms ({on / off:4.2f}x, target <= 1.10x), on with a background sync started by every "
          f"run {on_kick * 1000:6.1f} ms ({on_kick / off:4.2f}x)")
    shutil.rmtree(store_dir / "team", ignore_errors=True)


def background_settles(store_dir: Path, limit: float = 60.0) -> None:
    """Wait until the background sync a hook started has taken its project's sync lock and let it go."""
    from retained import durable

    deadline = time.monotonic() + limit
    time.sleep(0.5)
    while time.monotonic() < deadline:
        locks = list((store_dir / "team").glob("**/sync.lock"))
        free = 0
        for lock in locks:
            with durable.try_locked(lock, 0) as held:
                free += held
        if locks and free == len(locks):
            return
        time.sleep(0.2)


def growth(writers: list[Writer], remote: Path, extra: int, rng: random.Random) -> None:
    total = sum(len(w.records) for w in writers)
    before = remote_size(remote)
    log_bytes = sum(len(records.format_line(r)) for w in writers for r in w.records)
    print(f"remote size after git gc: {before / 1024:,.0f} KiB for {total:,} records = {before / total:,.0f} B/record "
          f"(the records' own JSON lines: {log_bytes / total:,.0f} B/record)")
    batch = 100
    if extra < batch:  # --growth 0: the remote's size alone
        return
    for k in range(extra // batch):
        w = writers[k % len(writers)]
        w.records += make_records(batch, rng, len(w.records) + 1)
        w.sync()
    after = remote_size(remote)
    commits = git("--git-dir", str(remote), "rev-list", "--count", team_git.MEMORY_REF).decode().strip()
    print(f"growth over {extra:,} more records in syncs of {batch}: {(after - before) / 1024:,.0f} KiB = "
          f"{(after - before) / extra:,.0f} B/record; {after / 1024:,.0f} KiB in all, {commits} commits")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=5)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--growth", type=int, default=10_000)
    ap.add_argument("--dir")
    ap.add_argument("--code", help="the checkout whose retained is measured (default: this one)")
    ap.add_argument("--no-hook", action="store_true", help="leave out the session-start hook's p50")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_child(*args.child)
        return
    print(f"retained from {args.code or 'this checkout'}")
    rng = random.Random(19)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        remote = root / "remote.git"
        git("init", "--bare", "--quiet", str(remote))
        writers = [Writer(root, i, remote.as_uri()) for i in range(args.writers)]
        first_syncs(writers, root, remote.as_uri(), args.records, rng)
        store_first_sync(root, remote.as_uri(), args.writers * args.records)
        small_syncs(writers, rng)
        one_record_growth(writers, remote, rng)
        baseline(remote, root, writers[0].id)
        growth(writers, remote, args.growth, rng)
        repository_bound(writers)
        if not args.no_hook:
            hook_p50(root)


if __name__ == "__main__":
    main()
