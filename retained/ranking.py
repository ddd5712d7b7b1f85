"""Search ranking: words (FTS5 bm25), meaning (cosine), exact identifiers, blended into one score.

A hit's `score` is in 0..1 and means the same for every query, so that a weak best hit looks weak:
* closeness in meaning: the cosine mapped onto 0..1 (0 at MEANING_ZERO, 1 at MEANING_FULL or above);
* words: half the share of the query's words the record holds, half how well bm25 ranks it among the
  records that hold any of them (0 when it holds none); a record naming a tool of the kind the query
  speaks of (retained/vocabulary.py) holds BRIDGE_WORDS at least; when fewer than k records hold every
  word, records holding some fill the rest, below them;
* blend = (1 - w) * meaning + w * words, w following the words' evidence: 0.1 when the best record
  holds little of the query (the any-word list is mostly noise words such as 'what' and 'do') up to
  0.4 when records hold every word; with the semantic tier off, words alone;
* when the query names identifiers, paths, error codes or versions, score = (share of them the record
  holds verbatim + blend) / 2: a record holding them ranks above every record that does not;
* one source does not fill the top: past two hits of one `source`, each further one scores less.
Hits are ordered by score, so scores fall with rank. Plain rank fusion (RRF) is not used: it gives a
list full of noise words an equal vote (see the semantic tier's research notes).

A record counts as found by meaning only from a floor (`meaning_floor`): the nearest record of an
unrelated query is still somewhere, and showing it "by meaning" would waste the reader's time.

Work stays bounded as the store grows: at most RANK_CAP full-text matches are ranked (the newest),
the meaning side looks at the best few hundred vectors after one matrix-vector product, and the
counts say when they are a lower bound.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .embed import Semantic, Unavailable
from .index import Index, phrase_query, query_terms, quote_query
from .vocabulary import bridged

# The weight of words in the blend follows their evidence: from WORDS_WEIGHT_ANY when no record holds
# any share of the query's words worth the name (the any-word list is then mostly noise words such as
# 'what', 'do', 'code') to WORDS_WEIGHT_ALL when a record holds every one of them, in proportion to the
# share the best record holds. A small model's closeness must not outvote strong word evidence. On the
# dev splits of bench/eval this made the top hit of sources.json come from a gold source as often as
# words alone do (11/12, was 10/12) and changed nothing on the other sets for any maximum from 0.2 to 0.5.
WORDS_WEIGHT_ALL = 0.4
WORDS_WEIGHT_ANY = 0.1
# One source (a conversation log, a long note in several records) keeps SOURCE_SHARE hits at their
# score; each further one scores SOURCE_DECAY times less per hit of it before (see `spread`).
SOURCE_SHARE = 2
SOURCE_DECAY = 0.8
# Cosine from which a record counts as found by meaning. The lowest correct answer the research saw
# scored 0.23, so the floor sits below it; it separates 'found' from 'the nearest of nothing'.
MEANING_FLOOR = 0.2
ONE_WORD_FLOOR = 0.3       # ... for a query of one word (see `meaning_floor`)
SHORT_RECORD_FLOOR = 0.45  # ... for a record of one or two words
# Closeness in meaning is 0 up to MEANING_ZERO and 1 from MEANING_FULL. On both evals in bench/eval the
# answers' cosines ran from 0.13 to 0.81 (median 0.45) and unrelated prompts' best from 0.1 to 0.35.
MEANING_ZERO = 0.1
MEANING_FULL = 0.7
MEANING_CANDIDATES = 256
LEXICAL_CANDIDATES = 100
IDENTIFIER_CANDIDATES = 50
BRIDGE_CANDIDATES = 50
# Words evidence of a record that names a tool of the kind the query speaks of, without its words.
BRIDGE_WORDS = 0.5
# Words evidence of a record holding every unspaced part of the query (Chinese, Japanese) as a substring.
PART_WORDS = 0.75

_TOKEN = r"[^\s\"'`()\[\]{}<>,;!?]+"
_WORD = r"\w+"
_CAMEL = r"[a-z][A-Z]|[A-Z]{2,}"


def unspaced_parts(query: str) -> list[str]:
    """The runs of the query in scripts written without spaces (Han, kana, Hangul syllables written
    together), two characters or more: parts of words full-text search cannot find (retained/index/search.py)."""
    if query.isascii():  # most queries: compiling the pattern's ranges costs a prompt hook ~2 ms
        return []
    runs = re.findall(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002ffff]{2,}",
                      query)
    return list(dict.fromkeys(runs))[:8]


def identifiers(query: str) -> list[str]:
    """Tokens of the query that look like identifiers, paths, error codes or versions."""
    out: dict[str, None] = {}
    for tok in re.findall(_TOKEN, query):  # re caches compiled patterns; nothing is compiled at import
        tok = tok.strip(".:-/#@*")
        if len(tok) < 2 or not any(c.isalnum() for c in tok):
            continue
        # An acronym (UI, CSS, HTTP) is a word, not an identifier: held verbatim by 'ui-kit' or
        # 'src/lib/ui', it put those first for 'when will the old back-office UI go away'.
        acronym = tok.isalpha() and tok.isupper()
        if any(c.isdigit() for c in tok) or any(c in tok for c in "_./:-#@\\") or (re.search(_CAMEL, tok) and not acronym):
            out[tok] = None
    return list(out)[:8]


def _exact_patterns(idents: list[str]) -> list[re.Pattern[str]]:
    return [re.compile(r"(?<!\w)" + re.escape(t) + r"(?!\w)", re.IGNORECASE) for t in idents]


class Candidate:
    __slots__ = ("row", "bm25", "cosine", "meaning", "tier", "score", "match", "lead", "bridge", "some", "part")

    def __init__(self, row: dict[str, Any], bm25: float | None = None) -> None:
        self.row = row
        self.bm25 = bm25            # FTS5 rank: lower is better; None = not matched by words
        self.cosine: float | None = None  # None = no vector (semantic off, or not embedded yet)
        self.meaning = False        # cosine cleared its floor (`meaning_floor`)
        self.lead: float | None = None  # cosine minus the best other record's (or MEANING_FLOOR)
        self.tier = 0               # identifiers of the query this record holds verbatim
        self.bridge = 0             # holds a tool's name the query speaks of by its kind (vocabulary.py):
        #                             2 when the kind was named by a phrase of 2+ words, 1 by one word
        self.some = False           # holds some of the query's words where others hold them all (bm25 of that list)
        self.part = False           # holds every unspaced part of the query (Chinese, Japanese) as a substring
        self.score = 0.0
        self.match = "words"


class Found:
    __slots__ = ("hits", "total", "exact", "mode", "known_before")

    def __init__(self, hits: list[Candidate], total: int, exact: bool, mode: str) -> None:
        self.hits, self.total, self.exact = hits, total, exact
        self.mode = mode  # "all": every word was required; "any": no record had every word
        self.known_before: set[str] = set()


def meaning_query(sem: Semantic, query: str, inline_embed: int, warnings: list[str],
                  need_vectors: bool) -> tuple[str, Any]:
    """('on', query vector) or ('off: <reason>', None). Embeds new records first (up to inline_embed
    of them here, the rest in a background thread), so records found by words are found by meaning."""
    reason = sem.off_reason()
    if reason:
        return f"off: {reason}", None
    if not query_terms(query):
        return "on", None
    try:
        sem.prefetch()  # the vectors are read while the query is embedded
        pending, embedder = sem.pending(), sem.embedder  # an embedder: off_reason said none is missing
        if pending and need_vectors and pending > inline_embed and embedder is not None \
                and not sem.index.has_vectors(embedder.key):
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


def rank(idx: Index, sem: Semantic, query: str, terms: list[str], qvec: Any, filters: dict[str, Any],
         k: int) -> Found:
    """The best `k` records for the query in the index, scored (see the module docstring); `qvec`, the
    query's vector from `meaning_query`, or None to rank by words alone."""
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
            if match is not None:
                lex_total, exact, lex_rows = idx.ranked(match, limit=want, need=k, **filters)
    cands: dict[int, Candidate] = {row["line"]: Candidate(row, bm25=row["rank"]) for row in lex_rows}
    total = lex_total
    if mode == "all" and 0 < lex_total < k and len(terms) > 1:
        # Fewer records hold every word than were asked for: those that hold some of them fill the
        # rest, after every record holding them all (`_score`), instead of a short answer.
        some = quote_query(terms, any_word=True)
        for row in idx.ranked(some, limit=want, need=k, **filters)[2] if some is not None else []:
            if row["line"] not in cands:
                cands[row["line"]] = c = Candidate(row, bm25=row["rank"])
                c.some = True

    idents = identifiers(query)
    patterns = _exact_patterns(idents)
    if idents:
        pm = phrase_query(idents)
        if pm is not None:
            for row in idx.ranked(pm, limit=IDENTIFIER_CANDIDATES, **filters)[2]:
                if row["line"] not in cands and any(p.search(row["text"]) for p in patterns):
                    cands[row["line"]] = Candidate(row)
                    total += 1  # holds the identifier but not every word of the query

    parts = unspaced_parts(query)
    if parts:  # a part of a word in a script written without spaces: found as a substring
        whole, held = idx.containing(parts, limit=want, **filters)
        exact = exact and whole
        if held and lex_total == 0:
            mode = "all"  # they hold what the query holds; the any-word note would say otherwise
        for row in held:
            if row["line"] not in cands:
                cands[row["line"]] = Candidate(row)
                total += 1
            cands[row["line"]].part = True

    names = bridged(query)
    for strong in (False, True):  # records naming a tool of the kind the query speaks of ('the CI' → GitHub Actions)
        bm = phrase_query([n for n, s in names.items() if s is strong])
        for row in idx.ranked(bm, limit=BRIDGE_CANDIDATES, **filters)[2] if bm is not None else []:
            if row["line"] not in cands:
                cands[row["line"]] = Candidate(row)
                total += 1
            held_by = cands[row["line"]]
            held_by.bridge = 2 if strong else max(held_by.bridge, 1)

    if qvec is not None:
        exact = _meaning(idx, sem, qvec, terms, filters, cands) and exact
        # Records found by meaning only: do they hold the words too (beyond the lexical top list)?
        missing = [line for line, c in cands.items() if c.bm25 is None]
        if missing and match is not None:
            for row in idx.ranked(match, limit=len(missing), only=missing, **filters)[2]:
                if row["line"] in cands:
                    cands[row["line"]].bm25 = row["rank"]
        total += sum(1 for c in cands.values() if c.meaning and c.bm25 is None and c.tier == 0 and not c.bridge and not c.part
                     and not any(p.search(c.row["text"]) for p in patterns))

    _score(list(cands.values()), terms, patterns, qvec is not None, mode)
    ordered = spread(list(cands.values()))[:k]
    found = Found(ordered, max(total, len(ordered)), exact, mode)
    if filters.get("as_of") is not None:
        later = [c.row["superseded_by"] for c in ordered if c.row.get("superseded_by")]
        found.known_before = {i for i, ts in idx.ts_of(later).items() if ts <= filters["as_of"]}
    return found


def closeness(cosine: float | None) -> float:
    """A cosine as closeness in meaning, 0..1: 0 at MEANING_ZERO or below, 1 at MEANING_FULL or above."""
    if cosine is None:
        return 0.0
    return min(max((cosine - MEANING_ZERO) / (MEANING_FULL - MEANING_ZERO), 0.0), 1.0)


def words_held(terms: list[str], text: str) -> int:
    """How many of the query's words the text holds (by prefix stem: 'migrate' holds for 'migrations')."""
    words = {w.lower() for w in re.findall(_WORD, text)}
    stems = {_stem(w) for w in words}
    return sum(1 for t in terms if t in words or _stem(t) in stems or (len(t) >= 4 and any(w.startswith(t) for w in words)))


def word_share(terms: list[str], text: str) -> float:
    return words_held(terms, text) / len(terms) if terms else 0.0


def _stem(word: str) -> str:
    """A crude prefix stem, enough to tell 'migrate' and 'migrations' are one word."""
    return word[: max(4, len(word) - 3)] if len(word) > 4 else word


def _score(cands: list[Candidate], terms: list[str], patterns: list[re.Pattern[str]], semantic: bool,
           mode: str) -> None:
    """Every candidate's score, 0..1 and the same for any query: see the module docstring."""
    rel = {False: _strengths([c for c in cands if not c.some]), True: _strengths([c for c in cands if c.some])}
    w = 1.0
    if semantic:  # words weigh with the evidence they give: how much of the query the best record holds
        best = 1.0 if mode == "all" else max((word_share(terms, c.row["text"]) for c in cands if c.bm25 is not None),
                                             default=0.0)
        w = WORDS_WEIGHT_ANY + (WORDS_WEIGHT_ALL - WORDS_WEIGHT_ANY) * best
    for c in cands:
        words = 0.0
        if c.bm25 is not None:  # half how much of the query it holds, half how well bm25 ranks it
            lo, hi = rel[c.some]
            strength = 1.0 if hi == lo else (-c.bm25 - lo) / (hi - lo)
            words = 0.5 * (1.0 if mode == "all" and not c.some else word_share(terms, c.row["text"])) + 0.5 * strength
            if c.some:  # below every record holding all of the words
                words *= 0.5
        if c.bridge:
            words = max(words, BRIDGE_WORDS)
        if c.part:
            words = max(words, PART_WORDS)
        blend = (1 - w) * closeness(c.cosine) + w * words
        c.tier = sum(1 for p in patterns if p.search(c.row["text"]))
        c.score = blend if not patterns else (c.tier / len(patterns) + blend) / 2
        held = c.bm25 is not None or c.tier > 0 or c.part
        c.match = "both" if held and c.meaning else "meaning" if c.meaning else "words"


def _strengths(cands: list[Candidate]) -> tuple[float, float]:
    strengths = [-c.bm25 for c in cands if c.bm25 is not None]
    return (min(strengths), max(strengths)) if strengths else (0.0, 0.0)


def spread(cands: list[Candidate]) -> list[Candidate]:
    """Best first, with one source kept from filling the top: past SOURCE_SHARE hits of one `source`
    (a conversation log, a long note in several records), each further hit of it scores SOURCE_DECAY
    times less for every one before it, so other sources' hits come up between them. Scores still fall
    with rank."""
    ordered = sorted(cands, key=_best_first)
    seen: dict[str, int] = {}
    decayed = False
    for c in ordered:
        source = c.row.get("source")
        if not source:
            continue
        n = seen[source] = seen.get(source, 0) + 1
        if n > SOURCE_SHARE:
            c.score *= SOURCE_DECAY ** (n - SOURCE_SHARE)
            decayed = True
    return sorted(ordered, key=_best_first) if decayed else ordered


def _best_first(c: Candidate) -> tuple[Any, ...]:
    """Score, then the newest in the team's order (clock, then id): ties fall the same on every clone."""
    return (-c.score, -c.row.get("ord_ms", 0), -c.row.get("ord_n", 0), tuple(-ord(ch) for ch in c.row["id"]))


def meaning_floor(terms: list[str], text: str) -> float:
    """The cosine from which a record counts as found by meaning for this query.

    A one-word query's vector is a weak guide (a brand name is near unrelated sentences: '1Password'
    to 'Branch names follow...' is 0.25), and a record of a word or two is near any short query ('xxxx'
    to 'hello' is 0.30, 'foo' to 'hi' 0.40): both need more than MEANING_FLOOR."""
    if len(text) < 64 and len(text.split()) <= 2:
        return SHORT_RECORD_FLOOR
    return ONE_WORD_FLOOR if len(terms) < 2 else MEANING_FLOOR


def _meaning(idx: Index, sem: Semantic, qvec: Any, terms: list[str], filters: dict[str, Any],
             cands: dict[int, Candidate]) -> bool:
    """Add meaning candidates and every candidate's cosine and lead; True when every record that could
    clear the floor was looked at."""
    import numpy as np  # lazy: +80 ms (-X importtime), and a search by words alone never needs it

    lines, sims, approximate = sem.similarities(qvec)
    n = len(lines)
    if not n:
        return True
    # Only records above the floor can be found by meaning, and the scores are absolute: the rows of
    # the best MEANING_CANDIDATES above it are enough (reading a row for every vector was most of a
    # search's time at 1k records). Filters that leave too few widen the look.
    m = min(n, MEANING_CANDIDATES)
    while True:
        top = np.argpartition(-sims, m - 1)[:m] if m < n else np.arange(n)
        cut = float(sims[top].min())
        top = top[sims[top] >= MEANING_FLOOR]
        by_line = {int(lines[i]): float(sims[i]) for i in top}
        best: dict[int, tuple[dict[str, Any], float]] = {}
        for row in idx.rows_for_lines(list(by_line), **filters) if by_line else []:
            cos = by_line[row["mline"]]
            key = row["line"]
            if key not in best or cos > best[key][1]:
                best[key] = (row, cos)
        if m >= n or cut < MEANING_FLOOR or len(best) >= MEANING_CANDIDATES // 2:
            break
        m = min(n, m * 4)
    exact = not approximate and (m >= n or cut < MEANING_FLOOR)  # every record above the floor was looked at
    first, second = _two_best(cos for _, cos in best.values())
    for key, (row, cos) in best.items():
        c = cands.get(key)
        if cos >= meaning_floor(terms, row["text"]):
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
    for c in cands.values():  # how far each stands above the closest other record in the scope
        if c.cosine is not None:
            c.lead = c.cosine - max(second if c.cosine >= first else first, MEANING_FLOOR)
    return exact


def _two_best(values: Iterable[float]) -> tuple[float, float]:
    first = second = -1.0
    for v in values:
        if v > first:
            first, second = v, first
        elif v > second:
            second = v
    return first, second
