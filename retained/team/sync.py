"""One sync of a shared project: fetch, verify, merge by content, publish, push. The store calls `sync`.

    result = sync(team_dir, remote_url, writer, outgoing_records, purges, author=...)

What it promises:
- **Local first.** It never changes the store's log; what it writes is the project's team directory
  (the mirror of every writer's log, its sync state, retained's own bare repository). It holds the
  project's sync lock for its whole run: a second sync waits up to `wait` seconds, then says so.
- **Verified imports.** Every writer's file fetched is verified (chain, hashes, writer, clock,
  tombstones vouched for by a purge record); only the verified prefix of a damaged file is taken in,
  and a file that changed a line this machine already holds is refused for that writer, in one line.
- **Signed heads** (`signing.py`). Each writer's head is checked against the key pinned for it before
  tombstones are vouched for, and what a refused head does not vouch for is not taken in; this
  writer's new head is signed, and `signatures/<writer>.sig` and `allowed_signers` go in each commit.
  The remote's version of a writer's file that its owner's signed head covers replaces a version this
  clone took in before (`SyncResult.signed`: per writer, signed, unsigned or refused).
- **Own lines.** Lines of this writer's own file it did not write are refused and named, and its own
  file is pushed back; lines signed with this user's key that the mirror lacks (a store restored from
  a backup) are taken back and returned in `SyncResult.restored` for the store's log.
- **Merge by content.** Per writer file, the longer extension of the same lines wins; a line and its
  tombstone are the same line. Commits only carry the merged tree: a commit's one parent is the commit
  fetched, so that a push is a fast-forward (on a rejection it fetches, merges and pushes again, at
  most `attempts` times) and no commit that held purged bytes is ever linked in again.
- **Publishing.** This writer's new records (the `outgoing` records whose id no writer's log holds yet)
  are appended to its own log, redacted again, with `writer`, `author`, `hlc` (and `seen`).
- **Growth bounded by what changed.** A writer's log travels cut into segments of SEGMENT_LINES
  lines: a sync writes (and pushes) only the segments that changed, the trees above them and a
  commit, in one git call; it reads (fetches and verifies) only the segments that differ from the
  mirror. After each sync, retained's bare repository is packed back within `git.LOOSE_LIMIT` loose
  objects and `git.PACK_LIMIT` packs. A ref in the older one-file-per-writer format is read, and
  written again in segments by the next push.
- **Purge.** A purge request appends a purge record listing the lines (in any writer's log); every
  clone tombstones them; the sync that publishes a purge (or finds purged bytes in what it fetched)
  rewrites the ref's history to a new root commit, pushed with a lease, and drops every unreachable
  object from its bare repository.
- **Faults** end the sync with one line in `SyncResult.error` (and its hint), the mirror and the store
  intact; the next sync takes up from what is on disk. Records acknowledged by the store are never
  lost: until their line is on the remote they count as `pending`.
"""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import records, redact
from ..errors import StoreError, UsageError
from . import hlc, signing, state, wlog
from .git import (
    FETCHED_REF,
    MEMORY_REF,
    NETWORK_TIMEOUT,
    Git,
    GitMissing,
    OutOfTime,
    PushOutcome,
    TeamError,
    object_id,
    public_url,
    tree_content,
)
from .mirror import PURGE_MARK, TOMBSTONE_MARK, Mirror, blob_oid

FORMAT = 2
FORMAT_BYTES = b"retained-memory 2\n"
FORMAT_OID = blob_oid(FORMAT_BYTES)
#: The layout before segments, one file per writer (`writers/<writer>.jsonl`): still read, and written
#: again as segments by the next push.
_FORMATS = {FORMAT_OID: FORMAT, blob_oid(b"retained-memory 1\n"): 1}
#: Lines per segment of a writer's log on the ref (`writers/<writer>/<n>.jsonl`, n from 000000): a sync
#: that appends k lines writes the segments they fall in, the writer's tree of segments (about 40 bytes
#: per segment), two small trees and a commit. A purge rewrites the segments of the lines it names.
#: Measured at 10k lines per writer, 64 lines keep the worst one-record sync smallest (128: a bigger
#: last segment; 32: a bigger tree).
SEGMENT_LINES = 64
_SEGMENT = re.compile(r"writers/([^/]+)/(\d{6})\.jsonl\Z")
_WHOLE = re.compile(r"writers/([^/]+)\.jsonl\Z")
ATTEMPTS = 5
_PURGES_TRAILER = "Purges:"


@dataclass(frozen=True)
class PurgeRequest:
    """Purge these record ids from the team: `id` is the purge's own id (the local purge record's, so
    that both name one act), `targets` the ids of records in any writer's log."""

    id: str
    targets: tuple[str, ...]
    ts: str
    reason: str | None = None


@dataclass
class SyncResult:
    ok: bool
    error: str | None = None  # one line when the sync did not finish
    hint: str | None = None
    pulled: dict[str, int] = field(default_factory=dict)  # new lines taken in, per writer
    signed: dict[str, str] = field(default_factory=dict)  # per writer checked: signed, unsigned or refused
    published: int = 0  # this writer's records appended to its log by this sync
    pushed: int = 0  # this writer's lines the remote received from this sync
    pending: int = 0  # this writer's lines not on the remote yet
    writers: list[str] = field(default_factory=list)  # every writer whose log this machine holds
    refused: list[str] = field(default_factory=list)  # one line each: what was not taken in, and why
    notes: list[str] = field(default_factory=list)
    # {writer, id, by, purged_by, author}: each line tombstoned here by this sync, the purge record that
    # asked (`by`), its writer and that writer's author name (who asked)
    purged: list[dict[str, str]] = field(default_factory=list)
    # This writer's own lines taken back from the remote (a store restored from a backup), as record
    # bodies for the store's log: id, ts, kind, text, scope, hlc and the record's other fields.
    restored: list[dict[str, Any]] = field(default_factory=list)
    rewrote: bool = False  # the ref's history was rewritten (a purge)
    pull_only: bool = False  # the remote let this machine fetch but not push (read-only access)
    commit: str | None = None  # the remote's commit after the sync
    seconds: float = 0.0
    git_seconds: float = 0.0  # of which git itself
    git_calls: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def sync(team_dir: Path, remote: str, writer: str, outgoing: Sequence[Mapping[str, Any]] = (),
         purges: Sequence[PurgeRequest] = (), *, author: Mapping[str, str] | None = None, ref: str = MEMORY_REF,
         wait: float = 30.0, attempts: int = ATTEMPTS, budget: float | None = None,
         signatures: signing.Signatures | None = None) -> SyncResult:
    """Sync the project whose team directory is `team_dir` with `remote`, as `writer`. `wait`: how long
    to wait for another sync of the project to end; `budget`: seconds git may take in all (None: each
    call is bounded on its own); `signatures`: how heads are checked and signed (default: this writer's
    key as `signing.find_key` finds it from the current directory)."""
    started = time.perf_counter()
    if not wlog.WRITER_ID.match(writer):
        raise UsageError(f"not a writer id: {writer!r}", hint="use state.writer_id(store_dir)")
    if any(wlog.is_purge(rec) for rec in outgoing):
        raise UsageError("a purge record is not shared as a record", hint="pass it to sync as a PurgeRequest")
    with state.try_lock(team_dir / state.SYNC_LOCK, wait) as held:
        if not held:
            return SyncResult(False, "another sync of this project is running on this machine",
                              "it pulls and pushes everything there is; run `retained sync` again after it if needed")
        run = _Run(team_dir, remote, ref, writer, dict(author or {}), budget)
        run.sigs = signatures or signing.Signatures(team_dir, writer)
        result = run.run(list(outgoing), list(purges), attempts)
    result.seconds = time.perf_counter() - started
    return result


def status(team_dir: Path, writer: str) -> dict[str, Any]:
    """What doctor and the page show for one shared project: the last sync and its outcome, the writers
    whose logs are here, and this writer's lines not on the remote yet. Reads files only."""
    saved = state.read_json(team_dir / state.SYNC_FILE) or {}
    lines = saved.get("files") or {}
    own = (lines.get(writer) or {}).get("lines", 0)
    on_remote = (saved.get("remote_lines") or {}).get(writer, 0)
    return {"last": saved.get("last"), "writers": sorted(lines), "pending": max(0, own - on_remote),
            "remote": saved.get("remote"), "ref": saved.get("ref")}


class _Pulling:
    """What a sync does with what it fetched: verify every writer's log (chain, fields, signed heads),
    keep each writer's published lines its own, and merge each log into the mirror. `_Run` is the rest."""

    dir: Path
    remote: str
    ref: str
    writer: str
    git: Git
    mirror: Mirror
    result: SyncResult
    saved: dict[str, Any]
    imports: list[hlc.Import]
    theirs: dict[str, list[wlog.Entry]]
    keep_remote: set[str]
    remote_format: int
    sigs: signing.Signatures

    def _pull(self, fetched: str | None) -> dict[str, str]:
        """Verify what was fetched and merge it into the mirror (in memory). Returns the fetched tree,
        {path: blob oid}. Only the pieces of a writer's log that differ from this machine's copy are read,
        with the signature files that changed, in one git call; each writer's lines are then cut to what
        its signed head vouches for (`signing.Signatures.check`) before tombstones are vouched for."""
        self.theirs, self.keep_remote = {}, set()
        if fetched is None:
            return {}
        paths = self.git.tree_files(fetched)
        self.remote_format = self._check_format(paths)
        pieces, extra = self._sorted(paths)
        plans = {w: self._remote_pieces(w, [oid for _, oid in sorted(numbered.items())])
                 for w, numbered in sorted(pieces.items())}
        known = self._known_extra()
        wanted = [oid for plan in plans.values() if plan is not None for oid in plan[0] if oid not in plan[1]]
        wanted += [oid for oid in extra.values() if oid not in known]
        got = self.git.blobs(wanted) if wanted else {}
        extra_bytes = {p: known[oid] if oid in known else bytes(got[oid]) for p, oid in extra.items()}
        signatures = {signer: extra_bytes[p] for p in extra if (signer := _signer(p)) is not None}
        parsed: dict[str, wlog.Parsed] = {}
        marked = False
        for w, plan in plans.items():
            data = None if plan is None else b"".join(
                wlog.encode(plan[1][oid]) if oid in plan[1] else got[oid] for oid in plan[0])
            marked = marked or TOMBSTONE_MARK in (self.mirror.data.get(w, b"") if data is None else data)
            parsed[w] = self._parse(w, data)
        offered = parsed.get(self.writer)
        parsed = self.sigs.check(parsed, signatures, extra_bytes.get(signing.ALLOWED_SIGNERS),
                                 {w: len(e) for w, e in self.mirror.files.items()})
        self.saved["ref_files"] = {p: d.decode("utf-8", "replace") for p, d in extra_bytes.items()}
        for line in self.sigs.refusals:
            self._refuse(line)
        if marked:  # else no line fetched is a tombstone, and there is nothing to vouch for
            parsed = wlog.vouch(parsed, wlog.listed(self.mirror.files))
        if self.writer in parsed:
            parsed[self.writer] = self._own_extension(parsed[self.writer], offered or parsed[self.writer])
        before = {w: len(e) for w, e in self.mirror.files.items()}
        for w, p in sorted(parsed.items()):
            if p.problem:
                self._refuse(f"{p.problem}; took in the {len(p.entries)} lines before it")
            self.theirs[w] = p.entries
            self._merge(w, p.entries)
        self._note_import(before)
        return paths

    def _sorted(self, paths: dict[str, str]) -> tuple[dict[str, dict[int, str]], dict[str, str]]:
        """The fetched tree as ({writer: {piece number: oid}}, {signature or allowed_signers path: oid});
        any other path is noted and left alone."""
        pieces: dict[str, dict[int, str]] = {}
        extra: dict[str, str] = {}
        for path, oid in paths.items():
            found = _piece(path, self.remote_format)
            if found is not None:
                pieces.setdefault(found[0], {})[found[1]] = oid
            elif path == signing.ALLOWED_SIGNERS or _signer(path) is not None:
                extra[path] = oid
            elif path != "format":
                self._note(f"ignored {path} on the memory ref: not a writer's log")
        return pieces, extra

    def _known_extra(self) -> dict[str, bytes]:
        """{oid: bytes} of the signature files and allowed_signers this clone already holds (its pins,
        and those it fetched last): an unchanged one is not read from git again."""
        texts = [pin["signature"] for pin in self.sigs.pins.values()]
        saved = self.saved.get("ref_files")
        if isinstance(saved, dict):
            texts += [t for t in saved.values() if isinstance(t, str)]
        return {blob_oid(data): data for data in (t.encode() for t in texts)}

    def _check_format(self, paths: dict[str, str]) -> int:
        if paths.get("format") in _FORMATS:
            return _FORMATS[paths["format"]]
        found = bytes(self.git.blobs([paths["format"]])[paths["format"]]) if "format" in paths else b""
        version = found.decode("utf-8", "replace").strip()
        if version.startswith("retained-memory "):
            raise TeamError(f"the memory ref on {public_url(self.remote)} is in format {version!r}, newer than this retained "
                            f"understands ({FORMAT_BYTES.decode().strip()!r})", hint="upgrade retained, then sync again")
        raise TeamError(f"{self.ref} on {public_url(self.remote)} does not hold retained memory (no format file): someone "
                        "pushed something else there; nothing was pulled or pushed",
                        hint=f"ask who pushed it; once {self.ref} is deleted on the remote, the next sync "
                             "publishes every writer's log again from this machine's mirror")

    def _remote_pieces(self, writer: str, oids: list[str]) -> tuple[list[str], dict[str, list[wlog.Entry]]] | None:
        """A writer's log on the ref as its pieces (`oids`, in order) and the pieces this machine's copy
        holds as they are, {oid: lines} (the others come from git). None: the same as the mirror's."""
        if self.remote_format == FORMAT:
            mine = self.mirror.segments(writer, SEGMENT_LINES)
        else:
            entries = self.mirror.files.get(writer, [])
            mine = [(blob_oid(self.mirror.data[writer]), entries)] if entries else []
        held = dict(mine)
        if len(oids) == len(mine) and all(oid in held for oid in oids):
            return None
        return oids, held

    def _parse(self, writer: str, data: bytes | None) -> wlog.Parsed:
        mine = self.mirror.files.get(writer, [])
        if data is None:  # the same as this machine's copy
            return wlog.Parsed(mine, None)
        base = mine if mine and data.startswith(self.mirror.data[writer]) else []
        return wlog.parse_log(writer, data, base or None)  # its new lines keep their bytes only

    def _own_extension(self, p: wlog.Parsed, offered: wlog.Parsed) -> wlog.Parsed:
        """A writer's published lines are its own: lines of this writer's own log on the remote that
        this machine does not hold and did not note as its own are taken in only when their head is
        signed with this user's key (a store restored from a backup: they come back, `restored`);
        else they are refused and named, and this machine's own log goes back to the remote. `p`: what
        the signature check left of `offered`, the verified lines fetched."""
        mine, theirs = self.mirror.files.get(self.writer, []), offered.entries
        n = len(mine)
        if len(theirs) <= n or any(a is not b and a.ident != b.ident for a, b in zip(mine, theirs, strict=False)):
            return p  # nothing new, or a rewrite (`_merge` judges it)
        covered = self._own_signed(len(theirs))
        keep = max(n, self._own_head_in(theirs), covered)
        if covered > n:  # signed with this user's key: this machine's own, back from the remote
            self.result.restored += [body for e in theirs[n:covered] if (body := _restorable(e)) is not None]
        if keep >= len(theirs):  # every line this machine's own (signed, or noted as its own: a lost mirror)
            return wlog.Parsed(theirs, None)
        extra = theirs[keep:]
        ids = ", ".join(str(e.rec.get("id"))[:40] for e in extra[:5]) + (", ..." if len(extra) > 5 else "")
        self._refuse(f"writer {self.writer} (this machine): the remote's lines {keep + 1}-{len(theirs)} of this "
                     f"machine's own log ({ids}) were not written here and their head is not signed with this "
                     "machine's key: refused, and this machine's own log pushed back (a store restored from a "
                     "backup takes its newer lines back only when they are signed: keep signing on)")
        return wlog.Parsed(theirs[:keep], p.problem)

    def _own_signed(self, n: int) -> int:
        """How many of the first `n` lines of this writer's log on the remote its head signed with this
        user's own key vouches for (0: none, or another key)."""
        v = self.sigs.verdicts.get(self.writer)
        if v is None or v.status != signing.SIGNED or v.key is None or v.key != self.sigs.own_key():
            return 0
        return min(v.keep, n)

    def _own_head_in(self, entries: list[wlog.Entry]) -> int:
        """How many lines of `entries` this machine noted as its own (the head saved after each sync),
        0 when `entries` do not hold that head."""
        noted = self.saved.get("own_head")
        if not (isinstance(noted, list) and len(noted) == 2 and isinstance(noted[0], int) and isinstance(noted[1], str)):
            return 0
        seq, sha = noted
        return seq if 1 <= seq <= len(entries) and entries[seq - 1].rec.get("sha256") == sha else 0

    def _signed_here(self, writer: str, entries: list[wlog.Entry], *, own: bool = False) -> bool:
        """Whether every line of `entries` is vouched for by `writer`'s head as this sync verified it with
        the key pinned for that writer (`own`: with this user's own key, whatever the pin says)."""
        v = self.sigs.verdicts.get(writer)
        pin = self.sigs.pins.get(writer)
        if v is None or v.status != signing.SIGNED or v.problem is not None or v.keep < len(entries) or not entries:
            return False
        if own:
            return v.key is not None and v.key == self.sigs.own_key()
        if pin is None:
            return False
        seq, sha = pin["head"]
        return 1 <= seq <= len(entries) and entries[seq - 1].rec.get("sha256") == sha

    def _merge(self, writer: str, theirs: list[wlog.Entry]) -> None:
        mine = self.mirror.files.get(writer, [])
        merged = wlog.merge(writer, mine, theirs)
        if merged.refused and writer == self.writer and self._signed_here(writer, theirs, own=True):
            # A copy of this store writes under this id with this user's key: leave its file on the
            # remote as it is, push nothing of this writer's until it shares again under a new id.
            self.keep_remote.add(writer)
            self._refuse(merged.refused + "; another machine writes as this writer (a copied store?): this "
                         "machine's new records stay here until it shares again under a new writer id "
                         "(`retained unshare`, then `retained share`)")
        elif merged.refused and writer == self.writer:
            # Published lines are append-only and this writer's are its own: a rewrite it did not sign is
            # refused, and its own log goes back to the remote.
            self._refuse(merged.refused + "; this machine did not write that version (it is not signed with this "
                         "machine's key): its own log pushed back")
        elif merged.refused and self._signed_here(writer, theirs):
            # The owner's signed head decides: this clone's copy was a version its owner never signed.
            at = next(i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a is not b and a.ident != b.ident)
            self._refuse(f"writer {writer}: this machine's lines {at + 1}-{len(mine)} of that log are not the ones "
                         f"its owner signed (head seq {len(theirs)}): replaced by the signed version")
            start = wlog.merge(writer, mine[:at], theirs[:at]).entries
            merged = wlog.Merged(start + theirs[at:], len(theirs) - at, None)
        elif merged.refused:
            self._refuse(merged.refused)
        self.mirror.files[writer] = merged.entries
        if merged.pulled and writer != self.writer:  # this writer's own lines come back as `restored`
            self.result.pulled[writer] = self.result.pulled.get(writer, 0) + merged.pulled

    def _refuse(self, line: str) -> None:
        if line not in self.result.refused:  # a retry meets the same damage again
            self.result.refused.append(line)

    def _note(self, line: str) -> None:
        if line not in self.result.notes:
            self.result.notes.append(line)

    def _note_import(self, before: dict[str, int]) -> None:
        """Remember, before the new lines become readable, what this machine has now seen (hlc.Import)."""
        heads = {w: len(e) for w, e in self.mirror.files.items() if w != self.writer and e}
        if all(before.get(w, 0) >= n for w, n in heads.items()):
            return
        now = _now_ms()
        clock = hlc.ZERO
        for w, entries in sorted(self.mirror.files.items()):
            if w != self.writer:
                clock, followed = hlc.observe(clock, wlog.last_clock(entries), now)
                if not followed:
                    self._note(f"writer {w}'s clock runs more than a day ahead; this machine's clock does not "
                               "follow it")
        self.imports.append(hlc.Import(now, None, clock, heads))
        self._save_state(last=None)

    def _save_state(self, last: dict[str, Any] | None) -> None:
        own = self.mirror.files.get(self.writer, [])
        unpushed = own[(self.saved.get("remote_lines") or {}).get(self.writer, 0):]
        oldest = min((t for t in (hlc.ts_ms(e.rec.get("ts")) for e in unpushed) if t is not None), default=None)
        self.imports = hlc.prune(self.imports, oldest, _now_ms())
        self.saved.update(version=1, remote=public_url(self.remote), ref=self.ref, imports=[i.as_json() for i in self.imports],
                          files={w: {"sha256": d, "lines": len(self.mirror.files[w]),
                                     "segments": self.mirror.installed_segments(w, SEGMENT_LINES)}
                                 for w, d in self.mirror.digests().items()}, segment_lines=SEGMENT_LINES)
        if own:  # the lines up to it are this machine's own (`_own_extension`), whatever its mirror loses
            self.saved["own_head"] = [own[-1].rec["seq"], own[-1].rec["sha256"]]
        if last is not None:
            self.saved["last"] = last
        state.write_json(self.dir / state.SYNC_FILE, self.saved)


class _Run(_Pulling):
    """One sync under the project's lock: fetch, verify and merge (`_Pulling`), publish, push."""

    def __init__(self, team_dir: Path, remote: str, ref: str, writer: str, author: dict[str, str],
                 budget: float | None) -> None:
        self.dir, self.remote, self.ref, self.writer, self.author = team_dir, remote, ref, writer, author
        self.git = Git(team_dir / state.REPO, budget=budget)
        self.mirror = Mirror(team_dir / state.MIRROR)
        self.result = SyncResult(True)
        self.saved: dict[str, Any] = {}
        self.imports: list[hlc.Import] = []
        self.theirs: dict[str, list[wlog.Entry]] = {}  # the verified lines of the commit fetched, per writer
        self.keep_remote: set[str] = set()  # writers whose remote file the next commit keeps as it is
        self.purge_published = False
        self.tombs_before: set[tuple[str, int]] = set()
        self.root_made: dict[str, Any] | None = None  # the root commit this sync made, until it is pushed
        self.outgoing: list[Mapping[str, Any]] = []
        self.remote_format = FORMAT  # the format of the tree fetched last
        self.sigs = signing.Signatures(team_dir, writer)

    def run(self, outgoing: list[Mapping[str, Any]], purges: list[PurgeRequest], attempts: int) -> SyncResult:
        self.outgoing = outgoing
        try:
            self._open()
            self._attempts(outgoing, purges, attempts)
        except TeamError as e:
            self.result.ok, self.result.error, self.result.hint = False, e.message, e.hint
        except OSError as e:
            self.result.ok = False
            self.result.error = f"team directory {self.dir}: {e.strerror or e}"
            self.result.hint = "free disk space or fix permissions, then run `retained sync` again"
        self._finish()
        return self.result

    # -- set up -------------------------------------------------------------------------------------------
    def _open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in (self.dir, self.mirror.directory):
            state.discard_temporaries(folder)
        try:
            self.saved = state.read_json(self.dir / state.SYNC_FILE) or {}
        except StoreError as e:
            self.result.notes.append(f"{e.message}; made it again from the mirror")
        self.imports = hlc.parse_imports(self.saved.get("imports"))
        trusted = {w: v["sha256"] for w, v in (self.saved.get("files") or {}).items()
                   if isinstance(v, dict) and isinstance(v.get("sha256"), str)}
        noted = self.saved.get("files") or {}
        segments = {w: v["segments"] for w, v in noted.items() if isinstance(v, dict) and isinstance(v.get("segments"), list)
                    and all(isinstance(oid, str) for oid in v["segments"])}
        self.result.notes += self.mirror.load(trusted, segments, SEGMENT_LINES if self.saved.get("segment_lines") ==
                                              SEGMENT_LINES else 0)
        self.tombs_before = self._tombstones()
        self._ensure_repo()
        _clear_stale_locks(self.git.git_dir)

    def _ensure_repo(self) -> None:
        """Retained's bare repository is a cache of the remote: if it is unusable (a crash inside git's
        own gc, a deleted file), it is made again and fetched again; the mirror holds everything."""
        try:
            self.git.ensure()
            self.git.run("rev-parse", "--git-dir")
        except (GitMissing, OutOfTime):
            raise
        except TeamError as e:
            shutil.rmtree(self.git.git_dir, ignore_errors=True)
            self.result.notes.append(f"retained's copy of the team repository was unusable ({e.message}); made it again")
            self.git.ensure()

    def _tombstones(self) -> set[tuple[str, int]]:
        return {(w, i) for w, entries in self.mirror.files.items() if self.mirror.may_hold(w, TOMBSTONE_MARK)
                for i, e in enumerate(entries, 1) if e.tombstone}

    # -- the loop: fetch, merge, publish, push --------------------------------------------------------------
    def _attempts(self, outgoing: list[Mapping[str, Any]], purges: list[PurgeRequest], attempts: int) -> None:
        for attempt in range(attempts):
            fetched = self.git.fetch(self.remote, self.ref)
            remote_files = self._pull(fetched)
            if attempt == 0:
                self._publish(outgoing, purges)
            if any(self.mirror.may_hold(w, PURGE_MARK) for w in self.mirror.files):  # else no purge to apply
                wlog.apply_purges(self.mirror.files)
            self._install()
            rewrite = self.purge_published or self._needs_rewrite(fetched)
            if rewrite:  # what was fetched holds purged bytes: they leave this repository whatever happens
                self.saved["collect_due"] = True
            tree, contents = self._tree_oids(remote_files)
            if fetched is not None and not rewrite and tree == remote_files:
                self._pushed(fetched, pushed=0)
                return
            commit = self._commit(None if rewrite else fetched, rewrite or fetched is None, tree, contents)
            try:
                outcome = self.git.push(self.remote, commit, self.ref, fetched)
            except TeamError as e:
                if fetched is None or not _read_only(e.message):
                    raise
                outcome = PushOutcome(False, False, e.message)
            if not outcome.ok and fetched is not None and _read_only(outcome.reason or ""):
                # A clone that may read but not write (a read-only teammate, CI): it pulled, and says so
                # once, in its result; its own records wait here and no failure is left in every brief.
                self.result.pull_only = True
                self.result.notes.append("pull-only: the remote refused this machine's push "
                                         f"({outcome.reason}); this machine's records stay here")
                return
            if outcome.ok:
                self.result.rewrote = self.result.rewrote or rewrite
                self._pushed(commit, pushed=self._own_lines() - len(self.theirs.get(self.writer, [])))
                return
            if not outcome.stale:
                raise TeamError(f"the team remote refused the push to {self.ref}: {outcome.reason}",
                                hint="check your write access to the remote (a protected ref, a server hook); the "
                                     "records wait here and go with the next sync")
            self.result.notes.append(f"the remote moved during the sync ({outcome.reason}); fetched and merged again")
        raise TeamError(f"the remote kept moving: {attempts} pushes in a row were overtaken by other pushes",
                        hint="run `retained sync` again in a moment; nothing was lost")













    # -- publishing ---------------------------------------------------------------------------------------
    def _publish(self, outgoing: list[Mapping[str, Any]], purges: list[PurgeRequest]) -> None:
        if self.writer in self.keep_remote:
            return
        held = self.mirror.holding([r.get("id") for r in outgoing] + [p.id for p in purges]
                                   + [t for p in purges for t in p.targets], self.writer)
        own = self.mirror.files.setdefault(self.writer, [])
        found: Counter[str] = Counter()
        for rec in outgoing:
            rid = rec.get("id")
            where = held.get(rid) if isinstance(rid, str) else None
            if where is not None and where[0] == self.writer:
                continue
            body, why = wlog.share_copy(rec, found)
            if body is None:
                self.result.notes.append(why or "a record was not shared")
                continue
            if where is not None and all(where[1].rec.get(k) == body.get(k) for k in ("ts", "kind", "text")):
                continue  # this record, published under a writer id this store had before (it moved)
            # else another writer's line claims this record's id: this record is published all the same,
            # and every clone shows the clash and keeps the one published first (the index's rule)
            own.append(self._seal(body, own))
            held[body["id"]] = (self.writer, own[-1])
            self.result.published += 1
        for request in purges:
            if request.id not in held:
                self._publish_purge(request, held, own, found)
        if found:
            self.result.notes.append("shared copies: " + redact.describe(found))

    def _publish_purge(self, request: PurgeRequest, held: dict[str, tuple[str, wlog.Entry]],
                       own: list[wlog.Entry], found: Counter[str]) -> None:
        targets = []
        for rid in request.targets:
            where = held.get(rid)
            if where is not None and not where[1].tombstone:
                seq, _, sha = where[1].ident
                targets.append(wlog.Target(where[0], rid, seq, sha))
        if not targets:
            return  # nothing the team holds: the purge stays local
        reason = redact.redact_value(request.reason, found) if request.reason else None
        scope = held[targets[0].id][1].rec.get("scope")
        own.append(self._seal(wlog.purge_body(request.id, request.ts, targets, reason, scope), own))
        held[request.id] = (self.writer, own[-1])
        self.result.published += 1
        self.purge_published = True

    def _seal(self, body: dict[str, Any], own: list[wlog.Entry]) -> wlog.Entry:
        written = hlc.ts_ms(body.get("ts"))
        written = _now_ms() if written is None else written
        mine = wlog.last_clock(own)
        # The record's own clock, from its write (Appender.next_clock), when it still comes after this
        # writer's last line: the record then sorts the same here as on every clone that reads it.
        own_clock = hlc.parse(body.get("hlc"))
        clock = own_clock if own_clock is not None and own_clock > mine else \
            hlc.tick(max(mine, hlc.floor_at(self.imports, written)), written)
        seen = hlc.seen_at(self.imports, written) if wlog.needs_seen(body) else None
        return wlog.seal_after(body, own[-1] if own else None, writer=self.writer, clock=clock,
                               author=self.author, seen=seen)

    # -- writing it down ----------------------------------------------------------------------------------
    def _install(self) -> None:
        """Write the mirror. The sync state that vouches for it is saved at the end: a crash before
        then only costs the next sync a full verification, and an import not marked done is one this
        machine does not claim to have seen."""
        self.mirror.install(self.mirror.files)
        if self.imports and self.imports[-1].done is None:
            last = self.imports[-1]
            self.imports[-1] = hlc.Import(last.at, _now_ms(), last.hlc, last.heads)

    def _needs_rewrite(self, fetched: str | None) -> bool:
        """Whether the fetched history may hold bytes a known purge removed: the fetched tip holds a line
        the mirror has as a tombstone, or the history does not start at one root made after every purge."""
        known = self._purge_ids()
        if fetched is None or not known:
            return False
        for w, theirs in self.theirs.items():
            mine = self.mirror.files.get(w, [])
            if any(a is not b and a.tombstone and not b.tombstone for a, b in zip(mine, theirs, strict=False)):
                return True
        clean = self.saved.get("clean") or {}
        if clean.get("commit") and known <= set(clean.get("purges", [])) and self.git.is_ancestor(clean["commit"], fetched):
            return False
        roots = self.git.roots(fetched)
        if len(roots) == 1 and known <= _covered(self.git.message(roots[0])):
            self.saved["clean"] = {"commit": roots[0], "purges": sorted(known)}
            return False
        return True

    def _tree_oids(self, remote_files: dict[str, str]) -> tuple[dict[str, str], dict[str, bytes]]:
        """The tree the next commit holds, {path: blob oid}: `format` and every writer's log in the mirror
        cut into segments, less the writers whose log on the remote is kept as it is (from a ref of the
        older layout, its verified lines cut into segments). Also the content of each blob the fetched
        tree lacks, {oid: bytes}."""
        tree, contents = {"format": FORMAT_OID}, {}
        known = set(remote_files.values())
        if FORMAT_OID not in known:
            contents[FORMAT_OID] = FORMAT_BYTES
        held = {w: self.theirs.get(w, []) if w in self.keep_remote else e for w, e in self.mirror.files.items()}
        for path, data in self.sigs.files({w: e for w, e in held.items() if e}).items():
            oid = tree[path] = blob_oid(data)
            if oid not in known:
                contents[oid] = data
        for w in sorted(self.mirror.files):
            if w in self.keep_remote and self.remote_format == FORMAT:
                tree.update({p: oid for p, oid in remote_files.items() if (_piece(p, FORMAT) or ("",))[0] == w})
                continue
            if w in self.keep_remote:
                theirs = held[w]
                pieces = [(blob_oid(wlog.encode(theirs[n:n + SEGMENT_LINES])), theirs[n:n + SEGMENT_LINES])
                          for n in range(0, len(theirs), SEGMENT_LINES)]
            else:
                pieces = self.mirror.segments(w, SEGMENT_LINES)
            for n, (oid, lines) in enumerate(pieces):
                tree[_segment_path(w, n)] = oid
                if oid not in known:
                    contents[oid] = wlog.encode(lines)
        return tree, contents

    def _commit(self, parent: str | None, root: bool, tree: dict[str, str], contents: dict[str, bytes]) -> str:
        """Write the tree's new objects (in one git call) and a commit of it."""
        objects = [("blob", data) for _, data in sorted(contents.items())]
        logs: dict[str, dict[str, tuple[str, str]]] = {}
        signatures: dict[str, tuple[str, str]] = {}
        top_level: dict[str, tuple[str, str]] = {}
        for path, oid in tree.items():
            if path.startswith("writers/"):
                _, writer, name = path.split("/")
                logs.setdefault(writer, {})[name] = ("blob", oid)
            elif path.startswith(signing.SIGNATURES + "/"):
                signatures[path.split("/", 1)[1]] = ("blob", oid)
            else:  # format, allowed_signers
                top_level[path] = ("blob", oid)
        top = {}
        for writer, segments in sorted(logs.items()):
            objects.append(("tree", tree_content(segments)))
            top[writer] = ("tree", object_id("tree", objects[-1][1]))
        objects.append(("tree", tree_content(top)))
        top_level["writers"] = ("tree", object_id("tree", objects[-1][1]))
        if signatures:
            objects.append(("tree", tree_content(signatures)))
            top_level[signing.SIGNATURES] = ("tree", object_id("tree", objects[-1][1]))
        objects.append(("tree", tree_content(top_level)))
        self.git.write_objects(objects)
        purges = sorted(self._purge_ids())
        if root:
            message = f"retained memory of {len(logs)} writers\n\n{_PURGES_TRAILER} {' '.join(purges)}\n"
        else:
            message = f"retained sync by {self.writer}: {self.result.published} new records\n"
        commit = self.git.commit(object_id("tree", objects[-1][1]), [parent] if parent else [], message)
        self.root_made = {"commit": commit, "purges": purges} if root else None
        return commit

    def _pushed(self, commit: str, *, pushed: int) -> None:
        """The remote now holds `commit`: the mirror, less the files kept as the remote had them."""
        self.git.update_ref(MEMORY_REF, commit)
        self.git.update_ref(FETCHED_REF, commit)
        if self.root_made is not None and self.root_made["commit"] == commit:
            self.saved["clean"] = self.root_made
        lines = {w: len(e) for w, e in self.mirror.files.items()}
        for w in self.keep_remote:  # of this machine's lines, the remote holds those before the fork
            mine, theirs = self.mirror.files.get(w, []), self.theirs.get(w, [])
            lines[w] = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a.ident != b.ident), len(theirs))
        self.saved["remote_commit"], self.saved["remote_lines"] = commit, lines
        self.result.pushed = max(0, pushed)
        self.result.commit = commit

    def _purge_ids(self) -> set[str]:
        return {e.rec["id"] for w, entries in self.mirror.files.items() if self.mirror.may_hold(w, PURGE_MARK)
                for e in entries if e.purge}

    def _unpublished(self) -> int:
        """Records given to this sync that no writer's log holds yet and that may be shared."""
        held = self.mirror.holding([r.get("id") for r in self.outgoing], self.writer)
        waiting = [rec for rec in self.outgoing if rec.get("id") not in held]
        return sum(1 for rec in waiting if wlog.share_copy(rec, Counter())[0] is not None)

    def _own_lines(self) -> int:
        return len(self.mirror.files.get(self.writer, []))

    def _finish(self) -> None:
        r = self.result
        r.writers = sorted(w for w, e in self.mirror.files.items() if e)
        r.pending = max(0, self._own_lines() - (self.saved.get("remote_lines") or {}).get(self.writer, 0))
        r.pending += self._unpublished()
        newly = sorted(self._tombstones() - self.tombs_before)
        asked = {e.rec["id"]: (pw, e.rec) for pw, entries in self.mirror.files.items() if newly and
                 self.mirror.may_hold(pw, PURGE_MARK) for e in entries if e.purge}
        for w, seq in newly:
            rec = self.mirror.files[w][seq - 1].rec
            by = rec["forgotten"]["by"]
            purger, purge = asked.get(by, ("", {}))
            named = purge.get("author")
            author: dict[str, Any] = named if isinstance(named, dict) else {}
            r.purged.append({"writer": w, "id": rec["id"], "by": by, "purged_by": purger,
                             "author": str(author.get("name") or author.get("email") or purger)})
        if r.rewrote or r.purged or self.saved.get("collect_due"):
            self.saved["collect_due"] = not self._collect()
        elif r.ok:
            self._maintain()
        r.git_seconds, r.git_calls = self.git.spent, self.git.calls
        self.sigs.save()
        r.signed = self.sigs.statuses()
        for line in self.sigs.notes:
            self._note(line)
        try:
            self._save_state(last={"at": records.now_rfc3339(), "ok": r.ok, "error": r.error, "pulled": r.pulled,
                                   "pull_only": r.pull_only,
                                   "published": r.published, "pushed": r.pushed, "writers": r.writers,
                                   "refused": r.refused})
        except OSError as e:
            r.notes.append(f"could not save the sync state: {e.strerror or e}")

    def _collect(self) -> bool:
        """Drop every object of retained's bare repository that held purged bytes. After a sync that
        failed, the refs still name the old history: they go too (the next sync fetches again)."""
        try:
            if not self.result.ok:
                for ref in (MEMORY_REF, FETCHED_REF):
                    if self.git.rev(ref):
                        self.git.update_ref(ref, None)
            self.git.collect()
            return True
        except TeamError as e:
            self._note(f"could not drop purged objects from retained's team repository yet: {e.message}")
            return False

    def _maintain(self) -> None:
        """Keep retained's bare repository within its bound (`Git.maintain`); a failure only waits for
        the next sync."""
        try:
            self.git.maintain()
        except TeamError as e:
            self._note(f"could not pack retained's team repository yet: {e.message}")
        except OSError as e:
            self._note(f"could not pack retained's team repository yet: {e.strerror or e}")



def _clear_stale_locks(git_dir: Path) -> None:
    """Remove git's lock files that a git killed mid-update left behind (kill -9 of a sync). Only old
    ones: a git started by a sync killed moments ago may still be running and own its lock."""
    limit = time.time() - 2 * NETWORK_TIMEOUT
    for lock in git_dir.glob("**/*.lock"):
        try:
            if lock.is_file() and lock.stat().st_mtime < limit:
                lock.unlink()
        except OSError:
            continue


#: What a remote says when this machine may read but not write (git hosts, git daemon, file permissions).
_READ_ONLY = ("permission", "denied", "read-only", "read only", "403", "unable to access", "not exported",
              "insufficient")


def _read_only(reason: str) -> bool:
    low = reason.lower()
    return any(words in low for words in _READ_ONLY)


def _segment_path(writer: str, n: int) -> str:
    return f"writers/{writer}/{n:06d}.jsonl"


#: Fields of a writer's line that are the writer log's own, not the record's.
_LOG_ONLY = frozenset(("seq", "prev", "sha256", "writer", "author", "seen"))


def _restorable(e: wlog.Entry) -> dict[str, Any] | None:
    """The record body a line of this writer's own log holds, for the store's log (None: a tombstone or
    a purge record, which the store's log keeps in its own form)."""
    if e.tombstone or e.purge:
        return None
    return {k: v for k, v in e.rec.items() if k not in _LOG_ONLY}


def _signer(path: str) -> str | None:
    """The writer whose signature file `path` is (`signatures/<writer>.sig`), else None."""
    name = path[len(signing.SIGNATURES) + 1:-len(".sig")] if path.startswith(signing.SIGNATURES + "/") and \
        path.endswith(".sig") else ""
    return name if wlog.WRITER_ID.match(name) else None


def _piece(path: str, version: int) -> tuple[str, int] | None:
    """(writer, number) of a piece of a writer's log on a ref of this format: a segment, or (format 1)
    the whole log as piece 0. None for any other path."""
    found = (_SEGMENT if version == FORMAT else _WHOLE).match(path)
    if found is None or not wlog.WRITER_ID.match(found[1]):
        return None
    return found[1], int(found[2]) if version == FORMAT else 0


def _covered(message: str) -> set[str]:
    for line in message.splitlines():
        if line.startswith(_PURGES_TRAILER):
            return set(line[len(_PURGES_TRAILER):].split())
    return set()


def _now_ms() -> int:
    return int(time.time() * 1000)
