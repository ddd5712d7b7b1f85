"""The vectors table (the semantic tier): one embedding per record line and model, tagged with the
record's sha256 so that a rewritten line never keeps the vector of its old text.

Embedding runs in line order, so "pending" is every record after the last line this model embedded,
in each log the index reads (their rows have key ranges of their own: sources.py).
`vid` only grows (AUTOINCREMENT): a reader that keeps vectors in memory loads just the new ones.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ..embed import to_blob
from .kept import UNFIT_READ
from .sources import KEY_BITS

if TYPE_CHECKING:
    from typing import Any


def _spans(db: sqlite3.Connection, model: str) -> list[tuple[int, int]]:
    """Per log the index reads (issue 19: the local one, then teammates'), the key range after the
    last line `model` embedded in it: (after, last key of the range)."""
    top = db.execute("SELECT COALESCE(MAX(line), 0) FROM records").fetchone()[0]
    out = []
    for n in range((top >> KEY_BITS) + 1):
        lo, hi = n << KEY_BITS, (n + 1) << KEY_BITS
        after = db.execute("SELECT MAX(line) FROM vectors WHERE model = ? AND line > ? AND line <= ?",
                           (model, lo, hi)).fetchone()[0]
        out.append((lo if after is None else after, hi))
    return out


def pending_count(db: sqlite3.Connection, model: str) -> int:
    """Records after the last one embedded by `model` (in each log)."""
    return sum(int(db.execute("SELECT COUNT(*) FROM records WHERE line > ? AND line <= ?", span).fetchone()[0])
               for span in _spans(db, model))


def missing_count(db: sqlite3.Connection, model: str) -> int:
    """Records that have no vector of `model` (doctor's count; exact, one index probe a record)."""
    return int(db.execute("SELECT COUNT(*) FROM records r WHERE NOT EXISTS"
                          " (SELECT 1 FROM vectors v WHERE v.line = r.line AND v.model = ?)", (model,)).fetchone()[0])


def pending(db: sqlite3.Connection, model: str, limit: int) -> list[tuple[int, str, str]]:
    """(line, sha256, text) of the next `limit` records to embed, in line order (log by log)."""
    out: list[tuple[int, str, str]] = []
    for after, hi in _spans(db, model):
        if len(out) >= limit:
            break
        found = db.execute("SELECT line, sha256, text FROM records WHERE line > ? AND line <= ? ORDER BY line LIMIT ?",
                           (after, hi, limit - len(out)))
        out += [(line, sha, text) for line, sha, text in found]
    return out


def drop_others(db: sqlite3.Connection, model: str) -> int:
    """Delete vectors of any other model; how many went."""
    if db.execute("SELECT 1 FROM vectors WHERE model != ? LIMIT 1", (model,)).fetchone() is None:
        return 0
    return db.execute("DELETE FROM vectors WHERE model != ?", (model,)).rowcount


def put(db: sqlite3.Connection, model: str, found: list[tuple[int, str, Any]]) -> None:
    """Store (line, record sha256, vector or float16 blob) rows in one transaction; a row whose record
    changed meanwhile (another sha256 on that line now) is skipped."""
    def row(line: int, sha: str, vec: Any) -> tuple[Any, ...]:
        blob = vec if isinstance(vec, bytes) else to_blob(vec)
        return (model, len(blob) // 2, blob, line, sha)

    db.execute("BEGIN IMMEDIATE")
    try:
        db.executemany("INSERT OR REPLACE INTO vectors (line, model, sha256, dim, vec)"
                       " SELECT line, ?, sha256, ?, ? FROM records WHERE line = ? AND sha256 = ?",
                       (row(*f) for f in found))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def has_any(db: sqlite3.Connection, model: str) -> bool:
    return bool(db.execute("SELECT EXISTS (SELECT 1 FROM vectors WHERE model = ?)", (model,)).fetchone()[0])


def span(db: sqlite3.Connection) -> tuple[int, int]:
    """(lowest vid, highest vid): two rowid look-ups."""
    lo, hi = db.execute("SELECT COALESCE((SELECT vid FROM vectors ORDER BY vid LIMIT 1), 0),"
                        " COALESCE((SELECT vid FROM vectors ORDER BY vid DESC LIMIT 1), 0)").fetchone()
    return int(lo), int(hi)


def stats(db: sqlite3.Connection, model: str) -> tuple[int, int]:
    """(count, largest vid) of this model's vectors."""
    n, v = db.execute("SELECT COUNT(*), COALESCE(MAX(vid), 0) FROM vectors WHERE model = ?", (model,)).fetchone()
    return int(n), int(v)


def page(db: sqlite3.Connection, model: str, vid: int, limit: int) -> list[tuple[int, int, bytes, int]]:
    """(vid, line, blob, dim) of up to `limit` vectors of `model` after `vid`, by vid. A row another
    process wrote whose blob is not `dim` float16 values is left out and counted in kept.UNFIT_READ (each
    time it is read; a page of nothing else reads on); the reader checks the values (kept.fit_rows)."""
    while True:
        # `+model`: walk the table in vid order rather than the model index (which then needs a sort of
        # every row): half the time of a cold read, one model's vectors being nearly all.
        found = db.execute("SELECT vid, line, vec, dim FROM vectors WHERE +model = ? AND vid > ?"
                           " ORDER BY vid LIMIT ?", (model, vid, limit)).fetchall()
        fit = [r for r in found if isinstance(r[2], bytes) and isinstance(r[3], int) and len(r[2]) == 2 * r[3] > 0]
        if len(fit) < len(found):
            UNFIT_READ[0] += len(found) - len(fit)
        if fit or not found:
            return fit
        vid = found[-1][0]


def count_after(db: sqlite3.Connection, model: str, vid: int) -> int:
    """How many vectors of `model` come after `vid` (a walk of the rows after it, by vid)."""
    return int(db.execute("SELECT count(*) FROM vectors WHERE vid > ? AND +model = ?", (vid, model)).fetchone()[0])


def one_width(found: list[tuple[int, int, bytes, int]], vid: int) -> tuple[list[int], list[bytes], int, int]:
    """(lines, blobs, dim, last vid) of the page's first run of one width (the reader starts afresh
    where the width changes)."""
    lines: list[int] = []
    blobs: list[bytes] = []
    dim = found[0][3] if found else 0
    for v, line, vec, d in found:
        if d != dim:
            break
        lines.append(line)
        blobs.append(vec)
        vid = v
    return lines, blobs, dim, vid
