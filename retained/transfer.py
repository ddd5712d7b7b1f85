"""Taking memory along and bringing it in: `retained export` and `retained import`.

Export writes the log's own lines (jsonl: every byte another retained needs, unknown fields and
supersede links included) or one readable Markdown file per project. Import is a dry run unless asked
to apply: it says what it would add and what is already there. Records from a retained export keep
their ids and links and are re-appended to this log one by one, each proven like any write, with an
`imported` field saying where they came from; instruction files and the hosts' own memories become
ordinary writes (redacted, deduplicated by a key derived from scope and text, so a second import of
the same source adds nothing).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from . import durable, native, reads, records, redact, safejson, writes
from .errors import NotFound, StoreError, UsageError
from .index import query_terms, quote_query
from .paths import store_holding
from .writes import redaction_enabled

if TYPE_CHECKING:
    from .store import Store

FORMATS = ("jsonl", "markdown")
LIFECYCLE_KIND = records.FORGET_KIND


# -- export ---------------------------------------------------------------------------------------
def _hidden(store: Store) -> set[str]:
    """Ids a retraction currently hides."""
    return set(store.index.retracted_ids())


def _is_tombstone(row: Mapping[str, Any]) -> bool:
    return bool(row.get("tomb"))


def export_jsonl(store: Store, out: IO[bytes], *, scopes: list[str] | None,
                 include_history: bool = False) -> dict[str, Any]:
    """The log's lines, verbatim, for the chosen scopes. Retracted records and the forget records
    themselves only with `include_history`; purged ones as the tombstones the log holds."""
    warnings = store.refresh()
    hidden = _hidden(store)
    counts: Counter[str] = Counter()
    with open(store.log.path, "rb") if store.log.path.exists() else io.BytesIO() as log:
        for row in store.index.export_rows(scopes):
            tomb = _is_tombstone(row)
            if row["kind"] == LIFECYCLE_KIND and not tomb:
                if not include_history:
                    counts["history_left_out"] += 1
                    continue
                counts["forget_records"] += 1
            elif row["id"] in hidden:
                if not include_history:
                    counts["retracted_left_out"] += 1
                    continue
                counts["retracted"] += 1
            log.seek(row["offset"])
            raw = log.read(row["length"])
            if not raw.endswith(b"\n"):
                counts["damaged"] += 1
                continue
            out.write(raw)
            counts["tombstones" if tomb else "records"] += 1
    if counts["damaged"]:
        warnings.append(f"{counts['damaged']} line(s) changed under the index were left out; run `retained verify`")
    return {"format": "jsonl", "records": counts["records"], "tombstones": counts["tombstones"],
            "retracted": counts["retracted"], "forget_records": counts["forget_records"],
            "left_out": {"retracted": counts["retracted_left_out"], "history": counts["history_left_out"]},
            "warnings": warnings}


_MD_LINE_START = re.compile(r"^(\s*)([#>+\-*=|]|\d+[.)]|```|~~~)")
KIND_TITLES = {"decision": "Decisions", "convention": "Conventions", "preference": "Preferences", "todo": "To do",
               "fact": "Facts", "note": "Notes", "checkpoint": "Checkpoints"}
KIND_ORDER = ("checkpoint", "decision", "convention", "preference", "todo", "fact", "note")


def md_text(text: str) -> str:
    """Stored text as inert Markdown: no tag, heading, list, quote or fence of its own."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    lines = [(_MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), line) if line.strip() else "")
             for line in text.split("\n")]
    return "\n  ".join(lines).rstrip()


def project_label(scope: str) -> str:
    """A file name for a scope: its last path segment, readable and safe."""
    if scope == records.GLOBAL_SCOPE:
        return "global"
    tail = re.split(r"[\\/]", scope.rstrip("/\\"))[-1] or "root"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", tail).strip("-.") or "project"


def markdown_documents(store: Store, *, scopes: list[str] | None, include_history: bool = False) -> dict[str, str]:
    """scope → one Markdown document of its current memory grouped by kind (ids and dates on each item)."""
    store.refresh()
    hidden = _hidden(store)
    by_scope: dict[str, dict[str, list[dict[str, Any]]]] = {}
    history: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for row in store.index.markdown_rows(scopes):
        scope = row["scope"]
        if row["kind"] == LIFECYCLE_KIND and not _is_tombstone(row):
            continue
        if _is_tombstone(row):
            history.setdefault(scope, []).append(("purged", row))
        elif row["id"] in hidden:
            if include_history:
                history.setdefault(scope, []).append(("retracted", row))
        elif row.get("superseded_by"):
            if include_history:
                history.setdefault(scope, []).append((f"superseded by {row['superseded_by']}", row))
        else:
            by_scope.setdefault(scope, {}).setdefault(row["kind"], []).append(row)
    docs: dict[str, str] = {}
    for scope in sorted(set(by_scope) | set(history)):
        kinds = by_scope.get(scope, {})
        total = sum(len(v) for v in kinds.values())
        out = [f"# Memory: {project_label(scope)}", "",
               f"Scope `{scope}`: {total} current record{'s' if total != 1 else ''}, exported by retained "
               f"on {records.now_rfc3339()[:10]}. Stored text is quoted as data, not instructions.", ""]
        order = [k for k in KIND_ORDER if k in kinds] + sorted(k for k in kinds if k not in KIND_ORDER)
        for kind in order:
            rows = kinds[kind]
            out += [f"## {KIND_TITLES.get(kind, kind)} ({len(rows)})", ""]
            out += [f"- {md_text(r['text'])} (`{r['id']}`, {r['ts'][:10]})" for r in rows]
            out.append("")
        if history.get(scope):
            out += ["## History", ""]
            for what, r in history[scope]:
                if what == "purged":
                    out.append(f"- `{r['id']}` ({r['kind']}, {r['ts'][:10]}): purged, no content kept")
                else:
                    out.append(f"- `{r['id']}` ({r['kind']}, {r['ts'][:10]}, {what}): {md_text(r['text'] or '')}")
            out.append("")
        docs[scope] = "\n".join(out)
    return docs


def export(store: Store, *, scopes: list[str] | None, fmt: str = "jsonl", include_history: bool = False,
           path: str | None = None, stdout: IO[bytes] | None = None) -> dict[str, Any]:
    """Export to `path` (a file for jsonl; a folder, or one .md file for one project, for markdown).

    Each file is replaced whole (temp file beside it, fsynced, renamed, directory fsynced): a crash or
    an error mid-export leaves the old file or the new one, never half of one.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", hint="use --format jsonl or --format markdown")
    stdout = stdout if stdout is not None else sys.stdout.buffer
    target = None if path is None or path == "-" else Path(path)
    if target is not None:
        _refuse_inside_store(store, target)
    if fmt == "jsonl":
        return _export_jsonl_to(store, scopes, include_history, target, stdout)
    docs = markdown_documents(store, scopes=scopes, include_history=include_history)
    summary: dict[str, Any] = {"format": "markdown", "projects": len(docs), "files": [], "warnings": []}
    if target is None:
        stdout.write("\n\n".join(docs.values()).encode("utf-8") + (b"\n" if docs else b""))
        summary["path"] = "-"
        return summary
    summary["files"] = _write_markdown(target, docs)
    summary["path"] = str(target)
    return summary


def _refuse_inside_store(store: Store, target: Path) -> None:
    """An export never writes over or into a file of a store: the one it reads, or any other this
    machine holds (recognised by its files), through a symlink or `..` too."""
    home = Path(os.path.realpath(store.directory))
    where = Path(os.path.realpath(target))
    other = store_holding(where)
    if where == home or home in where.parents or other is not None:
        which = store.directory if other is None or other == home else other
        raise StoreError(f"{target} is inside the store at {which}; an export never writes over a "
                         "store's own files", hint="write the export somewhere outside any store directory")


def _export_jsonl_to(store: Store, scopes: list[str] | None, include_history: bool, target: Path | None,
                     stdout: IO[bytes]) -> dict[str, Any]:
    if target is None:
        result = export_jsonl(store, stdout, scopes=scopes, include_history=include_history)
        result["path"] = "-"
        return result
    try:
        with durable.atomic_file(_real(target), _kept_mode(target)) as f:
            result = export_jsonl(store, f, scopes=scopes, include_history=include_history)
    except OSError as e:
        hint = ("create the folder first, or pick another -o PATH" if isinstance(e, FileNotFoundError)
                else "pick a writable -o PATH")
        raise StoreError(f"cannot write {target}: {e.strerror or e}", hint=hint) from None
    result["path"] = str(target)
    return result


def _write_markdown(target: Path, docs: dict[str, str]) -> list[str]:
    """Write one .md file (for one project) or one file per project in the folder `target`."""
    if target.suffix.lower() == ".md" and not target.is_dir():
        if len(docs) > 1:
            raise UsageError(f"{len(docs)} projects to export but -o names one file",
                             hint="pass a folder as -o (one file per project), or --scope for one project")
        _write_document(target, next(iter(docs.values()), ""))
        return [str(target)]
    if not target.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        durable.fsync_dir(target.absolute().parent)  # the new folder's name, durable like the files in it
    files: list[str] = []
    used: set[str] = set()
    for scope, doc in docs.items():
        name = project_label(scope)
        if name in used:
            name += "-" + hashlib.sha256(scope.encode("utf-8")).hexdigest()[:6]
        used.add(name)
        _write_document(target / f"{name}.md", doc)
        files.append(str(target / f"{name}.md"))
    return files


def _write_document(target: Path, text: str) -> None:
    """One Markdown file, replaced atomically; an error names the file, not the temp file beside it."""
    data = text.replace("\n", os.linesep).encode("utf-8")  # the platform's line ends, as in any text file
    try:
        durable.write_atomic(_real(target), data, _kept_mode(target))
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(target)) from None


def _real(target: Path) -> Path:
    """Where a write to `target` lands: through a symbolic link, at the file it points to."""
    return Path(os.path.realpath(target))


def _kept_mode(target: Path) -> int | None:
    """An existing file keeps its mode; a new one gets what `open` gives a new file (the umask's)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return None


# -- import ---------------------------------------------------------------------------------------
class Action:
    """One line of an import plan: add, already (there), or skip (with why)."""

    __slots__ = ("action", "kind", "scope", "text", "origin", "why", "id", "record", "item")

    def __init__(self, action: str, kind: str, scope: str, text: str, origin: str, *, why: str = "",
                 rid: str | None = None, record: dict[str, Any] | None = None, item: native.Item | None = None) -> None:
        self.action, self.kind, self.scope, self.text, self.origin = action, kind, scope, text, origin
        self.why, self.id, self.record, self.item = why, rid, record, item

    def as_dict(self) -> dict[str, Any]:
        out = {"action": self.action, "kind": self.kind, "scope": self.scope, "text": self.text, "from": self.origin}
        if self.id:
            out["id"] = self.id
        if self.why:
            out["why"] = self.why
        if self.item is not None and self.item.section:
            out["section"] = self.item.section
        return out


def _jsonl_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if raw.strip():
                yield n, raw.rstrip(b"\r\n")


def looks_like_jsonl(path: Path) -> bool:
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(1).lstrip()
        return head == b"{"
    except OSError:
        return False


def plan_jsonl(store: Store, path: Path, scope: str | None) -> tuple[list[Action], list[str]]:
    """A retained export: each record keeps its id, kind, scope, supersede link and unknown fields.

    An import only adds. What an imported record says about other records (a `supersedes` or `resolves`
    link, a retraction or an undo) stands only for records this same import brings; about any other record
    of this store it is refused, and the dry run names that record by id. Fields that hold this
    store's own state (`retracted`, `superseded_by`, `forgotten`) are not taken from a file."""
    actions: list[Action] = []
    notes: list[str] = []
    seen: set[str] = set()
    counts: Counter[str] = Counter()
    reserved: Counter[str] = Counter()
    brought: set[str] = set()  # ids this import brings (adds, or finds already brought), in file order
    for n, raw in _jsonl_lines(path):
        rec = _importable(n, raw, counts, notes)
        if rec is None:
            continue
        rid = rec["id"]
        kind = rec.get("kind", "note")
        origin = f"{path}:{n}"
        try:
            given = rec.get("scope")
            target_scope = scope or (records.GLOBAL_SCOPE if given in (None, "") else records.check_scope(given))
        except UsageError as e:
            actions.append(Action("skip", kind, records.GLOBAL_SCOPE, rec["text"], origin, rid=rid,
                                  why=f"its scope {_shown(rec['scope'])} is refused: {e.message}"))
            continue
        if rid in seen:
            actions.append(Action("skip", kind, target_scope, rec["text"], origin, why="id repeated in the file", rid=rid))
            continue
        seen.add(rid)
        existing = store.index.by_id(rid)
        if existing is not None:
            same = existing["text"] == rec["text"] and existing["kind"] == kind
            actions.append(Action("already" if same else "skip", kind, target_scope, rec["text"], origin, rid=rid,
                                  why="" if same else f"id {rid} is taken here by a different record"))
            if same and _came_by_import(store, existing):
                brought.add(rid)  # a record an earlier import brought: a later export's links to it stand
            continue
        for key in records.LIFECYCLE_KEYS:
            if key in rec:
                reserved[key] += 1
                rec = {k: v for k, v in rec.items() if k != key}
        action = _claims(rec, brought)
        if action is not None:
            actions.append(Action("skip", kind, target_scope, rec["text"], origin, rid=rid, why=action))
            continue
        rec, why = _links_to_brought(rec, brought)
        actions.append(Action("add", kind, target_scope, rec["text"], origin, rid=rid, record=rec, why=why))
        brought.add(rid)
    if reserved:
        notes.append(f"field(s) {', '.join(sorted(reserved))} of imported lines left out: they are this store's "
                     "state (what later records say), never taken from a file")
    if counts["tombstones"]:
        notes.append(f"{counts['tombstones']} purged record(s) (tombstones) have no content to bring back")
    if counts["purge_records"]:
        notes.append(f"{counts['purge_records']} purge record(s) left out: they describe the other store's bytes")
    if counts["unreadable"]:
        notes.append(f"{counts['unreadable']} line(s) are not records; skipped")
    return actions, notes


def _links_to_brought(rec: dict[str, Any], brought: set[str]) -> tuple[dict[str, Any], str]:
    """`rec` with its `supersedes` and `resolves` links kept only where they name records this import
    brings, and why any went: a link to a record of this store would replace (supersede, or resolve a
    fork of) it by a field of a file."""
    gone: list[str] = []
    if "supersedes" in rec and not (isinstance(rec["supersedes"], str) and rec["supersedes"] in brought):
        gone.append(f"supersedes {_shown(rec['supersedes'])}")
        rec = {k: v for k, v in rec.items() if k != "supersedes"}
    if "resolves" in rec:
        given = rec["resolves"] if isinstance(rec["resolves"], list) else [rec["resolves"]]
        keep = [r for r in given if isinstance(r, str) and r in brought]
        if len(keep) != len(given):
            gone.append(f"resolves {_shown([r for r in given if r not in keep])}")
        rec = {k: v for k, v in rec.items() if k != "resolves"}
        if keep:
            rec["resolves"] = keep
    if not gone:
        return rec, ""
    return rec, (f"{' and '.join(gone)}, which this import does not bring: added without that link "
                 "(an import never replaces a record of this store)")


def _shown(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _came_by_import(store: Store, row: Mapping[str, Any]) -> bool:
    """Whether this store's record (an index row) was itself brought by an import of an export."""
    try:
        rec = reads.read_row(store.index, store.log, dict(row))
    except (OSError, KeyError, TypeError, records.BadLine):
        return False
    return isinstance(rec.get("imported"), dict)


def _claims(rec: dict[str, Any], brought: set[str]) -> str | None:
    """Why a forget record of an import is refused (it retracts or undoes records the import does
    not bring, named by id), or None."""
    if rec.get("kind") != LIFECYCLE_KIND:
        return None
    targets = rec.get("targets")
    targets = [t for t in targets if isinstance(t, str)] if isinstance(targets, list) else []
    others = [t for t in targets if t not in brought]
    if not others:
        return None
    verb = {"retract": "retracts", "undo": "undoes the retraction of"}.get(str(rec.get("action")), "names")
    return (f"refused: it {verb} {', '.join(others[:5])}{' ...' if len(others) > 5 else ''}, not brought by this "
            "import (an import only adds; retract here with `retained forget`)")


def _importable(n: int, raw: bytes, counts: Counter[str], notes: list[str]) -> dict[str, Any] | None:
    """Line `n` of an export as a record to import, or None: not a record, a tombstone or a purge
    record (counted), damaged or invalid (a note naming the line)."""
    try:
        rec = safejson.loads(raw, max_bytes=records.MAX_LINE_BYTES)
    except safejson.JSONError:
        counts["unreadable"] += 1
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) or not rec["id"].strip():
        counts["unreadable"] += 1
        return None
    if "text" not in rec:
        counts["tombstones"] += 1  # what a purge left; nothing to bring back
        return None
    if rec.get("kind") == LIFECYCLE_KIND and rec.get("action") == "purge":
        counts["purge_records"] += 1
        return None
    if "sha256" in rec and "seq" in rec and "prev" in rec:
        try:
            records.parse_line(raw)
        except records.BadLine as bad:
            notes.append(f"line {n}: not an intact record ({bad.reason}); skipped")
            counts["damaged"] += 1
            return None
    try:
        records.check_text(rec["text"])
        _check_encodable(rec)
        if "ts" in rec and not (isinstance(rec["ts"], str) and _TS.match(rec["ts"])):
            raise UsageError("its ts is not a timestamp (RFC 3339, e.g. 2026-01-31T12:00:00Z)", hint="")
        records.check_kind(rec.get("kind", "note"))
        writes.check_kind_is_no_secret(rec.get("kind", "note"))
        _check_id(rec["id"])
    except UsageError as e:
        notes.append(f"line {n}: {e.message}; skipped")
        return None
    return rec


_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})\Z")


def _check_encodable(rec: dict[str, Any]) -> None:
    """A line of lone surrogate escapes (`\\ud800`) parses, but could never be written back as UTF-8."""
    if records.has_lone_surrogate(rec):
        raise UsageError("it holds a lone surrogate (\\ud800...), which is not valid Unicode", hint="")


def _check_id(rid: str) -> None:
    """An imported id is kept as it is, so it must not carry a credential (nor a control character)."""
    if len(rid) > 128 or any(ord(c) < 32 or ord(c) == 127 for c in rid):
        raise UsageError("its id is not a record id (over 128 characters or a control character)", hint="")
    if redaction_enabled():
        found = redact.label_secrets(rid)
        if found:
            raise UsageError(f"its id looks like a credential ({', '.join(sorted(found))})", hint="")


def plan_items(store: Store, items: list[native.Item], scope: str | None, *,
               include_superseded: bool = False) -> list[Action]:
    """Each item as an add, or as already there: the same text or a close match of a current record of
    its scope (said, with the record's id), or of a record a later one corrected, which an import does
    not bring back as current unless `include_superseded`."""
    actions: list[Action] = []
    keys: set[str] = set()
    for item in items:
        target = scope or item.scope or records.GLOBAL_SCOPE
        key = native.import_key(target, item.text)
        origin = f"{item.origin}:{item.line}" if item.line else str(item.origin)
        if key in keys:
            actions.append(Action("already", item.kind, target, item.text, origin, why="repeated in this source", item=item))
            continue
        keys.add(key)
        prior = store.index.by_op(key) or store.index.same_text(target, item.text)
        if prior is not None:
            actions.append(Action("already", item.kind, target, item.text, origin, rid=prior["id"], item=item))
            continue
        known, ratio = _known(store, target, item.text)
        if known is None:
            actions.append(Action("add", item.kind, target, item.text, origin, item=item))
        elif not known.get("superseded_by"):
            actions.append(Action("already", item.kind, target, item.text, origin, rid=known["id"], item=item,
                                  why=f"closely matches current record {known['id']} ({ratio:.2f} alike); not added"))
        elif include_superseded:
            actions.append(Action("add", item.kind, target, item.text, origin, item=item,
                                  why=f"{'the text' if ratio == 1 else 'close to the text'} of {known['id']}, which "
                                      f"{known['superseded_by']} corrected: added as current (--include-superseded)"))
        else:
            actions.append(Action("skip", item.kind, target, item.text, origin, rid=known["id"], item=item,
                                  why=f"{'the text' if ratio == 1 else 'close to the text'} of {known['id']}, which "
                                      f"{known['superseded_by']} corrected: not brought back as current "
                                      "(--include-superseded imports it anyway)"))
    return actions


def _known(store: Store, scope: str, text: str) -> tuple[dict[str, Any] | None, float]:
    """The record of the scope, current or corrected, whose text is this one or most closely matches it
    (records.NEAR_RATIO; a current one on a tie), and how alike; (None, 0) when none is."""
    words = sorted(set(query_terms(text)), key=lambda w: (-len(w), w))[:8]
    match = quote_query(words[:4], prefix=False) if len(words) >= 3 else None
    mine = records.Near(records.near_form(text))
    found = []
    for row in store.index.known_texts(match, scope, text, 40):
        ratio = 1.0 if row["text"] == text else mine.closeness(records.near_form(row["text"]))
        if ratio is not None:
            found.append((row, ratio))
    if not found:
        return None, 0.0
    return max(found, key=lambda f: (f[1], not f[0].get("superseded_by")))  # the closest; current on a tie


def plan(store: Store, *, path: str | None, source: str | None, scope: str | None, memories: native.HostMemories,
         env: Mapping[str, str] | None = None, include_superseded: bool = False) -> dict[str, Any]:
    """What an import would do, without writing anything. `memories`: the hosts' own memories (the
    host registry's answer, passed in by the caller)."""
    env = os.environ if env is None else env
    sources = memories.sources()
    if (path is None) == (source is None):
        raise UsageError("name one thing to import: a PATH or --from SOURCE",
                         hint=f"e.g. `retained import export.jsonl` or `retained import --from {sources[0]}`")
    if scope is not None:
        scope = records.check_scope(scope)
    store.refresh()
    notes: list[str] = []
    if source is not None:
        if source not in sources:
            raise UsageError(f"unknown source {source!r}", hint=f"use one of: {', '.join(sources)}, or give a PATH")
        known = store.index.scope_names()
        items, notes = memories.source_items(source, env, known)
        actions = plan_items(store, items, scope, include_superseded=include_superseded)
        label = source
    else:
        assert path is not None  # a PATH or a SOURCE: checked above
        p = Path(path).expanduser()
        if not p.exists():
            raise NotFound(f"{p} does not exist", hint="give the path of an export, an instruction file or a memory folder")
        if p.is_file() and looks_like_jsonl(p):
            actions, notes = plan_jsonl(store, p, scope)
        else:
            actions = plan_items(store, memories.path_items(p, scope, env, notes), scope,
                                 include_superseded=include_superseded)
            if not actions and not notes:
                notes.append(f"nothing in {p} reads as memory (no bullet or section with text)")
        label = str(p)
    tally = Counter(a.action for a in actions)
    return {"source": label, "dry_run": True, "would_add": tally["add"], "already": tally["already"],
            "skipped": tally["skip"], "actions": actions, "notes": notes}


def apply(store: Store, result: dict[str, Any]) -> dict[str, Any]:
    """Write the plan's additions: kept-id records re-appended and proven, others as ordinary writes."""
    store.check_writable()
    receipts: list[dict[str, Any]] = []
    found: Counter[str] = Counter()
    kept = [a for a in result["actions"] if a.action == "add" and a.record is not None]
    notes = list(result["notes"])
    if kept:
        receipts += _append_kept(store, kept, result["source"], found, notes)
    for a in result["actions"]:
        if a.action != "add" or a.item is None:
            continue
        item = a.item
        r = store.write(item.text, kind=item.kind, scope=a.scope, source=str(item.origin),
                        client_op_id=native.import_key(a.scope, item.text), fields={"imported": item.provenance()})
        a.id = r["id"]
        receipts.append(r)
    out = dict(result)
    out["dry_run"] = False
    out["added"] = sum(1 for r in receipts if not r.get("deduplicated") and r.get("durable"))
    out["deduplicated"] = sum(1 for r in receipts if r.get("deduplicated"))
    out["not_durable"] = sum(1 for r in receipts if not r.get("durable"))
    out["receipts"] = receipts
    if found:
        notes.append(redact.describe(found))
    out["notes"] = notes
    return out


def _append_kept(store: Store, actions: list[Action], source: str, found: Counter[str],
                 notes: list[str]) -> list[dict[str, Any]]:
    """Append records keeping their ids, in file order (so a supersede follows what it supersedes),
    each one sealed onto this chain and proven: written, fsynced, read back, linked."""
    receipts = []
    now = records.now_rfc3339()
    with store.appending() as app:
        notes += app.warnings + app.index_notes  # a torn tail moved aside, an index repaired: said once
        for a in actions:
            receipt = app.append_record(_kept_record(a, source, now, found))
            receipts.append(receipt)
            if not receipt["checks"]["append"]:
                break
    return receipts


def _kept_record(a: Action, source: str, now: str, found: Counter[str]) -> dict[str, Any]:
    """The record of an export as this store appends it: its id, kind, scope, links and unknown fields
    kept, `imported` saying where it came from, everything else redacted (seq and prev are set on append)."""
    src = a.record
    assert src is not None
    rec = {k: v for k, v in src.items() if k not in ("seq", "prev", "sha256")}
    provenance: dict[str, Any] = {"from": source, "at": now}
    for key in ("seq", "sha256"):
        if key in src:
            provenance[key] = src[key]
    if isinstance(src.get("imported"), dict):
        provenance["prior"] = src["imported"] if not redaction_enabled() else _redact_value(src["imported"], found)
    op = rec.pop("client_op_id", None)
    if isinstance(op, str):
        # An idempotency key names a write of the other store: kept as provenance, never as a key here,
        # where it would answer a later write of this store that happens to use it ("already written").
        provenance["client_op_id"] = op
    rec["imported"] = provenance
    rec.setdefault("kind", "note")
    rec.setdefault("ts", now)
    kept = ("id", "ts", "kind", "scope", "supersedes", "resolves", "imported")
    extra = {k: v for k, v in rec.items() if k not in kept}
    if redaction_enabled():
        # The fields' names too, the scope and the idempotency key: the write path's parts, redacted alike.
        scope, op, cleaned = redact.redact_record_parts(found, scope=a.scope, client_op_id=op if isinstance(op, str) else None,
                                                        fields=extra)
        extra = cleaned or {}
        a.scope = scope if scope is not None else a.scope
        if op is not None:
            provenance["client_op_id"] = op
    out = {k: v for k, v in rec.items() if k in kept}
    out.update(extra)
    out["scope"] = a.scope
    return out


def _redact_value(value: Any, found: Counter[str]) -> Any:
    return redact.redact_value(value, found, keys=True)
