"""Search ranking: words (FTS5 bm25), meaning (cosine), exact identifiers, blended into one order.

The recipe (see the semantic tier's research notes): each candidate list is min-max scaled to 0..1
over its own candidates, then score = 0.8·meaning + 0.2·words (a record missing from a list scores 0
there). Plain rank fusion (RRF) is not used: it gives a list full of noise words an equal vote. Records
holding an identifier, path, error code or version of the query verbatim rank first whatever their
blend (each such token adds 1 to the score, so scores still fall with rank).

Work stays bounded as the store grows: at most RANK_CAP full-text matches are ranked (the newest),
the meaning side looks at the best few hundred vectors after one matrix-vector product, and the
counts say when they are a lower bound.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from typing import Any

from .index import phrase_query, quote_query

MEANING_WEIGHT = 0.8
# When no record holds every word, the any-word list is mostly noise words ('what', 'do', 'code'):
# it keeps half its weight (0.1). On the repository's eval this moved one paraphrase to rank 1 and
# changed nothing else.
ANY_WORD_FACTOR = 0.5
# Cosine from which a record counts as found by meaning. The lowest correct answer the research saw
# scored 0.23, so the floor sits below it; it separates 'found' from 'the nearest of nothing'.
MEANING_FLOOR = 0.2
ALL_VECTORS = 2000  # up to this many vectors, every one is a meaning candidate (the research's recipe)
MEANING_CANDIDATES = 256
LEXICAL_CANDIDATES = 100
IDENTIFIER_CANDIDATES = 50

_TOKEN = r"[^\s\"'`()\[\]{}<>,;!?]+"
_CAMEL = r"[a-z][A-Z]|[A-Z]{2,}"


def identifiers(query: str) -> list[str]:
    """Tokens of the query that look like identifiers, paths, error codes or versions."""
    out: dict[str, None] = {}
    for tok in re.findall(_TOKEN, query):  # re caches compiled patterns; nothing is compiled at import
        tok = tok.strip(".:-/#@*")
        if len(tok) < 2 or not any(c.isalnum() for c in tok):
            continue
        if any(c.isdigit() for c in tok) or any(c in tok for c in "_./:-#@\\") or re.search(_CAMEL, tok):
            out[tok] = None
    return list(out)[:8]


def _exact_patterns(idents: list[str]) -> list[re.Pattern[str]]:
    return [re.compile(r"(?<!\w)" + re.escape(t) + r"(?!\w)", re.IGNORECASE) for t in idents]


class Candidate:
    __slots__ = ("row", "bm25", "cosine", "meaning", "tier", "score", "match")

    def __init__(self, row: dict[str, Any], bm25: float | None = None) -> None:
        self.row = row
        self.bm25 = bm25            # FTS5 rank: lower is better; None = not matched by words
        self.cosine: float | None = None  # None = no vector (semantic off, or not embedded yet)
        self.meaning = False        # cosine cleared MEANING_FLOOR
        self.tier = 0               # identifiers of the query this record holds verbatim
        self.score = 0.0
        self.match = "words"


class Found:
    __slots__ = ("hits", "total", "exact", "mode", "known_before")

    def __init__(self, hits: list[Candidate], total: int, exact: bool, mode: str) -> None:
        self.hits, self.total, self.exact = hits, total, exact
        self.mode = mode  # "all": every word was required; "any": no record had every word
        self.known_before: set[str] = set()


def meaning_query(store: Any, query: str, inline_embed: int, warnings: list[str],
                  need_vectors: bool) -> tuple[str, Any]:
    """('on', query vector) or ('off: <reason>', None). Embeds new records first (up to inline_embed
    of them here, the rest in a background thread), so records found by words are found by meaning."""
    from .embed import Unavailable
    from .index import query_terms

    sem = store.semantic()
    reason = sem.off_reason()
    if reason:
        return f"off: {reason}", None
    if not query_terms(query):
        return "on", None
    try:
        sem.prefetch()  # the vectors are read while the query is embedded
        pending = sem.pending()
        if pending and need_vectors and pending > inline_embed and not sem.index.has_vectors(sem.embedder.key):
            return "off: the records are not embedded yet", None
        if pending:
            sem.catch_up(limit=min(pending, inline_embed))
            left = pending - min(pending, inline_embed)
            if left > 0:
                sem.start_background()
                warnings.append(f"{left} record(s) are not embedded yet (under way); they are found by words only "
                                "until then (`retained reindex` embeds them all now)")
        return "on", sem.query_vector(query)
    except Unavailable as e:
        return f"off: {e}", None


def rank(store: Any, query: str, terms: list[str], qvec: Any, filters: dict[str, Any], k: int) -> Found:
    idx = store.index
    mode = "all"
    lex_total, exact = 0, True
    lex_rows: list[dict[str, Any]] = []
    match = quote_query(terms)
    want = max(LEXICAL_CANDIDATES, k * 5)
    if match is not None:
        lex_total, exact, lex_rows = idx.ranked(match, limit=want, need=k, **filters)
        if lex_total == 0 and len(terms) > 1:
            mode = "any"
            match = quote_query(terms, any_word=True)
            lex_total, exact, lex_rows = idx.ranked(match, limit=want, need=k, **filters)
    cands: dict[int, Candidate] = {row["line"]: Candidate(row, bm25=row["rank"]) for row in lex_rows}
    total = lex_total

    idents = identifiers(query)
    patterns = _exact_patterns(idents)
    if idents:
        pm = phrase_query(idents)
        if pm is not None:
            for row in idx.ranked(pm, limit=IDENTIFIER_CANDIDATES, **filters)[2]:
                if row["line"] not in cands and any(p.search(row["text"]) for p in patterns):
                    cands[row["line"]] = Candidate(row)
                    total += 1  # holds the identifier but not every word of the query

    lo = hi = None
    if qvec is not None:
        lo, hi, meaning_exact = _meaning(store, qvec, filters, cands)
        exact = exact and meaning_exact
        # Records found by meaning only: do they hold the words too (beyond the lexical top list)?
        missing = [line for line, c in cands.items() if c.bm25 is None]
        if missing and match is not None:
            for row in idx.ranked(match, limit=len(missing), only=missing, **filters)[2]:
                if row["line"] in cands:
                    cands[row["line"]].bm25 = row["rank"]
        total += sum(1 for c in cands.values() if c.meaning and c.bm25 is None and c.tier == 0
                     and not any(p.search(c.row["text"]) for p in patterns))

    strengths = [-c.bm25 for c in cands.values() if c.bm25 is not None]
    smin, smax = (min(strengths), max(strengths)) if strengths else (0.0, 0.0)
    for c in cands.values():
        lex = 0.0 if c.bm25 is None else (1.0 if smax == smin else (-c.bm25 - smin) / (smax - smin))
        if qvec is None:
            blend = lex
        else:
            m = 0.0
            if c.cosine is not None and lo is not None and hi is not None:
                m = 1.0 if hi == lo else min(max((c.cosine - lo) / (hi - lo), 0.0), 1.0)
            w = (1 - MEANING_WEIGHT) * (ANY_WORD_FACTOR if mode == "any" else 1.0)
            blend = (1 - w) * m + w * lex
        c.tier = sum(1 for p in patterns if p.search(c.row["text"]))
        c.score = c.tier + blend
        words = c.bm25 is not None or c.tier > 0
        c.match = "both" if words and c.meaning else "meaning" if c.meaning else "words"
    ordered = sorted(cands.values(), key=lambda c: (-c.score, -c.row["seq"]))[:k]
    found = Found(ordered, max(total, len(ordered)), exact, mode)
    if filters.get("as_of") is not None:
        later = [c.row["superseded_by"] for c in ordered if c.row.get("superseded_by")]
        found.known_before = {i for i, ts in idx.ts_of(later).items() if ts <= filters["as_of"]}
    return found


def _meaning(store: Any, qvec: Any, filters: dict[str, Any], cands: dict[int, Candidate]) -> tuple[Any, Any, bool]:
    """Add meaning candidates and every candidate's cosine; (min, max) of the meaning list, exactness."""
    import numpy as np

    sem = store.semantic()
    lines, sims, approximate = sem.similarities(qvec)
    n = len(lines)
    if not n:
        return None, None, True
    m = n if n <= ALL_VECTORS else min(n, MEANING_CANDIDATES)
    best: dict[int, tuple[dict[str, Any], float]] = {}
    while True:
        top = np.argpartition(-sims, m - 1)[:m] if m < n else np.arange(n)
        by_line = {int(lines[i]): float(sims[i]) for i in top}
        best = {}
        for row in store.index.rows_for_lines(list(by_line), **filters):
            cos = by_line[row["mline"]]
            key = row["line"]
            if key not in best or cos > best[key][1]:
                best[key] = (row, cos)
        if m >= n or len(best) >= MEANING_CANDIDATES // 2:
            break
        m = min(n, m * 4)
    if not best:
        return None, None, True
    cut = float(sims[top].min()) if m < n else -1.0
    exact = not approximate and (m >= n or cut < MEANING_FLOOR)  # every record above the floor was looked at
    values = [cos for _, cos in best.values()]
    lo, hi = min(values), max(values)
    for key, (row, cos) in best.items():
        c = cands.get(key)
        if cos >= MEANING_FLOOR:
            if c is None:
                c = cands[key] = Candidate(row)
            c.meaning = True
        if c is not None:
            c.cosine = cos
    # Word-only candidates outside the meaning list: their own cosine, if they have a vector.
    rest = [key for key, c in cands.items() if c.cosine is None]
    if rest:
        pos = np.searchsorted(lines, rest)
        for key, p in zip(rest, pos, strict=True):
            if p < n and int(lines[p]) == key:
                cands[key].cosine = float(sims[p])
    return lo, hi, exact
