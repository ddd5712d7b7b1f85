"""Signed heads benchmark (issue 29 item 6): what signing and checking writers' heads adds to a sync.

    python bench/signing_bench.py [--writers 5] [--records 2000] [--rounds 7]

Target: signing + verifying 5 writers' heads costs <= 50 ms beyond today's sync at 10k pulled lines.
Only heads are signed, so the cost is per writer (one `ssh-keygen -Y verify` each, side by side, and
one `ssh-keygen -Y sign` for this writer's own new head), never per line.

Same-run baseline: today's sync (retained/team/sync.py, real git, a local bare remote) of a new clone
that pulls writers x records lines, and of a clone that pulls 10 new lines from every writer. Beside
each, what `signing.Signatures` costs on exactly what that sync pulled: `check` (every writer's new
head verified; a head verified before costs nothing) and `files` (this writer's head signed with the
key found as a sync finds it: git config first, then retained's own key, made beforehand here since a
user makes it once).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retained import records
from retained.team import git as team_git
from retained.team import hlc, signing, state, wlog
from retained.team.sync import sync

WORDS = ("deploy release cache schema index migration api token queue worker retry timeout staging "
         "database replica shard backup feature flag tenant billing invoice webhook cron lint test").split()
SCOPE = "example.com/acme/shop"


def make_records(n: int, rng: random.Random) -> list[dict]:
    out = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40)))
        out.append(records.seal({"seq": i + 1, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": "decision",
                                 "text": f"{text} ({i})", "prev": "0" * 64, "scope": SCOPE}))
    return out


def new_key(path: Path) -> signing.Key:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    return signing.Key(path, None, "bench key")


def read_mirror(team_dir: Path) -> dict[str, list[wlog.Entry]]:
    return {p.stem: wlog.trusted(p.read_bytes()) for p in sorted((team_dir / state.MIRROR).glob("*.jsonl"))}


def ref_files(remote: Path) -> dict[str, bytes]:
    """signatures/* and allowed_signers of the remote's memory ref, as a sync fetches them."""
    g = ["git", "--git-dir", str(remote)]
    names = subprocess.run(g + ["ls-tree", "-r", "--name-only", team_git.MEMORY_REF], capture_output=True,
                           check=True).stdout.decode().split()
    return {n: subprocess.run(g + ["show", f"{team_git.MEMORY_REF}:{n}"], capture_output=True, check=True).stdout
            for n in names if n.startswith(signing.SIGNATURES + "/") or n == signing.ALLOWED_SIGNERS}


def publish_signed(remote: Path, root: Path, writer: str, recs: list[dict], key: signing.Key) -> None:
    """A writer's sync, then its signature and allowed_signers line committed beside its log (what the
    sync will do once it calls Signatures.files)."""
    team_dir = root / writer
    assert sync(team_dir, remote.as_uri(), writer, recs).ok
    before = ref_files(remote)
    sigs = signing.Signatures(team_dir, writer, key=key)
    sigs.check({}, {}, before.get(signing.ALLOWED_SIGNERS))
    extra = sigs.files({writer: read_mirror(team_dir)[writer]})
    g = ["git", "--git-dir", str(remote)]
    env = {**team_git.environment(), "GIT_INDEX_FILE": str(root / "bench-index"), "GIT_AUTHOR_NAME": "b",
           "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@e"}
    subprocess.run(g + ["read-tree", team_git.MEMORY_REF], check=True, env=env)
    for path, data in extra.items():
        oid = subprocess.run(g + ["hash-object", "-w", "--stdin"], input=data, capture_output=True, check=True).stdout
        subprocess.run(g + ["update-index", "--add", "--cacheinfo", f"100644,{oid.decode().strip()},{path}"], check=True, env=env)
    tree = subprocess.run(g + ["write-tree"], capture_output=True, check=True, env=env).stdout.decode().strip()
    parent = subprocess.run(g + ["rev-parse", team_git.MEMORY_REF], capture_output=True, check=True).stdout.decode().strip()
    commit = subprocess.run(g + ["commit-tree", tree, "-p", parent, "-m", "signed"], capture_output=True, check=True,
                            env=env).stdout.decode().strip()
    subprocess.run(g + ["update-ref", team_git.MEMORY_REF, commit], check=True)


def signing_cost(team_dir: Path, writer: str, remote: Path) -> tuple[float, float, signing.Signatures]:
    """Seconds of Signatures.check on what the clone holds now (as fetched), and of Signatures.files
    with one new line of its own to sign."""
    mirror = read_mirror(team_dir)
    fetched = ref_files(remote)
    sig_files = {p[len(signing.SIGNATURES) + 1:-len(".sig")]: d for p, d in fetched.items() if p.endswith(".sig")}
    started = time.perf_counter()
    sigs = signing.Signatures(team_dir, writer)
    parsed = sigs.check({w: wlog.Parsed(e, None) for w, e in mirror.items()}, sig_files, fetched.get(signing.ALLOWED_SIGNERS))
    sigs.save()
    checked = time.perf_counter() - started
    assert all(p.problem is None for p in parsed.values()), [p.problem for p in parsed.values()]
    own = wlog.seal_after({"id": records.new_id(), "ts": records.now_rfc3339(), "kind": "decision", "text": "mine"}, None,
                          writer=writer, clock=hlc.HLC(1, 0),
                          author=None, seen=None)
    started = time.perf_counter()
    out = sigs.files({**mirror, writer: [own]})
    sigs.save()
    signed = time.perf_counter() - started
    assert f"{signing.SIGNATURES}/{writer}.sig" in out, sigs.notes
    return checked, signed, sigs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=5)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(29)
    with tempfile.TemporaryDirectory(prefix="retained-signing-bench-") as tmp:
        root = Path(tmp)
        os.environ.update(HOME=str(root / "home"), XDG_CONFIG_HOME=str(root / "home" / ".config"))
        os.environ.pop("SSH_AUTH_SOCK", None)
        (root / "home").mkdir()
        signing.find_key()  # the clone's own key, made once per user (not part of any sync)
        remote = root / "remote.git"
        subprocess.run(["git", "init", "--bare", "--quiet", str(remote)], check=True)
        writers = [f"wbench{i:04d}" for i in range(args.writers)]
        keys = {w: new_key(root / f"key-{w}") for w in writers}
        logs = {w: make_records(args.records, rng) for w in writers}
        for w in writers:
            publish_signed(remote, root, w, logs[w], keys[w])
        total = args.writers * args.records
        print(f"{args.writers} writers x {args.records:,} records, each head signed (ed25519); same-run baseline: today's sync")
        rows = []
        for r in range(args.rounds):
            clone = root / f"clone{r}"
            started = time.perf_counter()
            result = sync(clone, remote.as_uri(), f"wclone{r:04d}", [])
            base = time.perf_counter() - started
            assert result.ok and sum(result.pulled.values()) == total, result
            checked, signed, _ = signing_cost(clone, f"wclone{r:04d}", remote)
            rows.append((base, checked, signed))
        base, checked, signed = (statistics.median(col) for col in zip(*rows, strict=True))
        low = [min(col) for col in zip(*rows, strict=True)]
        print(f"  a new clone pulls {total:,} lines (median of {args.rounds}, fastest in brackets; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        print(f"    today's sync                              {base * 1000:8.1f} ms  ({low[0] * 1000:.1f})")
        print(f"    check {args.writers} heads (ssh-keygen -Y verify, side by side) {checked * 1000:8.1f} ms  ({low[1] * 1000:.1f})")
        print(f"    sign this writer's new head (-Y sign)     {signed * 1000:8.1f} ms  ({low[2] * 1000:.1f})")
        for label, extra in (("a sync that only pulls", checked), ("a sync that pulls and publishes", checked + signed)):
            print(f"    {label:<32} + {extra * 1000:6.1f} ms beyond today's sync ({(base + extra) / base:.3f}x)  "
                  f"target <= 50 ms  {'OK' if extra <= 0.050 else 'MISSED'}")
        # A head verified before costs nothing: the steady state of a clone whose teammates did not write.
        clone = root / "clone0"
        started = time.perf_counter()
        again = signing_cost(clone, "wclone0000", remote)[0]
        print(f"  the same heads checked again (pinned, byte-identical): {again * 1000:.1f} ms "
              f"(took {(time.perf_counter() - started) * 1000:.1f} ms with the own head signed)")


if __name__ == "__main__":
    main()
