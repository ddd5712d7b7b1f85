"""The store: the one thing the edges (CLI, server, hooks) call for memory operations.

The log is written first and is the truth; the index is brought up to date from the log before
every read (and before a write that needs it), so records appended by this process, another process
or another program show up without a restart, and a write costs no index transaction.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from typing import Any

from . import records
from .errors import NotFound, StoreError, UsageError
from .index import Index, as_of_clause, query_terms, quote_query, scope_clause, visible
from .log import ChainState, Log
from .paths import read_only_requested
from .tokens import estimate_tokens

MAX_K = 100
INLINE_EMBED = 256  # a search embeds up to this many new records itself; more go to a background thread
DEFAULT_K = 8
MAX_LIST = 500
ALL_SCOPES = "*"


def _redaction_enabled() -> bool:
    return os.environ.get("RETAINED_REDACT", "on").strip().lower() not in ("off", "0", "false", "no")


class Store:
    """A store directory: log.jsonl (truth), index.sqlite3 (derived), quarantine/ (torn fragments)."""

    def __init__(self, directory: str | os.PathLike[str], *, create: bool = True,
                 read_only: bool | None = None) -> None:
        self.directory = Path(directory).expanduser().absolute()
        # Read-only: no directory, log, lock or index file is created or changed (the index is copied
        # into memory and catches up there), and writes are refused.
        self.read_only = read_only_requested() if read_only is None else read_only
        if not self.directory.exists():
            if not create or self.read_only:
                raise StoreError(f"no store at {self.directory}", hint="write a record first, or pass the right --dir")
            try:
                # exist_ok: two processes (Claude Code and Codex starting their servers) may race here.
                self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create store directory {self.directory}: {e.strerror or e}",
                                 hint="pass --dir or set RETAINED_DIR to a writable place") from None
        elif not self.directory.is_dir():
            raise StoreError(f"{self.directory} is not a directory", hint="pass --dir pointing at a directory")
        self._open_as_this_user()
        self.log = Log(self.directory)
        self.log.check_safe()
        self.index = Index(self.directory, self.log, read_only=self.read_only)
        self._write_lock = threading.Lock()
        self._sem: Any = None

    def close(self) -> None:
        if self._sem is not None:
            self._sem.stop()
        self.index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_as_this_user(self) -> None:
        """A store this user cannot write (someone else's, a read-only disk) is opened read-only.

        Reads then work as usual, the first read's warnings say so once, and writes are refused
        with the reason. A store this user cannot even read is a clear error, not a crash.
        """
        from .paths import unreadable_reason, unwritable_reason

        self.read_only_reason: str | None = None
        self._notice: str | None = None
        reason = unreadable_reason(self.directory)
        if reason is not None:
            raise StoreError(f"cannot read the store at {self.directory}: {reason}",
                             hint="run as the store's owner, or pass --dir for a store of your own")
        if not self.read_only:
            reason = unwritable_reason(self.directory)
            if reason is not None:
                self.read_only, self.read_only_reason = True, reason
                self._notice = (f"the store at {self.directory} is read-only for this user ({reason}): "
                                "opened read-only, so memory can be read but not written")

    def _check_writable(self) -> None:
        if self.read_only and self.read_only_reason:
            raise StoreError(f"cannot write: the store at {self.directory} is read-only for this user "
                             f"({self.read_only_reason})",
                             hint="run as the store's owner, or pass --dir for a store of your own")
        if self.read_only:
            raise StoreError(f"the store at {self.directory} is open read-only (RETAINED_READ_ONLY is set)",
                             hint="unset RETAINED_READ_ONLY to write")

    def _fresh(self) -> list[str]:
        """Bring the index up to date; a broken index degrades to a warning, never to a failure."""
        notice, self._notice = self._notice, None  # said once, with the first read
        said = [notice] if notice else []
        try:
            self.index.catch_up()
            rebuilt, self.index.rebuilt = self.index.rebuilt, None
            if rebuilt:
                how = ("from its records; nothing stored was lost (the vectors were kept)"
                       if self.index.rebuilt_in_place else
                       "from the log; nothing stored was lost (with the semantic tier on, records are embedded again)")
                said.append(f"the index was damaged ({rebuilt}) and was rebuilt {how}")
            return said
        except Exception as e:  # noqa: BLE001 - the index is derived; report and carry on
            return [*said, f"index could not catch up with the log ({e}); run `retained reindex`"]

    def project_scopes(self, scopes: list[str] | None) -> list[str] | None:
        """The scopes a read asked for, plus the path scopes of other worktrees and clones of the same
        repositories (same project key): one project, one memory."""
        if not scopes:
            return scopes
        from .project import identity

        keys = {}
        for scope in scopes:
            if os.path.isabs(scope) and os.path.isdir(scope):
                ident = identity(scope)
                if ident is not None:
                    keys[scope] = ident["key"]
        try:
            return self.index.same_project(scopes, keys)
        except sqlite3.Error:
            return scopes

    def _fresh_read(self) -> list[str]:
        """`_fresh`, plus what a read must never hide: how many records could not be read (I2)."""
        warnings = self._fresh()
        note = self.damage_note()
        return warnings + ([note] if note else [])

    def damage_note(self) -> str | None:
        """'2 records could not be read …: run `retained verify`', or None when every line reads."""
        try:
            n = self.index.unreadable()
        except sqlite3.Error:
            return None
        if not n:
            return None
        return (f"{n} record{'s' if n != 1 else ''} could not be read (damaged line{'s' if n != 1 else ''} in the "
                f"log) and {'are' if n != 1 else 'is'} left out: run `retained verify`")

    # -- writing ------------------------------------------------------------------------------
    def write(
        self,
        text: str,
        *,
        kind: str = "note",
        scope: str | None = None,
        source: str | None = None,
        supersedes: str | None = None,
        client_op_id: str | None = None,
        fields: dict[str, Any] | None = None,
        default_scope: str | None = None,
    ) -> dict[str, Any]:
        """Append one record and prove it (I1). Returns the receipt.

        Without `scope`, a correction (`supersedes`) keeps the scope of the record it corrects, and any
        other write goes to `default_scope` (the edges pass the current project; None means global).
        An exact duplicate of a current record (same normalised text, kind and scope) is not written
        again: the receipt names the existing record with `deduplicated: true`.
        """
        self._check_writable()
        records.check_text(text)
        records.check_kind(kind)
        if scope is not None:
            records.check_scope(scope)
        if default_scope is not None:
            records.check_scope(default_scope)
        if source is not None:
            records.check_text(source, "source")
        if client_op_id is not None:
            records.check_text(client_op_id, "client_op_id")
        if supersedes is not None and (not isinstance(supersedes, str) or not supersedes.strip()):
            raise UsageError("supersedes must be a record id", hint="find it with search or list")
        if kind == records.FORGET_KIND:
            raise UsageError("kind 'forget' is kept for retractions", hint="use memory_forget (or `retained forget`) to forget a record")
        extra = records.check_fields(fields)

        from . import redact  # compiled patterns: paid by writes only, not by the hook path

        found: Counter[str] = Counter()
        if _redaction_enabled():
            text = redact.redact_value(text, found)
            if source is not None:
                source = redact.redact_value(source, found)
            extra = redact.redact_value(extra, found)

        self.log.check_safe()
        with self._write_lock, self.log.lock():
            tail = self.log.tail()
            warnings = list(tail.warnings)
            fresh = self._fresh()  # duplicates are looked up among the current records
            warnings += fresh
            if client_op_id is not None:
                prior = self.index.by_op(client_op_id)
                if prior is not None:
                    return self._dedup_receipt(prior, warnings)
            if supersedes is not None:
                target = self._correctable(supersedes)
                if scope is None:
                    scope = target["scope"]
            elif scope is None:
                scope = default_scope
            elif scope not in (records.GLOBAL_SCOPE, default_scope) and not fresh:
                warnings += self._unknown_scope(scope, default_scope)
            if supersedes is None and not fresh:
                try:
                    same = self.index.duplicate_of(text, kind, scope or records.GLOBAL_SCOPE)
                    near = [] if same is not None else self._near_duplicates(text, scope or records.GLOBAL_SCOPE)
                except sqlite3.Error as e:  # the index is derived: a write never fails for its sake
                    same, near = None, [f"duplicates not checked: the index is unusable ({e}); run `retained reindex`"]
                if same is not None:
                    receipt = self._dedup_receipt(same, warnings, op=False)
                    receipt["warnings"].append(
                        f"an identical {kind} is already stored as {same['id']} (seq {same['seq']}); nothing new was "
                        "written (to correct it, write with supersedes)")
                    return receipt
                warnings += near
            record: dict[str, Any] = dict(extra)
            for key, value in (("scope", scope), ("source", source), ("supersedes", supersedes),
                               ("client_op_id", client_op_id)):
                if value is not None:
                    record[key] = value
            receipt = self._append(record, kind, text, tail, warnings)
        # The index takes the new line at once (outside the lock): the next write's duplicate check
        # costs nothing more, and the index's note of the log (size, time) is exact, so that a byte
        # changed in place later is noticed by the next read (I2).
        receipt["warnings"] += self._fresh()
        if found:
            receipt["warnings"].append(redact.describe(found))
        return receipt

    def _append(self, record: dict[str, Any], kind: str, text: str, tail: Any, warnings: list[str]) -> dict[str, Any]:
        """Seal and append one record after `tail` (lock held) and return its receipt."""
        record = dict(record)
        record.update(seq=tail.seq + 1, id=records.new_id(), ts=records.now_rfc3339(), kind=kind, text=text,
                      prev=tail.sha256)
        record = records.seal(record)
        result = self.log.append(record, tail)
        durable = all(result["checks"].values())
        if not durable:
            warnings = result["reasons"] + warnings
        return {
            "id": record["id"],
            "seq": record["seq"],
            "sha256": record["sha256"],
            "durable": durable,
            "checks": result["checks"],
            "warnings": warnings,
            "deduplicated": False,
        }

    def _unknown_scope(self, scope: str, default_scope: str | None) -> list[str]:
        try:
            known = self.index.query("SELECT 1 AS x FROM scope_counts WHERE scope = ?", (scope,))
        except sqlite3.Error:
            return []
        if known:
            return []
        here = f"the current project ({default_scope}) plus global" if default_scope else "every scope"
        return [f"scope {scope!r} is new: it is neither global, the current project nor a scope that holds "
                f"records, so default reads ({here}) will not see this record; read it with scope={scope!r} "
                "(see `retained scopes`)"]

    def _correctable(self, supersedes: str) -> dict[str, Any]:
        """The record a correction names, refused unless it is the current record of its chain."""
        target = self.index.by_id(supersedes)
        if target is None:
            raise NotFound(f"supersedes names {supersedes!r}, which is not a record in this store",
                           hint="copy the id from `search` or `list`")
        if target["tomb"]:
            raise UsageError(f"{supersedes} was purged; there is nothing left to correct", hint="write a new record instead")
        head = self.index.head_of(supersedes) or target
        if head["id"] != supersedes:
            raise UsageError(f"{supersedes} was already corrected by {head['id']}, the current record; nothing was written",
                             hint=f"read {head['id']} first; if it still needs correcting, supersede {head['id']}")
        return target

    def _near_duplicates(self, text: str, scope: str) -> list[str]:
        """A warning per current record in the scope whose text closely matches this one."""
        words = sorted(set(query_terms(text)), key=lambda w: (-len(w), w))[:8]
        if len(words) < 3:
            return []
        mine = records.near_form(text)
        seen: dict[str, dict[str, Any]] = {}
        for half in (words[0::2], words[1::2]):
            for row in self.index.similar_candidates(quote_query(half), scope, 20):
                seen.setdefault(row["id"], row)
        out = []
        for row in seen.values():
            if records.closeness(mine, records.near_form(row["text"])) is not None:
                out.append(f"this closely matches {row['id']} ({row['kind']}, {row['ts'][:10]}): "
                           f"\"{_snippet(row['text'])}\"; if it replaces that record, write it with "
                           f"supersedes={row['id']} instead")
            if len(out) == 3:
                break
        return out

    def _dedup_receipt(self, prior: dict[str, Any], warnings: list[str], op: bool = True) -> dict[str, Any]:
        raw = self.log.read_at(prior["offset"], prior["length"])
        ok = raw.endswith(b"\n")
        try:
            rec = records.parse_line(raw[:-1])
            ok = ok and rec["sha256"] == prior["sha256"]
        except records.BadLine:
            ok = False
        checks = {"append": ok, "fsync": ok, "readback_match": ok, "chain": ok}
        if not ok:
            warnings.append(f"the record {prior['id']} no longer reads back intact; run `retained verify`")
        if op:
            warnings.append(f"client_op_id already used by {prior['id']}; nothing new was written")
        return {"id": prior["id"], "seq": prior["seq"], "sha256": prior["sha256"], "durable": ok,
                "checks": checks, "warnings": warnings, "deduplicated": True}

    # -- forgetting (retained/forget.py) ------------------------------------------------------------
    def forget(self, ids: list[str], reason: str | None = None) -> dict[str, Any]:
        """Retract records: an appended `forget` record leaves them (and the chain they head) out of
        search, list, brief and recall; `get` still returns them, marked. Reversible with `unforget`."""
        from .forget import retract

        return retract(self, ids, reason)

    def unforget(self, ids: list[str], reason: str | None = None) -> dict[str, Any]:
        """Undo a retraction: an appended record brings the records back into every read."""
        from .forget import retract

        return retract(self, ids, reason, undo=True)

    def purge(self, ids: list[str], reason: str | None = None) -> dict[str, Any]:
        """Remove the records' bytes from every file of the store (irreversible; a person's call, never
        an agent's). Their lines become tombstones and the chain still verifies."""
        from .forget import purge

        return purge(self, ids, reason)

    def checkpoint(self, label: str, summary: str | None = None, *, scope: str | None = None,
                   fields: dict[str, Any] | None = None, client_op_id: str | None = None) -> dict[str, Any]:
        """A checkpoint is a record of kind `checkpoint`: the label, then the summary."""
        records.check_text(label, "label")
        if "\n" in label.strip():
            raise UsageError("label must be one line", hint="put the details in the summary")
        text = label.strip() if not summary or not summary.strip() else f"{label.strip()}\n\n{summary.strip()}"
        extra = dict(fields or {})
        return self.write(text, kind="checkpoint", scope=scope, fields=extra, client_op_id=client_op_id)

    # -- reading ------------------------------------------------------------------------------
    @staticmethod
    def _hit(row: dict[str, Any], score: float | None = None) -> dict[str, Any]:
        hit = {"id": row["id"], "seq": row["seq"], "ts": row["ts"], "kind": row["kind"], "scope": row["scope"],
               "text": row["text"]}
        if score is not None:
            hit["score"] = round(score, 6)
        if row.get("supersedes"):
            hit["supersedes"] = row["supersedes"]
        if row.get("superseded_by"):
            hit["superseded_by"] = row["superseded_by"]
        return hit

    def search(
        self,
        query: str,
        *,
        scopes: list[str] | None = None,
        kind: str | None = None,
        k: int = DEFAULT_K,
        max_tokens: int | None = None,
        include_superseded: bool = False,
        as_of: str | None = None,
    ) -> dict[str, Any]:
        """Search by words and, with the semantic tier on, by meaning; best first. Says what it did not
        return (I2) and whether meaning was used (`semantic`: "on" or "off: <reason>").

        Ranking: records holding an exact identifier, path, error code or version from the query come
        first; then the blend 0.8·meaning + 0.2·words (each min-max scaled over its own candidates).
        Each match resolves to the current record of its supersede chain unless `include_superseded`;
        `as_of` answers as the store stood then.
        """
        return self._search(query, scopes=scopes, kind=kind, k=k, max_tokens=max_tokens,
                            include_superseded=include_superseded, as_of=as_of)[0]

    def semantic(self) -> Any:
        """This store's semantic tier (created on first use; nothing is loaded until it must be)."""
        if self._sem is None:
            from .embed import Semantic

            self._sem = Semantic(self.index)
        return self._sem

    def _search(self, query: str, *, scopes: list[str] | None, kind: str | None, k: int, max_tokens: int | None,
                include_superseded: bool, as_of: str | None, inline_embed: int | None = None,
                need_vectors: bool = False) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """search(), plus per hit id its cosine to the query (None without a vector) and its tier (how many
        of the query's identifiers it holds verbatim): what recall's relevance bar needs."""
        from . import ranking

        if not isinstance(query, str):
            raise UsageError("query must be a string", hint="pass the words to look for")
        k = _check_int(k, "k", 1, MAX_K)
        if max_tokens is not None:
            max_tokens = _check_int(max_tokens, "max_tokens", 1, 1_000_000)
        if kind is not None:
            kind = records.check_kind(kind)
        as_of = parse_as_of(as_of)
        warnings = self._fresh_read()
        scopes = self.project_scopes(scopes)
        terms = query_terms(query)
        filters = {"scopes": scopes, "kind": kind, "as_of": as_of, "include_superseded": include_superseded}
        semantic, qvec = ranking.meaning_query(self, query, INLINE_EMBED if inline_embed is None else inline_embed,
                                               warnings, need_vectors)
        if not terms and qvec is None:
            warnings.append("the query holds no searchable words")
            return ({"hits": [], "total_matched": 0, "total_exact": True, "returned": 0, "truncated": False,
                     "match": "all", "semantic": semantic, "warnings": warnings}, {})
        found = ranking.rank(self, query, terms, qvec, filters, k)
        hits = []
        cosines: dict[str, dict[str, Any]] = {}
        for cand in found.hits:
            hit = self._hit(cand.row, cand.score)
            hit["match"] = cand.match
            if as_of is not None and hit.get("superseded_by") and hit["superseded_by"] not in found.known_before:
                del hit["superseded_by"]
            hits.append(hit)
            cosines[hit["id"]] = {"cosine": cand.cosine, "tier": cand.tier, "lead": cand.lead}
        total = found.total
        truncated = total > len(hits) or not found.exact
        warnings += ranking.match_notes(found, qvec is not None)
        if not found.exact:
            warnings.append(f"at least {total} records match; counting stopped there (total_matched is a lower bound)")
        if max_tokens is not None:
            hits, cut = _fit_tokens(hits, max_tokens)
            if cut:
                truncated = True
                warnings.append(f"max_tokens={max_tokens} left out {cut} hit(s) or part of one")
        return ({"hits": hits, "total_matched": total, "total_exact": found.exact, "returned": len(hits),
                 "truncated": truncated, "match": found.mode, "semantic": semantic, "warnings": warnings}, cosines)

    def get(self, ids: list[str] | None = None, *, limit: int = 20) -> dict[str, Any]:
        """Records exactly as they stand in the log (unknown fields included), read from the log itself."""
        warnings = self._fresh_read()
        out: list[dict[str, Any]] = []
        missing: list[str] = []
        if ids is None:
            limit = _check_int(limit, "limit", 1, MAX_LIST)
            rows = self.index.query("SELECT id, offset, length, sha256 FROM records ORDER BY line DESC LIMIT ?", (limit,))
        else:
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise UsageError("ids must be a list of record ids", hint='e.g. ["mem_01J..."]')
            if len(ids) > MAX_LIST:
                raise UsageError(f"at most {MAX_LIST} ids per call", hint="split the ids over several calls")
            rows = []
            for rid in dict.fromkeys(ids):
                row = self.index.by_id(rid)
                if row is None:
                    missing.append(rid)
                else:
                    rows.append(row)
        damaged = 0
        for row in rows:
            raw = self.log.read_at(row["offset"], row["length"])
            try:
                rec = records.parse_line(raw[:-1])
                if rec["sha256"] != row["sha256"]:
                    raise records.BadLine("the log no longer holds the record the index points at")
            except records.BadLine as bad:
                missing.append(row["id"])
                damaged += 1
                warnings.append(f"{row['id']}: its line in the log is damaged ({bad.reason}); run `retained verify`")
                continue
            out.append(self._marked(rec, row))
        counts = self.index.counts()
        result = {"records": out, "missing": missing, "corrupt_lines": counts["corrupt"] + damaged,
                  "chain_ok": counts["corrupt"] == 0 and counts["breaks"] == 0 and damaged == 0,
                  "warnings": warnings}
        if ids is None:  # browsing the newest: say how many were not returned
            result["total"] = counts["records"]
            result["truncated"] = counts["records"] > len(rows)
        return result

    def _marked(self, rec: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
        """The record as stored, plus what later records say about it: `superseded_by`, and
        `retracted` {by, reason, ts} when a retraction (of it or of its chain's head) hides it."""
        if row.get("superseded_by"):
            rec["superseded_by"] = row["superseded_by"]
        if row.get("tomb") or not row.get("hidden") or row["kind"] == records.FORGET_KIND:
            return rec
        via = None
        by = row.get("retracted_by")
        if by is None:
            head = self.index.head_of(row["id"])
            if head is None or not head.get("retracted_by"):
                return rec
            by, via = head["retracted_by"], head["id"]
        mark: dict[str, Any] = {"by": by}
        forget = self.index.by_id(by)
        if forget is not None:
            try:
                frec = records.parse_line(self.log.read_at(forget["offset"], forget["length"])[:-1])
                mark["ts"] = frec["ts"]
                if isinstance(frec.get("reason"), str):
                    mark["reason"] = frec["reason"]
            except records.BadLine:
                pass
        if via is not None:
            mark["via"] = via
        rec["retracted"] = mark
        return rec

    def list(
        self,
        *,
        scopes: list[str] | None = None,
        kind: str | None = None,
        limit: int = 20,
        before_seq: int | None = None,
        include_superseded: bool = False,
        as_of: str | None = None,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """Browse newest first. `total` counts every record the filters select; `returned` what came back.
        `as_of`: as the store stood then (records written by then, superseded only by records written by then).
        `max_tokens`: a budget for the records' text; records past it are left out (`truncated`)."""
        limit = _check_int(limit, "limit", 1, MAX_LIST)
        if max_tokens is not None:
            max_tokens = _check_int(max_tokens, "max_tokens", 1, 1_000_000)
        as_of = parse_as_of(as_of)
        warnings = self._fresh_read()
        scopes = self.project_scopes(scopes)
        where, params = scope_clause(scopes, "scope")
        where += " AND " + visible()
        if kind is not None:
            where += " AND kind = ?"
            params.append(records.check_kind(kind))
        if as_of is not None:
            clause, more = as_of_clause("", as_of, include_superseded)
            where += clause
            params += more
        elif not include_superseded:
            where += " AND superseded_by IS NULL"
        total = self.index.query("SELECT COUNT(*) AS n FROM records WHERE 1=1" + where, params)[0]["n"]
        page = where
        page_params = list(params)
        if before_seq is not None:
            before_seq = _check_int(before_seq, "before_seq", 1, 2**62)
            page += " AND seq < ?"
            page_params.append(before_seq)
        rows = self.index.query(f"SELECT * FROM records WHERE 1=1{page} ORDER BY line DESC LIMIT ?",
                                [*page_params, limit])
        hits = [self._hit(row) for row in rows]
        if as_of is not None:  # a correction written after as_of did not exist then
            known = self.index.ts_of([h["superseded_by"] for h in hits if h.get("superseded_by")])
            for h in hits:
                if h.get("superseded_by") and known.get(h["superseded_by"], "~") > as_of:
                    del h["superseded_by"]
        returned_through = len(hits)
        if before_seq is not None:
            newer = self.index.query("SELECT COUNT(*) AS n FROM records WHERE 1=1" + where + " AND seq >= ?",
                                     [*params, before_seq])[0]["n"]
            returned_through += newer
        cut = 0
        if max_tokens is not None:
            hits, cut = _fit_tokens(hits, max_tokens)
            if cut:
                warnings.append(f"max_tokens={max_tokens} left out {cut} record(s) or part of one; page on with "
                                "before_seq")
        returned_through -= cut
        return {"records": hits, "total": total, "returned": len(hits),
                "truncated": returned_through < total or bool(cut), "warnings": warnings}

    def scopes(self, project: str | None = None) -> dict[str, Any]:
        """Every scope with its current and total records and project key; `current_project` marks the
        scopes default reads of `project` take in (its own and other checkouts of the same repository)."""
        warnings = self._fresh_read()
        rows = self.index.scope_table()
        mine = set(self.project_scopes([project]) or []) if project else set()
        table = [{**r, "current_project": r["scope"] in mine} for r in rows]
        return {"records": [], "total": len(table), "returned": 0, "truncated": False, "warnings": warnings,
                "scopes": table}

    # -- integrity ------------------------------------------------------------------------------
    def verify(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Recompute the whole chain (streaming, constant memory) and reconcile it with the index."""
        warnings = self._fresh()
        size = self.log.size()
        chain = ChainState()
        corrupt: list[dict[str, Any]] = []
        breaks: list[dict[str, Any]] = []
        first_break: dict[str, Any] | None = None
        valid = 0
        missing_from_index = 0
        index_only = 0
        tombstones: dict[tuple[Any, ...], Any] = {}
        idx = self.index.iter_offsets()
        pending = next(idx, None)
        for n, line in enumerate(self.log.lines(), 1):
            rec, problem = chain.feed(line)
            if problem is not None:
                item = problem.as_dict()
                (corrupt if problem.kind == "corrupt" else breaks).append(item)
                if first_break is None:
                    first_break = {"seq": problem.seq, "line": problem.line, "reason": problem.reason}
            while pending is not None and pending[0] < line.offset:
                index_only += 1
                pending = next(idx, None)
            if rec is not None:
                valid += 1
                _vouch(rec, line, tombstones)
                if pending is not None and pending[0] == line.offset:
                    if pending[1] != rec["sha256"]:
                        missing_from_index += 1
                        index_only += 1
                    pending = next(idx, None)
                else:
                    missing_from_index += 1
            elif pending is not None and pending[0] == line.offset:
                index_only += 1
                pending = next(idx, None)
            if progress is not None and n % 5000 == 0:
                progress(line.end, size)
        while pending is not None:
            index_only += 1
            pending = next(idx, None)
        if progress is not None:
            progress(size, size)
        for (_rid, seq, _sha), line in tombstones.items():
            item = {"line": line.number, "offset": line.offset, "seq": seq, "kind": "break",
                    "reason": "tombstone that no purge record lists"}
            breaks.append(item)
            if first_break is None or line.number < first_break["line"]:
                first_break = {"seq": seq, "line": line.number, "reason": item["reason"]}
        torn = self.log.torn_tail()
        chain_ok = not corrupt and not breaks
        coverage = 1.0 if valid == 0 else round((valid - missing_from_index) / valid, 6)
        quarantine = self._quarantine_report()
        if quarantine["records"]:
            warnings.append(f"quarantine/ holds {len(quarantine['records'])} whole record(s) the log no longer has "
                            "(an acknowledged write cut off by damage?): " +
                            ", ".join(f"{q['id']} in {q['file']}" for q in quarantine["records"][:5]))
        intact = (chain_ok and torn is None and missing_from_index == 0 and index_only == 0
                  and not quarantine["records"])
        return {
            "records": valid,
            "chain_ok": chain_ok,
            "corrupt_lines": corrupt[:100],
            "corrupt_count": len(corrupt),
            "chain_breaks": breaks[:100],
            "torn_tail": None if torn is None else {"offset": torn[0], "bytes": torn[1]},
            "missing_from_index": missing_from_index,
            "index_only": index_only,
            "coverage": coverage,
            "intact": intact,
            "first_break": first_break,
            "last_seq": chain.seq,
            "quarantine": quarantine,
            "warnings": warnings,
        }

    def _quarantine_report(self) -> dict[str, Any]:
        """What quarantine/ holds: torn fragments of unacknowledged writes, and (never to be reported as
        intact) whole valid records that the log lacks, e.g. a last line whose newline was lost."""
        from .log import QUARANTINE

        files, size, found = 0, 0, []
        try:
            entries = sorted(p for p in (self.directory / QUARANTINE).iterdir() if p.is_file())
        except OSError:
            entries = []
        for path in entries:
            files += 1
            try:
                data = path.read_bytes()
            except OSError:
                continue
            size += len(data)
            try:
                rec = records.parse_line(data.rstrip(b"\n"))
            except records.BadLine:
                continue
            if records.is_tombstone(rec):
                continue
            try:
                known = self.index.by_id(rec["id"])
            except sqlite3.Error:
                known = None
            if known is None or known["sha256"] != rec["sha256"]:
                found.append({"file": path.name, "id": rec["id"], "seq": rec["seq"]})
        return {"files": files, "bytes": size, "records": found}

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Rebuild the index from the log."""
        self._check_writable()
        lines = self.index.rebuild(progress)
        counts = self.index.counts()
        result = {"lines_read": lines, "records": counts["records"], "corrupt_lines": counts["corrupt"],
                  "chain_breaks": counts["breaks"]}
        result.update(self.embed_all(progress))
        return result

    def embed_all(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Give every record a vector of the current model now (reindex does this after rebuilding)."""
        import time as _time

        from .embed import Unavailable

        self._fresh()
        sem = self.semantic()
        reason = sem.off_reason()
        if reason:
            return {"embedded": 0, "semantic": f"off: {reason}"}
        started = _time.monotonic()
        try:
            n = sem.catch_up(progress=progress)
        except Unavailable as e:
            return {"embedded": 0, "semantic": f"off: {e}"}
        took = _time.monotonic() - started
        return {"embedded": n, "semantic": "on", "embed_seconds": round(took, 3),
                "embed_per_second": round(n / took, 1) if took > 0 and n else 0.0}


def parse_as_of(value: Any) -> str | None:
    """`as_of` (RFC 3339, or a date meaning the end of that day, UTC) as a UTC timestamp in the records'
    own format, so it compares with their `ts` as text. None stays None."""
    if value is None:
        return None
    from datetime import datetime, time, timezone

    if not isinstance(value, str) or not value.strip():
        raise UsageError("as_of must be an RFC 3339 time or a date", hint="e.g. 2026-11-30 or 2026-11-30T12:00:00Z")
    text = value.strip()
    try:
        if len(text) == 10:
            moment = datetime.combine(datetime.strptime(text, "%Y-%m-%d").date(), time.max, tzinfo=timezone.utc)
        else:
            iso = text[:-1] + "+00:00" if text[-1] in "Zz" else text
            moment = datetime.fromisoformat(iso.replace("t", "T").replace(" ", "T", 1))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
    except ValueError:
        raise UsageError(f"as_of {value!r} is not an RFC 3339 time or a date",
                         hint="e.g. 2026-11-30 or 2026-11-30T12:00:00Z") from None
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _snippet(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _vouch(rec: dict[str, Any], line: Any, tombstones: dict[tuple[Any, ...], Any]) -> None:
    """Track tombstones until a later purge record lists them ({id, seq, sha256}); verify names the rest."""
    if records.is_tombstone(rec):
        tombstones[(rec["id"], rec["seq"], rec["sha256"])] = line
    elif rec["kind"] == records.FORGET_KIND and rec.get("action") == "purge" and isinstance(rec.get("purged"), list):
        for p in rec["purged"]:
            if isinstance(p, dict):
                tombstones.pop((p.get("id"), p.get("seq"), p.get("sha256")), None)


def _check_int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number from {lo} to {hi}", hint=f"pass an integer, or omit {name} for the default")
    if not lo <= value <= hi:
        raise UsageError(f"{name} must be from {lo} to {hi} (got {value})", hint=f"pass an integer from {lo} to {hi}")
    return value


def _fit_tokens(hits: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], int]:
    """Keep hits, best first, while their text fits the budget; trim the first if it alone is too big."""
    kept: list[dict[str, Any]] = []
    used = 0
    for i, hit in enumerate(hits):
        cost = estimate_tokens(hit["text"]) + 12  # ids, scope and punctuation around the text
        if used + cost <= budget:
            kept.append(hit)
            used += cost
            continue
        if not kept:
            trimmed = dict(hit)
            trimmed["text"] = trim_to_tokens(hit["text"], max(budget - 12, 1))
            trimmed["text_truncated"] = True
            return [trimmed], len(hits) - 1 + 1
        return kept, len(hits) - i
    return kept, 0


def trim_to_tokens(text: str, budget: int, marker: str = " […trimmed]") -> str:
    """The longest prefix of `text` (plus the marker) whose estimate fits `budget`."""
    if estimate_tokens(text) <= budget:
        return text
    room = max(budget - estimate_tokens(marker), 0)
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + marker
