"""At 100k records: the page's first paint and a search, measured in Chromium and printed, and export
under 5 s. The browser figures are printed beside a same-run floor (a one-line page's first paint in
the same browser); bench/ui_bench.py gives the medians."""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

import pytest

from retained.store import Store
from retained.transfer import export
from tests.helpers.browser import browser_or_skip
from tests.helpers.ui_server import UiServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from store_bench import a_query
from ui_bench import bulk

N = 100_000


# Words only: the figures are the page's and the index's, not the embedding model's (whose cost the
# semantic tier's own benchmark reports).
LEXICAL = {"RETAINED_EMBED": "off"}


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    store_dir = tmp_path_factory.mktemp("ui100k") / "store"
    rng = random.Random(5)
    bulk(store_dir, N, rng)
    mp = pytest.MonkeyPatch()
    mp.setenv("RETAINED_EMBED", "off")
    try:
        with Store(store_dir) as s:
            s.reindex()
    finally:
        mp.undo()
    return store_dir, [a_query(rng) for _ in range(5)]


@pytest.mark.slow
def test_export_of_100k_records_takes_under_5_seconds(big, tmp_path, monkeypatch):
    monkeypatch.setenv("RETAINED_EMBED", "off")
    store_dir, _ = big
    with Store(store_dir) as s:
        s.index.catch_up()
        t = time.perf_counter()
        result = export(s, scopes=None, fmt="jsonl", path=str(tmp_path / "all.jsonl"))
        took = time.perf_counter() - t
    print(f"\nexport of {result['records']} records (jsonl): {took * 1000:.0f} ms")
    assert result["records"] == N and took < 5.0


@pytest.mark.slow
def test_first_paint_and_search_at_100k_records_measured_in_the_browser(big):
    store_dir, queries = big
    with UiServer(store_dir, env=LEXICAL) as server:
        b = browser_or_skip()
        try:
            floor, paints, searches = [], [], []
            for _ in range(3):
                b.get("data:text/html,<p>floor</p>")
                floor.append(b.wait("const e = performance.getEntriesByName('first-contentful-paint')[0]; return e && e.startTime"))
                b.get(server.url if not paints else server.origin + "/")
                paints.append(b.wait("const e = performance.getEntriesByName('first-contentful-paint')[0];"
                                     " return document.getElementById('records') && e && e.startTime"))
                b.wait("return document.body.dataset.ready === 'list'")
            # The first paint holds the records: they come in the one HTML response.
            assert len(b.js("return document.querySelectorAll('a.rec')")) == 50
            for q in queries:
                searches.append(b.search_ms(q))
        finally:
            b.close()
    paint, search = statistics.median(paints), statistics.median(searches)
    print(f"\n100k records: first contentful paint (records on screen) p50 {paint:.0f} ms {[round(p) for p in paints]}; "
          f"search p50 {search:.0f} ms {[round(s) for s in searches]}; "
          f"floor (one-line page, same browser) p50 {statistics.median(floor):.0f} ms; target < 300 ms each")
    # The target is 300 ms on an idle machine; a loaded one (CI sharing its cores) gets 5x slack
    # here so the suite stays honest about regressions without flaking. The figures are printed.
    assert paint < 1500 and search < 1500
