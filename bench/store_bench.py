"""Core store benchmark: write, search, verify and reindex against a same-run, same-disk floor.

    python bench/store_bench.py [--records 100000] [--writes 300] [--dir DIR]

The floor is a bare loop doing what a durable append must do at least: append a line, fsync, read it
back. Targets (issue 2): write p50 <= 3x floor and p50 at 100k <= 1.2x p50 at 1k; search p50 <= 5 ms
at 100k; verify of 100k <= 1.5 s; reindex of 100k <= 10 s; verify memory flat in log size.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retained import records
from retained.store import Store


def _vocabulary(n: int, rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "tu", "ra", "si", "po", "de", "ga", "vi", "zu", "che", "tor", "bin", "ux"]
    words: dict[str, None] = {}
    while len(words) < n:
        words.setdefault("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))), None)
    return list(words)


STOP = ["the", "a", "we", "and", "to", "of", "in", "for", "is", "on", "with", "that", "it", "not", "this"]
_rng0 = random.Random(1)
# Natural-language-like text: a Zipf-distributed vocabulary of 20,000 words plus frequent stopwords.
WORDS = STOP + _vocabulary(20_000, _rng0)
_WEIGHTS = [30.0] * len(STOP) + [1.0 / (r + 1) ** 1.07 for r in range(len(WORDS) - len(STOP))]
_CUM = list(__import__("itertools").accumulate(_WEIGHTS))
SAMPLES: list[str] = []


def sentence(rng: random.Random) -> str:
    text = " ".join(rng.choices(WORDS, cum_weights=_CUM, k=rng.randint(10, 40)))
    if len(SAMPLES) < 2000 and rng.random() < 0.05:
        SAMPLES.append(text)
    return text


def a_query(rng: random.Random) -> str:
    """What an agent searches for: one to three content words of something that was written."""
    words = [w for w in rng.choice(SAMPLES).split() if w not in STOP] or ["kalo"]
    return " ".join(rng.sample(words, min(len(words), rng.randint(1, 3))))


def p50(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def floor_loop(directory: Path, n: int) -> float:
    path = directory / "floor.jsonl"
    line = (b'{"text":"' + b"x" * 200 + b'"}\n')
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        off = os.fstat(fd).st_size
        os.write(fd, line)
        os.fsync(fd)
        os.close(fd)
        rfd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(rfd, off, len(line), os.POSIX_FADV_DONTNEED)
        assert os.pread(rfd, len(line), off) == line
        os.close(rfd)
        times.append(time.perf_counter() - t)
    path.unlink()
    return p50(times)


def bulk_log(directory: Path, n: int, rng: random.Random) -> None:
    """Write n valid chained records straight to log.jsonl (fast set-up; the store then indexes them)."""
    prev = records.GENESIS
    with open(directory / "log.jsonl", "wb") as f:
        for seq in range(1, n + 1):
            rec = records.seal({"seq": seq, "id": f"mem_bench{seq:012d}", "ts": "2026-11-29T00:00:00.000000Z",
                                "kind": "note", "text": sentence(rng), "prev": prev,
                                "scope": rng.choice(["/p/a", "/p/b", "global"])})
            prev = rec["sha256"]
            f.write(records.format_line(rec))
    os.chmod(directory / "log.jsonl", 0o600)


def time_writes(store: Store, n: int, rng: random.Random) -> float:
    times = []
    for _ in range(n):
        text = sentence(rng)
        t = time.perf_counter()
        r = store.write(text, scope="/p/a")
        times.append(time.perf_counter() - t)
        assert r["durable"], r
    return p50(times)


def time_searches(store: Store, n: int, rng: random.Random) -> float:
    times = []
    for _ in range(n):
        q = a_query(rng)
        t = time.perf_counter()
        store.search(q, scopes=["/p/a", "global"])
        times.append(time.perf_counter() - t)
    return p50(times)


def at_size(base: Path, n: int, writes: int, rng: random.Random) -> dict[str, float]:
    d = base / f"store-{n}"
    d.mkdir(mode=0o700)
    bulk_log(d, n, rng)
    store = Store(d)
    t = time.perf_counter()
    store.reindex()
    reindex_s = time.perf_counter() - t
    write_p50 = time_writes(store, writes, rng)
    search_p50 = time_searches(store, 300, rng)
    common = WORDS[len(STOP)]  # the most frequent content word: the worst case for ranking
    t = time.perf_counter()
    common_hits = store.search(common)["total_matched"]
    common_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    report = store.verify()
    verify_s = time.perf_counter() - t
    assert report["intact"], report
    tracemalloc.start()  # a second run for memory: tracemalloc slows Python down several times
    store.verify()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    store.close()
    return {"records": n, "write_p50_ms": write_p50, "search_p50_ms": search_p50, "verify_s": verify_s,
            "common_ms": common_ms, "common_hits": common_hits,
            "verify_peak_mib": peak / 2**20, "reindex_s": reindex_s}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--writes", type=int, default=300)
    ap.add_argument("--dir", help="where to put the stores (default: a temp dir); the floor runs there too")
    args = ap.parse_args()
    rng = random.Random(7)
    base = Path(tempfile.mkdtemp(prefix="retained-bench-", dir=args.dir))
    floor = floor_loop(base, args.writes)
    small = at_size(base, 1000, args.writes, rng)
    middle = at_size(base, 10_000, args.writes, rng)
    large = at_size(base, args.records, args.writes, rng)
    print(f"floor (append+fsync+read-back) p50: {floor:.3f} ms")
    for r in (small, middle, large):
        print(f"{r['records']:>7} records: write p50 {r['write_p50_ms']:.3f} ms ({r['write_p50_ms'] / floor:.2f}x floor), "
              f"search p50 {r['search_p50_ms']:.3f} ms, verify {r['verify_s']:.3f} s "
              f"(peak {r['verify_peak_mib']:.2f} MiB), reindex {r['reindex_s']:.3f} s; "
              f"worst-case one-word query matching {r['common_hits']} records: {r['common_ms']:.1f} ms")
    print(f"write p50 {args.records} / 1000: {large['write_p50_ms'] / small['write_p50_ms']:.2f}x")
    ok = (small["write_p50_ms"] <= 3 * floor and large["write_p50_ms"] <= 3 * floor
          and large["write_p50_ms"] <= 1.2 * small["write_p50_ms"] and large["search_p50_ms"] <= 5
          and large["verify_s"] <= 1.5 and large["reindex_s"] <= 10)
    print("targets:", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
