"""Vectors kept beside the index: one per (model identity, sha256 of the text), in `vectors.sqlite3`.

A vector is a function of the model and the text, and the most expensive thing derived from the log
(100-200 records a second on two cores). The index's own vectors table is cleared with the index: by
`retained reindex`, by a damaged index rebuilt from the log, by a replaced log. This file is not: the
rebuilt index takes each text's vector from here and asks the model only for texts it never saw.
An import of records already seen costs no model call either.

It holds no text and nothing the log does not imply; delete it and every text is embedded again.
A purge deletes the vectors of the purged texts (secure_delete zeroes their bytes, the WAL is
truncated), before the purge is applied and again after. A damaged file is discarded and started afresh.
A read-only store neither reads nor writes it (its in-memory index embeds what the file's index lacks).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

KEPT_NAME = "vectors.sqlite3"
_CHUNK = 500  # hashes per look-up (SQLite's default limit on parameters is far above)
#: How far from 1 a vector's length may be: every embedder's rows are L2-normalised, and float16 keeps a
#: unit vector's length within ~0.001 of 1. NaN, infinities, zeros and other lengths are not vectors of it.
NORM_TOLERANCE = 0.01


def unit_rows(rows: Any, dim: int | None = None) -> Any:
    """A boolean mask of the rows of `rows` (a 2-D array, or a list of float16 blobs of `dim` values each)
    that can be vectors of an embedder: `dim` wide (when given), every value finite, of unit length within
    NORM_TOLERANCE. Vectors from outside this process (an Ollama's replies, this file, the index's
    table, which another process wrote) pass here before they are used or kept (issue 29)."""
    import numpy as np  # lazy: +80 ms (-X importtime), paid only where vectors are checked

    if isinstance(rows, list):
        sized = np.array([isinstance(b, bytes) and dim is not None and len(b) == 2 * dim for b in rows], dtype=bool)
        if sized.any():
            assert dim is not None
            fit = [b for b, ok in zip(rows, sized, strict=True) if ok]
            sized[sized] = unit_rows(np.frombuffer(b"".join(fit), dtype=np.float16).reshape(len(fit), dim), dim)
        return sized
    mat = np.asarray(rows, dtype=np.float32)
    if mat.ndim != 2 or (dim is not None and mat.shape[1] != dim):
        return np.zeros(len(mat), dtype=bool)
    with np.errstate(all="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", mat, mat))
    return np.isfinite(norms) & (np.abs(norms - 1.0) <= NORM_TOLERANCE)


#: Vectors of the index's table this process read and left out as unfit (vectors.page, `fit_rows`).
UNFIT_READ = [0]


def fit_rows(lines: list[int], rows: Any) -> tuple[list[int], Any]:
    """The (lines, float32 rows) of a page read from the index's table whose vectors are fit (finite, of
    unit length: `unit_rows`); the others are counted in UNFIT_READ and never reach a search (`retained
    reindex` embeds their records again). Checked on the float32 rows the reader makes anyway (embed.py
    Vectors.add_from): a check of its own would convert each page twice (+18 ms a 4096-row page)."""
    ok = unit_rows(rows)
    if ok.all():
        return lines, rows
    UNFIT_READ[0] += int((~ok).sum())
    return [line for line, good in zip(lines, ok, strict=True) if good], rows[ok]


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class Kept:
    """The kept vectors of one store; every method is safe to call from a server's threads and
    never raises on a damaged or unwritable file (the cache then simply misses)."""

    def __init__(self, directory: Path, read_only: bool = False) -> None:
        self.path = Path(directory) / KEPT_NAME
        self.read_only = read_only
        self._db: sqlite3.Connection | None = None
        self._ino: int | None = None
        self._lock = threading.Lock()
        self._broken = False
        self.bad = 0  # kept vectors found unfit (NaN, another length or width) and left out: embedded again

    def _conn(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        try:
            ino: int | None = os.stat(self.path).st_ino
        except FileNotFoundError:
            ino = None
        if self._db is not None and ino == self._ino:
            return self._db
        if self._db is not None:
            self._db.close()
            self._db = None
        if self.read_only:
            return None  # opening a WAL file, even read-only, leaves a -shm behind: a read-only store changes no file
        for attempt in range(2):
            try:
                self._db = _open(self.path)
                self._ino = os.stat(self.path).st_ino
                return self._db
            except sqlite3.OperationalError:
                self._close()
                return None  # busy, locked, unwritable: a miss, not a reason to discard
            except (sqlite3.DatabaseError, OSError):
                self._close()
                if attempt == 0:
                    discard(self.path)  # not a database, or damaged: it is a cache, start afresh
        self._broken = True
        return None

    def _close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        self._db = None

    def close(self) -> None:
        with self._lock:
            self._close()

    def get(self, model: str, hashes: list[bytes], dim: int | None = None) -> dict[bytes, tuple[int, bytes]]:
        """{text hash: (dim, float16 blob)} of the hashes kept for `model`: only vectors that pass
        `unit_rows` (`dim` wide, when given); the others are left out, so that they are embedded again
        (and replaced), and counted in `self.bad`."""
        out: dict[bytes, tuple[int, bytes]] = {}
        if not hashes:
            return out
        with self._lock:
            try:
                db = self._conn()
                if db is None:
                    return out
                ordered = sorted(hashes)  # probes in key order: neighbouring pages, fewer reads
                for start in range(0, len(ordered), _CHUNK):
                    part = ordered[start:start + _CHUNK]
                    marks = ",".join("?" * len(part))
                    for sha, width, vec in db.execute(
                            f"SELECT sha, dim, vec FROM kept WHERE sha IN ({marks}) AND model = ?", (*part, model)):
                        out[sha] = (width, vec)
            except sqlite3.Error:
                return out
        return self._checked(out, dim)

    def _checked(self, found: dict[bytes, tuple[int, bytes]], dim: int | None) -> dict[bytes, tuple[int, bytes]]:
        out: dict[bytes, tuple[int, bytes]] = {}
        by_width: dict[int, list[bytes]] = {}
        for sha, (width, vec) in found.items():
            if isinstance(width, int) and isinstance(vec, bytes) and (dim is None or width == dim):
                by_width.setdefault(width, []).append(sha)
        for width, shas in by_width.items():
            ok = unit_rows([found[sha][1] for sha in shas], width)
            out.update((sha, found[sha]) for sha, good in zip(shas, ok, strict=True) if good)
        self.bad += len(found) - len(out)
        return out

    def _in_transaction(self, change: Callable[[sqlite3.Connection], None], *, truncate_wal: bool = False) -> None:
        """Run `change` in one write transaction (rolled back if it fails); a file that cannot be
        written is a miss, never an error: the vectors are a cache."""
        with self._lock:
            try:
                db = self._conn()
                if db is None:
                    return
                db.execute("BEGIN IMMEDIATE")
                try:
                    change(db)
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
                if truncate_wal:
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass

    def put(self, model: str, rows: Iterable[tuple[bytes, int, bytes]]) -> None:
        """Keep (text hash, dim, float16 blob) rows of `model`, in one transaction."""
        if self.read_only:
            return

        def insert(db: sqlite3.Connection) -> None:
            db.executemany("INSERT OR REPLACE INTO kept (model, sha, dim, vec) VALUES (?, ?, ?, ?)",
                           ((model, sha, dim, vec) for sha, dim, vec in rows))

        self._in_transaction(insert)

    def forget(self, hashes: list[bytes]) -> None:
        """Delete every model's vector of these texts, and leave none of their bytes in the file or its WAL."""
        if self.read_only or not hashes:
            return

        def delete(db: sqlite3.Connection) -> None:
            for start in range(0, len(hashes), _CHUNK):
                part = hashes[start:start + _CHUNK]
                db.execute(f"DELETE FROM kept WHERE sha IN ({','.join('?' * len(part))})", part)

        self._in_transaction(delete, truncate_wal=True)

    def count(self, model: str | None = None) -> int:
        with self._lock:
            try:
                db = self._conn()
                if db is None:
                    return 0
                if model is None:
                    return int(db.execute("SELECT COUNT(*) FROM kept").fetchone()[0])
                return int(db.execute("SELECT COUNT(*) FROM kept WHERE model = ?", (model,)).fetchone()[0])
            except sqlite3.Error:
                return 0


def _open(path: Path) -> sqlite3.Connection:
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    db = sqlite3.connect(path, timeout=5, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # a cache: a lost transaction costs a model call
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA secure_delete=ON")  # a purged text's vector leaves no bytes behind
        db.execute("CREATE TABLE IF NOT EXISTS kept (model TEXT NOT NULL, sha BLOB NOT NULL, dim INTEGER NOT NULL,"
                   " vec BLOB NOT NULL, PRIMARY KEY (sha, model)) WITHOUT ROWID")
        db.execute("SELECT 1 FROM kept LIMIT 1")
    except BaseException:
        db.close()
        raise
    return db


def discard(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + suffix)
