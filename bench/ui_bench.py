"""The web page and export at 100k records, measured from a real headless Chromium.

    python bench/ui_bench.py [--records 100000] [--runs 5] [--dir DIR]

Targets (issue 11): first paint of the page and a search within it each under 300 ms, measured in
the browser (Paint Timing; the first paint holds the newest 50 records, which come in the HTML, and
`performance.mark("list-rendered")` is set once the script has taken over); export of 100k records
under 5 s. Each run uses a fresh browser. Same-run baselines: a one-line page's first paint in a fresh
browser (the browser's own floor), a fetch of a static file from the same server, and copying the log
file (what any export costs before choosing records). Words only (RETAINED_EMBED=off by default here).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retained import records
from retained.store import Store
from retained.transfer import export

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_bench import a_query, sentence

from tests.helpers.browser import Browser, find_chromium
from tests.helpers.ui_server import UiServer

KINDS = ["note"] * 5 + ["fact"] * 3 + ["decision", "convention", "preference", "todo", "checkpoint"]
SCOPES = ["/src/app", "/src/lib", "/src/web", "global"]


def bulk(directory: Path, n: int, rng: random.Random) -> None:
    """n chained records straight into log.jsonl (a third-party append per docs/FORMAT.md), dated over
    two years, with a correction every 50 records."""
    directory.mkdir(parents=True, exist_ok=True)
    prev = records.GENESIS
    start = time.mktime((2025, 1, 1, 0, 0, 0, 0, 0, 0))
    with open(directory / "log.jsonl", "wb") as f:
        for seq in range(1, n + 1):
            ts = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(start + seq * (63_000_000 / n)))
            rec = {"seq": seq, "id": f"mem_bench{seq:012d}", "ts": ts, "kind": rng.choice(KINDS),
                   "text": sentence(rng), "prev": prev,
                   "scope": rng.choice(SCOPES)}
            if seq % 50 == 0:
                rec["supersedes"] = f"mem_bench{seq - 1:012d}"
            rec = records.seal(rec)
            prev = rec["sha256"]
            f.write(records.format_line(rec))


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def browser_times(srv: UiServer, runs: int, queries: list[str]) -> dict[str, float]:
    chromium, driver = find_chromium()
    if chromium is None or driver is None:
        raise SystemExit("chromium and chromedriver are needed (apt-get install chromium chromium-driver)")
    fcp, listed, static, search, floor = [], [], [], [], []
    for _ in range(runs):
        with Browser(chromium, driver, 1280, 900) as b:  # the floor: a one-line page in a fresh browser
            b.get("data:text/html,<p>floor</p>")
            floor.append(b.wait("const e = performance.getEntriesByName('first-contentful-paint')[0];"
                                " return e && e.startTime", 60))
        with Browser(chromium, driver, 1280, 900) as b:
            b.get(srv.url)
            b.wait("return document.body.dataset.ready === 'list' && performance.getEntriesByName('first-contentful-paint').length", 60)
            t = b.js("return [performance.getEntriesByName('first-contentful-paint')[0].startTime,"
                     " performance.getEntriesByName('list-rendered')[0].startTime]")
            fcp.append(t[0])
            listed.append(t[1])
            static.append(b.js_async(
                "const done = arguments[0]; const t = performance.now();"
                " fetch('/static/icon.svg?' + Math.random(), {cache: 'no-store'}).then(r => r.text())"
                ".then(() => done(performance.now() - t));"))
            for q in queries[:5]:
                search.append(b.search_ms(q))
    return {"fcp": p50(fcp), "list": p50(listed), "static": p50(static), "search": p50(search), "floor": p50(floor)}


def main() -> int:
    os.environ.setdefault("RETAINED_EMBED", "off")  # the page and the index, not the embedding model
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir")
    args = ap.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="retained-ui-bench-"))
    store_dir = base / "store"
    rng = random.Random(11)
    t = time.perf_counter()
    shutil.rmtree(store_dir, ignore_errors=True)  # always afresh: the queries come from the text written
    bulk(store_dir, args.records, rng)
    with Store(store_dir) as s:
        s.reindex()
    print(f"set-up: {args.records} records written and indexed in {time.perf_counter() - t:.1f} s")
    with Store(store_dir) as s:
        s.index.catch_up()
        t = time.perf_counter()
        shutil.copyfile(store_dir / "log.jsonl", base / "copy.jsonl")
        floor = time.perf_counter() - t
        exp = {}
        for fmt, out in (("jsonl", base / "export.jsonl"), ("markdown", base / "md")):
            t = time.perf_counter()
            r = export(s, scopes=None, fmt=fmt, path=str(out))
            exp[fmt] = (time.perf_counter() - t, r)
    print(f"export jsonl    {exp['jsonl'][0] * 1000:8.0f} ms  ({exp['jsonl'][1]['records']} records; target < 5000 ms)")
    print(f"export markdown {exp['markdown'][0] * 1000:8.0f} ms  ({exp['markdown'][1]['projects']} files)")
    print(f"baseline: copy of the log file {floor * 1000:.0f} ms")
    with UiServer(store_dir) as srv:
        queries = [a_query(rng) for _ in range(20)]
        print("queries:", ", ".join(queries[:5]))
        t = browser_times(srv, args.runs, queries)
    print(f"page first contentful paint, 50 records on screen p50 {t['fcp']:6.0f} ms  (target < 300 ms)")
    print(f"page script ready (list-rendered mark) p50 {t['list']:6.0f} ms")
    print(f"search, typed to hits shown  p50 {t['search']:6.0f} ms  (target < 300 ms)")
    print(f"baseline: fetch of a static file from the same server p50 {t['static']:.0f} ms")
    print(f"baseline: first contentful paint of a one-line page in a fresh browser p50 {t['floor']:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
