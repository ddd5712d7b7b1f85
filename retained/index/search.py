"""Full-text search: turning user words into safe FTS5 queries, and the ranked queries over them.

`query_terms` / `quote_query` / `phrase_query` are pure (every free-text query passes through
them, so FTS5 operators in user input stay plain text). `ranked` returns the best bm25 matches
folded onto the current record of their chain; `rows_for_lines` gives the rows a read may show for
lines found another way (by meaning); `similar_candidates` serves the near-duplicate check of a write.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

from .filters import filter_clause, marks, visible
from .schema import rows

_WORD = re.compile(r"\w+", re.UNICODE)

# Words too common to narrow a search; dropped from a query unless it holds nothing else.
STOPWORDS = frozenset(
    "a an and are as at be but by for from had has have i if in into is it its of on or so than that the their "
    "then there these they this to was we were what when where which while who will with you your".split()
)

# Past this many full-text matches only the newest RANK_CAP are ranked, and the count they give is
# reported as a lower bound: ranking cost stays bounded however common a word is (measured here:
# bm25 ranking and the count cost a few µs a match each on an idle core, far more on a busy one).
RANK_CAP = 5_000


def query_terms(query: str) -> list[str]:
    """The searchable words of any user string, lower-cased, deduplicated, stopwords dropped."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:64]
    content = [w for w in words if w not in STOPWORDS]
    return content or words


def _prefixable(term: str) -> bool:
    # Words of four letters or more also match longer words (postgres → PostgreSQL); the porter
    # tokenizer stems both sides, so migrate → migrations as well. Numbers and short words stay exact.
    return len(term) >= 4 and not any(c.isdigit() for c in term)


def quote_query(terms: list[str], *, any_word: bool = False, prefix: bool = True) -> str | None:
    """A safe FTS5 query: each word quoted, so FTS5 operators in user input are plain text.

    All words must match (implicit AND) unless `any_word`; words of 4+ letters match as prefixes
    (after stemming) unless `prefix` is false. None when there is no word.
    """
    if not terms:
        return None
    quoted = ['"' + w.replace('"', '""') + '"' + ("*" if prefix and _prefixable(w) else "") for w in terms]
    return (" OR " if any_word else " ").join(quoted)


def phrase_query(phrases: list[str]) -> str | None:
    """Each string as an exact FTS5 phrase (its words in order), OR'ed: for identifiers and paths."""
    quoted = []
    for p in phrases:
        words = _WORD.findall(p.lower())
        if words:
            quoted.append('"' + " ".join(words).replace('"', '""') + '"')
    return " OR ".join(quoted) if quoted else None


class _Shape:
    """The parts of a ranked query that depend on folding matches onto chain heads."""

    def __init__(self, fold: bool, filters: dict[str, Any]) -> None:
        self.fold = fold
        self.where, self.params = filter_clause("h" if fold else "r", **filters)
        self.join = " CROSS JOIN records h ON h.line = r.head" if fold else ""  # matches drive the join
        self.cols = "h.*, MIN(m.rank) AS rank" if fold else "r.*, m.rank AS rank"
        # ties in rank go to the newest in the team's order (queries.NEWEST), the same on every clone
        self.tail = (" GROUP BY r.head ORDER BY rank, h.ord_ms DESC, h.ord_n DESC, h.id DESC LIMIT ?" if fold
                     else " ORDER BY rank, r.ord_ms DESC, r.ord_n DESC, r.id DESC LIMIT ?")


def ranked(db: sqlite3.Connection, match: str, *, scopes: list[str] | None, kind: str | None, as_of: str | None,
           include_superseded: bool, limit: int, only: list[int] | None = None,
           cap: int | None = None, need: int | None = None) -> tuple[int, bool, list[dict[str, Any]]]:
    """Full-text matches, best bm25 first: (total, total is exact, rows with `rank` and `line`).

    Without include_superseded or as_of each match folds onto the current record of its supersede
    chain (the head). `only`: consider just these result lines. Past `cap` matches only the newest
    `cap` are ranked and counted, and the total is a lower bound; when filters leave fewer than
    `need` rows there, the window grows. bm25 is computed once, inside FTS5's own top-N sort; the
    count joins the matches without scoring them.
    """
    filters = {"scopes": scopes, "kind": kind, "as_of": as_of, "include_superseded": include_superseded}
    shape = _Shape(not include_superseded and as_of is None, filters)
    if only is not None:
        return _ranked_only(db, match, only, shape, limit)
    cap = RANK_CAP if cap is None else cap
    while True:
        total, exact, found = _ranked_window(db, match, shape, limit, cap)
        # Filters (a rare scope or kind) left too few in the newest matches: look further back.
        if exact or len(found) >= (limit if need is None else need) or cap >= 1 << 30:
            return total, exact, found
        cap *= 8


def _ranked_window(db: sqlite3.Connection, match: str, shape: _Shape, limit: int,
                   cap: int) -> tuple[int, bool, list[dict[str, Any]]]:
    size = db.execute("SELECT COUNT(*) FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?)",
                      (match, cap + 1)).fetchone()[0]
    if size == 0:
        return 0, True, []
    window, wparams, exact = "", [], True
    if size > cap:
        bound = db.execute("SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                           (match, cap - 1)).fetchone()[0]
        window, wparams, exact, size = " AND fts.rowid >= ?", [bound], False, cap
    count_sql = (f"SELECT COUNT({'DISTINCT r.head' if shape.fold else '*'}) AS n FROM fts"
                 f" CROSS JOIN records r ON r.line = fts.rowid{shape.join} WHERE fts MATCH ?{window}{shape.where}")
    total = int(db.execute(count_sql, [match, *wparams, *shape.params]).fetchone()[0])
    if total == 0:
        return 0, exact, []
    n = max(limit * 4, 64)
    while True:
        # FTS5 keeps only the best n by bm25 while it scans; filters and folding come after, so when
        # they leave fewer than `limit`, look deeper.
        sql = (f"WITH m AS MATERIALIZED (SELECT rowid AS line, rank FROM fts WHERE fts MATCH ?"
               f"{window.replace('fts.rowid', 'rowid')} ORDER BY rank LIMIT ?)"
               f" SELECT {shape.cols} FROM m CROSS JOIN records r ON r.line = m.line{shape.join}"
               f" WHERE 1=1{shape.where}{shape.tail}")
        found = rows(db, sql, [match, *wparams, n, *shape.params, limit])
        if len(found) >= min(limit, total) or n >= size:
            return total, exact, found
        n *= 8


def _ranked_only(db: sqlite3.Connection, match: str, only: list[int], shape: _Shape,
                 limit: int) -> tuple[int, bool, list[dict[str, Any]]]:
    """`ranked` for just these result lines: which of them hold the words, with their bm25.

    `+rowid` keeps the line list away from FTS5, which otherwise may take it as equality
    constraints and run the whole (prefix) query once per line (measured at 100k for 256 lines
    and a common prefix: 2.4 s written as `rowid IN (SELECT value FROM json_each(?))`, 20 ms with
    `+rowid`); this way it walks the matches once and bm25 is computed for the kept lines only.
    The form this replaced did not hit that case in the bench: at 1M both took 0.30-0.33 s."""
    if not only:
        return 0, True, []
    keep = f"SELECT line FROM records WHERE head IN ({marks(only)})" if shape.fold else "SELECT value FROM json_each(?)"
    keep_params: list[Any] = list(only) if shape.fold else [json.dumps(list(only))]
    sql = (f"SELECT {shape.cols} FROM (SELECT rowid AS line, rank FROM fts WHERE fts MATCH ? AND +rowid IN ({keep})) m"
           f" CROSS JOIN records r ON r.line = m.line{shape.join} WHERE 1=1{shape.where}{shape.tail}")
    found = rows(db, sql, [match, *keep_params, *shape.params, limit])
    return len(found), True, found


def rows_for_lines(db: sqlite3.Connection, lines: list[int], *, scopes: list[str] | None, kind: str | None,
                   as_of: str | None, include_superseded: bool) -> list[dict[str, Any]]:
    """The records a read may show for these matched lines: each row is the record shown (the head
    of its chain unless include_superseded or as_of) plus `mline`, the line that matched."""
    if not lines:
        return []
    fold = not include_superseded and as_of is None
    where, params = filter_clause("h" if fold else "r", scopes, kind, as_of, include_superseded)
    out: list[dict[str, Any]] = []
    for start in range(0, len(lines), 900):  # SQLite's bound-parameter limit
        chunk = lines[start:start + 900]
        if fold:
            # CROSS JOIN: walk the given lines first (SQLite would otherwise start from a scope's rows).
            sql = (f"SELECT r.line AS mline, h.* FROM records r CROSS JOIN records h ON h.line = r.head"
                   f" WHERE r.line IN ({marks(chunk)})" + where)
        else:
            sql = f"SELECT r.line AS mline, r.* FROM records r WHERE r.line IN ({marks(chunk)})" + where
        out += rows(db, sql, [*chunk, *params])
    return out


# The near-duplicate check of a write looks at this many of the newest full-text matches (no bm25:
# scoring every match of common words was 92% of a write's time at 100k records, and grew with the store).
SIMILAR_WINDOW = 200


def similar_candidates(db: sqlite3.Connection, match: str | None, scope: str, limit: int) -> list[dict[str, Any]]:
    """Current records of the scope holding every word of `match`, newest first, among the newest
    SIMILAR_WINDOW matches (for near-duplicates: cost bounded however large the store)."""
    if match is None:
        return []
    return rows(db, "WITH m AS MATERIALIZED (SELECT rowid AS line FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?)"
                " SELECT r.id, r.kind, r.ts, r.text FROM m JOIN records r ON r.line = m.line"
                " WHERE r.scope = ? AND r.superseded_by IS NULL AND " + visible("r") + " ORDER BY m.line DESC LIMIT ?",
                (match, SIMILAR_WINDOW, scope, limit))


def known_texts(db: sqlite3.Connection, match: str | None, scope: str, text: str, limit: int) -> list[dict[str, Any]]:
    """Records of the scope, current or corrected (not retracted), that hold exactly `text` or every word of
    `match` (among the newest SIMILAR_WINDOW matches): what an import compares a line with, so that it neither
    adds what is there nor brings a corrected record back as current. Exact ones first."""
    cols = "r.id, r.kind, r.ts, r.text, r.superseded_by"
    out = rows(db, f"SELECT {cols} FROM records r WHERE r.scope = ? AND r.text = ? AND {visible('r')}"
               " ORDER BY r.superseded_by IS NOT NULL, r.line DESC LIMIT ?", (scope, text, limit))
    if match is None or len(out) >= limit:
        return out
    seen = {r["id"] for r in out}
    near = rows(db, "WITH m AS MATERIALIZED (SELECT rowid AS line FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?)"
                f" SELECT {cols} FROM m JOIN records r ON r.line = m.line"
                f" WHERE r.scope = ? AND {visible('r')} ORDER BY m.line DESC LIMIT ?",
                (match, SIMILAR_WINDOW, scope, limit))
    return out + [r for r in near if r["id"] not in seen][: limit - len(out)]


# Text in scripts written without spaces (Chinese, Japanese) is one FTS5 token per run of characters,
# so a part of such a word never matches by full-text search. Those parts are looked for as substrings
# in the newest SUBSTRING_WINDOW records instead (a scan: bounded, and the reply says when it stopped).
SUBSTRING_WINDOW = 20_000


def containing(db: sqlite3.Connection, parts: list[str], *, scopes: list[str] | None, kind: str | None,
               as_of: str | None, include_superseded: bool, limit: int) -> tuple[bool, list[dict[str, Any]]]:
    """(every record was looked at, the records a read may show whose text holds every one of `parts`),
    newest first, folded onto the current record of their chain as `rows_for_lines` does."""
    if not parts:
        return True, []
    like = " AND ".join("text LIKE ? ESCAPE '\\'" for _ in parts)
    patterns = ["%" + p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for p in parts]
    found = db.execute(f"SELECT line FROM (SELECT line, text FROM records WHERE tomb = 0 ORDER BY line DESC LIMIT ?)"
                       f" WHERE {like} LIMIT ?", (SUBSTRING_WINDOW, *patterns, max(limit * 4, 64))).fetchall()
    exact = db.execute("SELECT COUNT(*) <= ? FROM (SELECT 1 FROM records LIMIT ?)",
                       (SUBSTRING_WINDOW, SUBSTRING_WINDOW + 1)).fetchone()[0] == 1
    out: dict[str, dict[str, Any]] = {}
    for row in rows_for_lines(db, [line for (line,) in found], scopes=scopes, kind=kind, as_of=as_of,
                              include_superseded=include_superseded):
        out.setdefault(row["id"], row)
    return exact, list(out.values())[:limit]
