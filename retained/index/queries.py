"""The named read queries: one function per question a caller asks of the index.

Each takes the connection (the `Index` facade holds the lock and passes it) and returns plain rows
(dicts keyed by column) or numbers. Grouped by who asks: writes and corrections, reads (get, list,
brief, scopes), hooks, the web page and export, maintenance.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from ..project import canonical_key
from ..records import FORGET_KIND, GLOBAL_SCOPE, text_key
from .filters import filter_clause, marks, scope_clause, visible
from .schema import first, rows

Row = dict[str, Any]
_TOMB = "tomb"  # a purged record's row: its tombstone


# -- one record ------------------------------------------------------------------------------------
def by_id(db: sqlite3.Connection, rid: str) -> Row | None:
    """The row of record `rid`, or None."""
    return first(db, "SELECT * FROM records WHERE id = ?", (rid,))


def by_op(db: sqlite3.Connection, op: str) -> Row | None:
    """The first record written with this client_op_id."""
    return first(db, "SELECT * FROM records WHERE client_op_id = ? ORDER BY line LIMIT 1", (op,))


def head_of(db: sqlite3.Connection, rid: str) -> Row | None:
    """The current record of the chain `rid` belongs to."""
    return first(db, "SELECT h.* FROM records r JOIN records h ON h.line = r.head WHERE r.id = ?", (rid,))


def at_line(db: sqlite3.Connection, line: int) -> Row | None:
    return first(db, "SELECT * FROM records WHERE line = ?", (line,))


def duplicate_of(db: sqlite3.Connection, text: str, kind: str, scope: str) -> Row | None:
    """The oldest current record of this kind and scope whose normalised text equals `text`'s."""
    return first(db, "SELECT * FROM records WHERE text_key = ? AND kind = ? AND scope = ? AND superseded_by IS NULL"
                 " AND " + visible() + " ORDER BY line LIMIT 1", (text_key(text), kind, scope))


def same_text(db: sqlite3.Connection, scope: str, text: str) -> Row | None:
    """A current record of the scope holding exactly this text."""
    return first(db, "SELECT id FROM records WHERE scope = ? AND text = ? AND superseded_by IS NULL LIMIT 1",
                 (scope, text))


def older_versions(db: sqlite3.Connection, head: int) -> list[str]:
    """Ids of the unpurged records of the chain headed by line `head`, other than the head itself."""
    return [r["id"] for r in rows(db, "SELECT id FROM records WHERE head = ? AND tomb = 0 AND line != ?",
                                  (head, head))]


def ts_of(db: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    if not ids:
        return {}
    return {r["id"]: r["ts"] for r in rows(db, f"SELECT id, ts FROM records WHERE id IN ({marks(ids)})", ids)}


def sources(db: sqlite3.Connection, ids: list[str]) -> dict[str, Row]:
    """id → its source and place in the log, for the brief's "does the host load this already?"."""
    if not ids:
        return {}
    found = rows(db, f"SELECT id, source, offset, length FROM records WHERE id IN ({marks(ids)})"
                 " AND source IS NOT NULL", list(ids))
    return {r["id"]: r for r in found}


# -- counts ----------------------------------------------------------------------------------------
def counts(db: sqlite3.Connection) -> dict[str, int]:
    """Records indexed, and problems: corrupt lines (and reused ids), chain breaks."""
    row = first(db, "SELECT (SELECT COUNT(*) FROM records) AS records,"
                " (SELECT COUNT(*) FROM problems WHERE kind NOT IN ('break', 'refused')) AS corrupt,"
                " (SELECT COUNT(*) FROM problems WHERE kind = 'break') AS breaks,"
                " (SELECT COUNT(*) FROM problems WHERE kind = 'refused') AS refused") or {}
    return {k: int(v) for k, v in row.items()}


def unreadable(db: sqlite3.Connection) -> int:
    """How many lines of the log could not be read as records (corrupt), as of the last catch-up."""
    return int(db.execute("SELECT COUNT(*) FROM problems WHERE kind = 'corrupt'").fetchone()[0])


def current_count(db: sqlite3.Connection, scopes: list[str] | None) -> int:
    """How many current (not superseded) records the scopes hold (every scope when None)."""
    if scopes:
        sql, params = f"SELECT SUM(current) FROM scope_counts WHERE scope IN ({marks(scopes)})", list(scopes)
    else:
        sql, params = "SELECT SUM(current) FROM scope_counts", []
    return int(db.execute(sql, params).fetchone()[0] or 0)


def kind_counts(db: sqlite3.Connection, scopes: list[str] | None = None) -> dict[str, int]:
    """Current, visible records per kind in the scopes (every scope when None): one small lookup."""
    where, params = scope_clause(scopes, "scope")
    found = rows(db, "SELECT kind, SUM(current) AS n FROM kind_counts WHERE 1=1" + where + " GROUP BY kind", params)
    return {r["kind"]: int(r["n"]) for r in found if r["n"]}


def has_scope(db: sqlite3.Connection, scope: str) -> bool:
    """Whether the index has met this scope (it holds or held records)."""
    return db.execute("SELECT 1 FROM scope_counts WHERE scope = ?", (scope,)).fetchone() is not None


def max_seq(db: sqlite3.Connection) -> int:
    """The highest seq indexed (0 for an empty log)."""
    return int(db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0])


def written_in_session(db: sqlite3.Connection, session: str, scopes: list[str], *, began_ts: str | None,
                       after_seq: int) -> int:
    """Records written since a session began (by time when known, else after its first seq) that the
    session wrote, or, not tagged with any session, that went to its scopes."""
    since, value = ("ts >= ?", began_ts) if began_ts is not None else ("seq > ?", after_seq)
    sql = (f"SELECT COUNT(*) FROM records WHERE {since} AND (session = ? OR (session IS NULL"
           f" AND scope IN ({marks(scopes)})))")
    return int(db.execute(sql, [value, session, *scopes]).fetchone()[0])


# -- reading memory: get, list, brief, scopes -----------------------------------------------------
def newest_rows(db: sqlite3.Connection, limit: int, scopes: list[str] | None = None) -> tuple[list[Row], int]:
    """The newest records' rows in the scopes (every scope when None), whatever their state (get without
    ids marks them as it marks named ones), and how many records the scopes hold."""
    where, params = scope_clause(scopes, "scope")
    total = int(db.execute("SELECT COUNT(*) FROM records WHERE 1=1" + where, params).fetchone()[0])
    newest = rows(db, "SELECT * FROM records WHERE 1=1" + where + f" ORDER BY {NEWEST} LIMIT ?",
                  [*params, limit])
    return newest, total


#: The team order, newest first: the team clock of each record (identical on every clone), then its id.
NEWEST = "ord_ms DESC, ord_n DESC, id DESC"
Key = tuple[int, int, str]  # (ord_ms, ord_n, id): a record's place in the team order, what a cursor holds


def _after(key: Key | None, alias: str = "r") -> tuple[str, list[Any]]:
    """The clause keeping the records after `key` in the team order (older), and its parameters."""
    if key is None:
        return "", []
    return f" AND ({alias}.ord_ms, {alias}.ord_n, {alias}.id) < (?, ?, ?)", list(key)


def list_page(db: sqlite3.Connection, *, scopes: list[str] | None, kind: str | None, as_of: str | None,
              include_superseded: bool, after: Key | None, limit: int) -> tuple[list[Row], int, int]:
    """A page of the records a read may show, newest first in the team order: (rows, how many the
    filters select, how many of those come before `after`'s place: the pages before this one)."""
    where, params = filter_clause("r", scopes, kind, as_of, include_superseded)
    total = int(db.execute("SELECT COUNT(*) FROM records r WHERE 1=1" + where, params).fetchone()[0])
    page, page_params = _after(after)
    newer = 0
    if after is not None:
        newer = int(db.execute("SELECT COUNT(*) FROM records r WHERE 1=1" + where
                               + " AND (r.ord_ms, r.ord_n, r.id) >= (?, ?, ?)", [*params, *after]).fetchone()[0])
    found = rows(db, f"SELECT r.* FROM records r WHERE 1=1{where}{page} ORDER BY r.{NEWEST.replace(', ', ', r.')}"
                 " LIMIT ?", [*params, *page_params, limit])
    return found, total, newer


def last_clock(db: sqlite3.Connection, until_ms: int) -> tuple[int, int]:
    """The highest team clock of any row (this log's or a teammate's) at or before `until_ms`: what a
    new record's clock must pass. A clock further ahead (a teammate's wrong or forged one) is not followed."""
    row = db.execute("SELECT ord_ms, ord_n FROM records WHERE ord_ms <= ? ORDER BY ord_ms DESC, ord_n DESC LIMIT 1",
                     (until_ms,)).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def newest_current(db: sqlite3.Connection, scopes: list[str] | None, limit: int, kind: str | None = None,
                   kinds: tuple[str, ...] | None = None) -> list[Row]:
    """The newest current records in the scopes, walking the table backwards and stopping at `limit`.

    The unary + keeps SQLite from sorting every record of the scope: it walks the team's order
    (records_order: the clock, then the row key; log order for the local log alone) backwards, and
    records of the project and global scopes are common, so the walk ends early.
    """
    where, params = "superseded_by IS NULL AND " + visible(), []
    if scopes:
        where += f" AND +scope IN ({marks(scopes)})"
        params += scopes
    if kind is not None:
        where += " AND kind = ?"
        params.append(kind)
    if kinds:
        where += f" AND kind IN ({marks(kinds)})"
        params += list(kinds)
    newest = NEWEST
    order = f"ORDER BY kind, {newest}" if kind is not None else f"ORDER BY {newest}"
    return rows(db, f"SELECT id, seq, ts, kind, scope, text, writer, author FROM records WHERE {where} {order} LIMIT ?",
                [*params, limit])


def scope_names(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT scope FROM scope_counts")]


def scope_table(db: sqlite3.Connection) -> list[Row]:
    """Every scope with its current records, total records and project key (for `retained scopes`)."""
    return rows(db, "SELECT r.scope AS scope, COALESCE(c.current, 0) AS current, COUNT(*) AS records, k.key AS key"
                " FROM records r LEFT JOIN scope_counts c ON c.scope = r.scope LEFT JOIN scope_keys k ON k.scope = r.scope"
                " WHERE r.kind != ? GROUP BY r.scope ORDER BY current DESC, r.scope", (FORGET_KIND,))


def same_project(db: sqlite3.Connection, scopes: list[str] | None, keys: dict[str, str]) -> list[str] | None:
    """`scopes` plus every scope whose project key is one of theirs (`keys`: scope → key known by
    the caller, for scopes the index has not met yet). Keys are compared in any spelling of the
    remote's URL (protocol, case, `.git`, `www.`: project.canonical_key); paths as they are."""
    if not scopes:
        return scopes
    wanted = set(keys.values()) | set(scopes)  # a project's key is also the scope it files records under
    if len(scopes) <= 16:
        q = f"SELECT key FROM scope_keys WHERE key IS NOT NULL AND scope IN ({marks(scopes)})"
        wanted |= {r[0] for r in db.execute(q, scopes)}
    ordered = sorted(wanted)
    found = {r[0] for r in db.execute(f"SELECT scope FROM scope_keys WHERE key IN ({marks(ordered)})", ordered)}
    canon = {canonical_key(w) for w in wanted if w != GLOBAL_SCOPE and not _is_path(w)}
    if canon:
        for scope, key in db.execute("SELECT scope, key FROM scope_keys"):
            for name in (scope, key):
                if name and name != GLOBAL_SCOPE and not _is_path(name) and canonical_key(name) in canon:
                    found.add(scope)
    extra = [f for f in found if f not in scopes]
    return list(scopes) + sorted(extra)


def _is_path(scope: str) -> bool:
    """A path scope, or a repository's own folder as its key: compared as they are, never by spelling."""
    return scope.startswith(("/", "~", "\\", "git-dir:")) or (len(scope) > 2 and scope[1] == ":" and scope[2] in "\\/")


def retracted_ids(db: sqlite3.Connection) -> list[str]:
    """Records a retraction hides now (themselves, or through the head of their chain)."""
    return [r[0] for r in db.execute("SELECT id FROM records WHERE hidden = 1 AND tomb = 0 AND kind != ?",
                                     (FORGET_KIND,))]


def problems(db: sqlite3.Connection, limit: int = 100) -> list[Row]:
    return rows(db, "SELECT * FROM problems ORDER BY line LIMIT ?", (limit,))


def refused(db: sqlite3.Connection) -> dict[int, str]:
    """{row key: why} of every teammate's line the index left out because its ref may not carry it, or
    because another record holds its id (a 'duplicate' clash, named with both claims)."""
    return {r[0]: r[1] for r in db.execute("SELECT line, reason FROM problems WHERE kind = 'refused' OR"
                                           " (kind = 'duplicate' AND reason LIKE '% is claimed by %')")}


def offsets(db: sqlite3.Connection, lo: int, hi: int) -> Iterator[tuple[int, str]]:
    """(offset, sha256) of every record with a key in (lo, hi], in log order, streamed as SQLite steps."""
    return db.execute("SELECT offset, sha256 FROM records WHERE line > ? AND line <= ? ORDER BY line", (lo, hi))


def refused_offsets(db: sqlite3.Connection, lo: int, hi: int) -> set[int]:
    """Offsets of the lines with a key in (lo, hi] that the index refused as records (an id another
    line holds, a scope the ref may not carry): verify counts them as named problems, not as missing."""
    return {o for (o,) in db.execute("SELECT offset FROM problems WHERE line > ? AND line <= ? AND kind IN"
                                     " ('duplicate', 'refused')", (lo, hi))}


# -- the web page and export ----------------------------------------------------------------------
def export_rows(db: sqlite3.Connection, scopes: list[str] | None) -> list[Row]:
    """Where each record of the scopes sits in the log, in log order (export reads the bytes)."""
    where, params = scope_clause(scopes, "scope")
    return rows(db, f"SELECT * FROM (SELECT line, id, kind, scope, offset, length, {_TOMB} AS tomb"
                f" FROM records WHERE 1=1{where}) ORDER BY line", params)


def markdown_rows(db: sqlite3.Connection, scopes: list[str] | None) -> list[Row]:
    """Every record of the scopes, grouped for a readable export: scope, kind, newest first."""
    where, params = scope_clause(scopes, "scope")
    return rows(db, f"SELECT id, ts, kind, scope, text, superseded_by, {_TOMB} AS tomb FROM records"
                f" WHERE 1=1{where} ORDER BY scope, kind, {NEWEST}", params)


def _browse_where(scopes: list[str] | None, kind: str | None, ts_from: str | None, ts_to: str | None,
                  as_of: str | None, history: bool, exclude: list[str] | None = None) -> tuple[str, list[Any]]:
    where, params = scope_clause(scopes, "r.scope")
    if exclude:
        where += f" AND r.scope NOT IN ({marks(exclude)})"
        params += list(exclude)
    for clause, value in ((" AND r.kind = ?", kind), (" AND r.ts >= ?", ts_from), (" AND r.ts < ?", ts_to)):
        if value is not None:
            where += clause
            params.append(value)
    if as_of is not None:
        where += (" AND r.ts <= ? AND r.tomb = 0 AND r.kind != ?"
                  " AND (r.superseded_by IS NULL OR (SELECT s.ts FROM records s WHERE s.id = r.superseded_by) > ?)"
                  " AND (r.retracted_by IS NULL OR (SELECT f.ts FROM records f WHERE f.id = r.retracted_by) > ?)")
        params += [as_of, FORGET_KIND, as_of, as_of]
    elif not history:
        where += " AND r.hidden = 0 AND r.superseded_by IS NULL"
    return where, params


def browse(db: sqlite3.Connection, *, scopes: list[str] | None, kind: str | None, ts_from: str | None,
           ts_to: str | None, as_of: str | None, history: bool, after: Key | None,
           limit: int, exclude: list[str] | None = None) -> tuple[list[Row], int]:
    """A page of records, newest first in the team order (after `after`'s place), and how many the
    filters select. `exclude`: scopes left out (the page's "everything but this project").

    Default: current memory (not superseded, retracted, purged, nor a forget record). `as_of`: what
    was current then: written by then, not yet superseded or retracted by then. `history`: every
    record, superseded, retracted and purged ones and forget records included."""
    where, params = _browse_where(scopes, kind, ts_from, ts_to, as_of, history, exclude)
    if as_of is None and not history and kind is None and ts_from is None and ts_to is None:
        total = current_count(db, scopes)  # a lookup, not a count over the table
        left_out = [e for e in exclude or [] if scopes is None or e in scopes]
        if left_out:
            total -= current_count(db, left_out)
    else:
        total = int(db.execute(f"SELECT COUNT(*) FROM records r WHERE 1=1{where}", params).fetchone()[0])
    page, page_params = _after(after)
    found = rows(db, f"SELECT r.line, r.seq, r.id, r.ts, r.kind, r.scope, r.source, r.supersedes, r.superseded_by,"
                 f" r.retracted_by, r.tomb, r.hidden, r.writer, r.author, r.ord_ms, r.ord_n,"
                 f" substr(r.text, 1, 400) AS text, length(r.text) AS chars FROM records r WHERE 1=1{where}{page}"
                 f" ORDER BY r.{NEWEST.replace(', ', ', r.')} LIMIT ?", [*params, *page_params, limit])
    return found, total


def facets(db: sqlite3.Connection) -> dict[str, Any]:
    """What the page's filters offer: current records per scope (kept up to date on insert), and the
    kinds in use. Cheap at any size; `kind_counts` adds the per-kind counts, which cost a scan."""
    scopes = rows(db, "SELECT scope, current AS n FROM scope_counts WHERE current > 0 ORDER BY current DESC")
    kinds = [r[0] for r in db.execute("SELECT DISTINCT kind FROM records WHERE kind != ?", (FORGET_KIND,))]
    every = db.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    return {"scopes": scopes, "kinds": kinds, "current": sum(r["n"] for r in scopes), "records": int(every)}


def chain(db: sqlite3.Connection, head: int) -> list[Row]:
    """Every version of one supersede chain, oldest first."""
    return rows(db, "SELECT line, seq, id, ts, kind, scope, supersedes, superseded_by, retracted_by, tomb, hidden,"
                " substr(text, 1, 400) AS text FROM records WHERE head = ? ORDER BY ord_ms, ord_n, id", (head,))


def forget_records(db: sqlite3.Connection) -> list[Row]:
    """The retraction, undo and purge records, in log order (each names its targets in the log)."""
    return rows(db, "SELECT line, id, ts, offset, length, sha256 FROM records WHERE kind = ? AND tomb = 0 ORDER BY line",
                (FORGET_KIND,))


# -- maintenance (retained maintain) --------------------------------------------------------------
def scope_summary(db: sqlite3.Connection) -> list[Row]:
    """Per scope: current, superseded, retracted (not purged) and purged records (forget records aside)."""
    return rows(db, "SELECT scope, SUM(superseded_by IS NULL AND hidden = 0) AS cur, SUM(superseded_by IS NOT NULL)"
                " AS sup, SUM(retracted_by IS NOT NULL AND tomb = 0) AS ret, SUM(tomb) AS pur"
                " FROM records WHERE kind != ? GROUP BY scope", (FORGET_KIND,))


def exact_duplicate_groups(db: sqlite3.Connection) -> list[Row]:
    """Current records sharing scope, kind and normalised text: one row per group, `ids` comma-joined."""
    return rows(db, "SELECT scope, kind, text_key, GROUP_CONCAT(id) AS ids, COUNT(*) AS n FROM records"
                " WHERE superseded_by IS NULL AND hidden = 0 AND text_key IS NOT NULL"
                " GROUP BY scope, kind, text_key HAVING n > 1")


def long_chains(db: sqlite3.Connection, more_than: int) -> list[Row]:
    """Visible supersede chains of more than `more_than` records: scope, head id, records."""
    return rows(db, "SELECT h.scope, h.id AS head, COUNT(*) AS n FROM records r JOIN records h ON h.line = r.head"
                " WHERE h.hidden = 0 GROUP BY r.head HAVING n > ?", (more_than,))


def old_counts(db: sqlite3.Connection, before_ts: str) -> dict[str, int]:
    """scope → current records written before `before_ts`."""
    found = db.execute("SELECT scope, COUNT(*) FROM records WHERE superseded_by IS NULL AND hidden = 0 AND ts < ?"
                       " GROUP BY scope", (before_ts,))
    return {scope: int(n) for scope, n in found}


def in_log_order(db: sqlite3.Connection, ids: list[str]) -> list[str]:
    return [r[0] for r in db.execute(f"SELECT id FROM records WHERE id IN ({marks(ids)}) ORDER BY line", ids)]


def has_forks(db: sqlite3.Connection) -> bool:
    """Whether any record was superseded by two writers concurrently (nearly always no)."""
    return db.execute("SELECT 1 FROM forks LIMIT 1").fetchone() is not None


def conflicts(db: sqlite3.Connection, ids: list[str]) -> dict[str, list[Row]]:
    """For each of `ids` that is a current version of a fork (two writers superseded one record
    concurrently): every current version of that fork, this one included, by (ts, id)."""
    if not ids or db.execute("SELECT 1 FROM forks LIMIT 1").fetchone() is None:
        return {}
    out: dict[str, list[Row]] = {}
    for rid in ids:
        me = first(db, "SELECT line, head FROM records WHERE id = ? AND superseded_by IS NULL AND hidden = 0", (rid,))
        if me is None:
            continue
        versions = rows(db, "SELECT DISTINCT h.id, h.writer, h.author, h.ts, h.ord_ms, h.ord_n, h.sha256 FROM forks f"
                        " JOIN records s ON s.line = f.line JOIN records h ON h.line = s.head"
                        " WHERE f.target IN (SELECT f2.target FROM forks f2 JOIN records s2 ON s2.line = f2.line"
                        " WHERE s2.head = ?) AND h.superseded_by IS NULL AND h.hidden = 0", (me["head"],))
        if len(versions) > 1:
            versions.sort(key=lambda v: (v["ts"], v["id"]))  # what the records carry: the same on every clone
            out[rid] = versions
    return out


def open_forks(db: sqlite3.Connection) -> list[Row]:
    """Every record superseded concurrently whose versions are still more than one current record."""
    found = rows(db, "SELECT f.target, h.id AS head, h.scope FROM forks f JOIN records s ON s.line = f.line"
                 " JOIN records h ON h.line = s.head WHERE h.superseded_by IS NULL AND h.hidden = 0"
                 " GROUP BY f.target, h.id ORDER BY f.target, h.ts, h.id")
    by_target: dict[str, dict[str, Any]] = {}
    for r in found:
        entry = by_target.setdefault(r["target"], {"target": r["target"], "scope": r["scope"], "versions": []})
        entry["versions"].append(r["head"])
    return [e for e in by_target.values() if len(e["versions"]) > 1]


def team_ids(db: sqlite3.Connection) -> list[str]:
    """Ids of the records read from teammates' logs (issue 19): shared by definition."""
    return [r[0] for r in db.execute("SELECT id FROM records WHERE writer IS NOT NULL")]


def current_texts(db: sqlite3.Connection, scope: str, limit: int) -> list[Row]:
    """id, kind, text of the scope's newest current records."""
    return rows(db, "SELECT id, kind, text FROM records WHERE scope = ? AND superseded_by IS NULL"
                " AND hidden = 0 ORDER BY " + NEWEST + " LIMIT ?", (scope, limit))
