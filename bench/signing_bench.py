"""Signed heads benchmark (issue 29 item 6): what signing and checking writers' heads adds to a sync.

    python bench/signing_bench.py [--writers 5] [--records 2000] [--rounds 7]

Target: signing + verifying 5 writers' heads costs <= 50 ms beyond today's sync at 10k pulled lines.
Only heads are signed, so the cost is per writer (one check each, and one `ssh-keygen -Y sign` for
this writer's own new head), never per line. An Ed25519 head is checked in the sync's process; another
key type by one `ssh-keygen -Y verify` each, side by side. "In signing" is the time the sync spends in
signing's own calls (checking, signing, saving).

Same-run baseline: the same sync (retained/team/sync.py, real git, a local bare remote) with signing
left out (a `Signatures` that checks nothing and puts nothing on the ref), beside the sync as it runs:
a new clone that pulls writers x records lines (every writer's head verified), then the same clone
publishing one record (its own head signed; teammates' heads verified before cost nothing).
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
from retained.team import signing
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


class NoSigning(signing.Signatures):
    """The sync as it was before heads were signed: nothing checked, nothing signed; the signature
    files fetched go back on the ref as they were (so that this clone changes nothing there)."""

    def check(self, parsed, signatures, allowed, held=None):  # type: ignore[no-untyped-def]
        self.fetched = {f"{signing.SIGNATURES}/{w}.sig": d for w, d in signatures.items()}
        if allowed is not None:
            self.fetched[signing.ALLOWED_SIGNERS] = allowed
        return dict(parsed)

    def files(self, files):  # type: ignore[no-untyped-def]
        return dict(getattr(self, "fetched", {}))


def _timing(name: str):  # type: ignore[no-untyped-def]
    """Signatures' method `name`, adding the time it takes to Timed.spent."""
    def method(self, *a, **kw):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return getattr(signing.Signatures, name)(self, *a, **kw)
        finally:
            Timed.spent += time.perf_counter() - started
    return method


class Timed(signing.Signatures):
    """The sync's own Signatures, timing what it spends in signing (check, files, save): the figure
    the target is about, apart from the noise of two whole syncs on a shared machine."""

    spent = 0.0
    check = _timing("check")
    files = _timing("files")
    save = _timing("save")


def timed_sync(team_dir: Path, remote: Path, writer: str, recs: list[dict], sigs: signing.Signatures) -> float:
    started = time.perf_counter()
    result = sync(team_dir, remote.as_uri(), writer, recs, signatures=sigs)
    took = time.perf_counter() - started
    assert result.ok, result
    return took


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
            assert sync(root / w, remote.as_uri(), w, logs[w], signatures=signing.Signatures(root / w, w, key=keys[w])).ok
        total = args.writers * args.records
        print(f"{args.writers} writers x {args.records:,} records, each head signed (ed25519); same-run baseline: the "
              "sync with signing left out (nothing checked, nothing signed)")
        rows = []
        for r in range(args.rounds):
            row = []
            for kind in (NoSigning, Timed):
                clone, writer = root / f"clone{r}-{kind.__name__}", f"wclone{r:04d}"
                Timed.spent = 0.0
                row.append(timed_sync(clone, remote, writer, [], kind(clone, writer)))  # a new clone pulls it all
                first, Timed.spent = Timed.spent, 0.0
                mine = make_records(1, rng)  # then publishes one record of its own: its head signed
                row.append(timed_sync(clone, remote, writer, mine, kind(clone, writer)))
            rows.append([*row, first, Timed.spent])
        med = [statistics.median(col) for col in zip(*rows, strict=True)]
        low = [min(col) for col in zip(*rows, strict=True)]
        print(f"  median of {args.rounds} (fastest in brackets; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores)")
        for label, i in (("a new clone pulls " + f"{total:,} lines", 0), ("then publishes one record", 1)):
            extra, inside = med[i + 2] - med[i], med[i + 4]
            print(f"    {label:<34} baseline {med[i] * 1000:8.1f} ms ({low[i] * 1000:.1f})  signed "
                  f"{med[i + 2] * 1000:8.1f} ms ({low[i + 2] * 1000:.1f})  difference {extra * 1000:+6.1f} ms; "
                  f"in signing {inside * 1000:5.1f} ms  target <= 50 ms  {'OK' if inside <= 0.050 else 'MISSED'}")


if __name__ == "__main__":
    main()
