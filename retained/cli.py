"""`retained` command line: parses arguments in one place, calls one function per command, prints.

Only this module (and the hook's entry, retained/entry.py) prints. A command's own room (install,
doctor, serve, ui, export and import) is imported by that command: each costs every other command
20-110 ms of imports (measured with `python -X importtime`); the rest is imported here, at the top.
Errors are one line with a hint, never a traceback (with --json, also {"error", "hint"} on stdout):
exit 0 ok, 1 not intact / not found / failed, 2 usage, 3 a bug, 130 interrupted (README, "Exit codes").
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, cast

from . import __version__, maintain, safejson, warm
from .brief import NO_PROJECT, make_brief, render
from .errors import NotFound, RetainedError, UsageError
from .hook import EVENTS
from .hook import command as run_hook
from .installers.hosts import NativeMemories, loaded_for, memory_sources, names, project_vars
from .log import LOG_NAME
from .paths import has_team, store_dir
from .project import default_write_scope, project_identity, project_scope, write_scope
from .records import MAX_FIELDS_BYTES
from .replies import shown, who  # a stored field as data on a terminal: controls escaped, fences neutralised
from .results import (
    ForgetReceipt,
    GetResult,
    Hit,
    ListResult,
    PurgeReceipt,
    SearchHit,
    SearchResult,
    VerifyResult,
    WriteReceipt,
)
from .store import Store, no_store_at
from .switches import embed_mode
from .team_cli import add_commands as team_commands

_AddCommand = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def _print_json(data: Any) -> None:
    _out(safejson.dumps(data, ensure_ascii=False, indent=2))  # strict: never a bare NaN


def _progress(label: str, *, rate: bool = False) -> Callable[[int, int], None] | None:
    """A percentage on a terminal's stderr (None elsewhere); with `rate`, the count and records/s too."""
    if not sys.stderr.isatty():
        return None

    started = time.monotonic()

    def report(done: int, total: int) -> None:
        pct = 100 if total <= 0 else min(100, done * 100 // total)
        took = time.monotonic() - started
        speed = f", {done / took:.0f} records/s" if took > 0 else ""
        sys.stderr.write(f"\r{label}: {pct:3d}%" + (f" ({done} of {total}{speed})" if rate else ""))
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return report


def _store(args: argparse.Namespace, *, create: bool = False):
    """The store of --dir (or RETAINED_DIR, or the default). Only a write creates a missing one: a read
    on a mistyped --dir names the store it did not find, and leaves no empty store behind."""
    directory = store_dir(args.dir)
    if not create and not os.path.lexists(directory):
        return _missing_store(directory)
    return Store(directory, create=create)


@contextmanager
def _missing_store(directory: Path) -> Iterator[Store]:
    """A read on a store that is not there: the command runs against an empty store thrown away after
    (so a bad argument is still a usage error, exit 2), then names the missing store (exit 1)."""
    # (a record missing from a store that is not there is the store missing: NotFound is not said)
    with tempfile.TemporaryDirectory() as empty, Store(empty) as store, suppress(NotFound):
        yield store
    raise no_store_at(directory)


def _project() -> str | None:
    return project_scope(project_vars=project_vars())


def _parse_fields(pairs: list[str] | None) -> dict[str, Any] | None:
    if not pairs:
        return None
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--field {pair!r} is not KEY=JSON", hint="e.g. --field ticket='\"ABC-12\"' --field pr=42")

        try:
            # Bounded like every reader of outside JSON: one value 5,000 deep is a usage error, not a crash.
            fields[key] = safejson.loads(raw, max_bytes=MAX_FIELDS_BYTES)
        except safejson.JSONError as e:
            shown = raw if len(raw) <= 60 else raw[:57] + "..."
            if e.msg.startswith(("nested deeper", "larger than")):
                raise UsageError(f"--field {key}: the value is {e.msg}", hint="store a flatter, smaller value") from None
            raise UsageError(f"--field {key}: {shown!r} is not JSON",
                             hint=f"quote strings as JSON: --field {key}='\"{shown}\"'") from None
    return fields


def _warn_all(result: Mapping[str, Any] | list[str]) -> None:
    for w in result if isinstance(result, list) else result.get("warnings", []):
        _err(f"warning: {w}")


def _oneline(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return shown(flat if len(flat) <= width else flat[: width - 1] + "…")


def _show_hits(hits: Sequence[Hit]) -> None:
    for h in hits:
        meta = [shown(h["kind"]), shown(h["scope"]), h["ts"][:19].replace("T", " ")]
        author = who(cast("dict[str, Any]", h))
        if author:
            meta.append(f"by {shown(author)}")
        if "score" in h:
            meta.append(f"score {h['score']:.3f}")
        if "match" in h:  # a search hit
            meta.append(f"by {cast('SearchHit', h)['match']}")
        if h.get("superseded_by"):
            meta.append(f"superseded by {shown(h['superseded_by'])}")
        _out(f"{shown(h['id'])}  seq {h['seq']}  " + "  ".join(meta))
        _out(f"    {_oneline(h['text'])}")


# -- commands -------------------------------------------------------------------------------------
def cmd_write(args: argparse.Namespace) -> int:
    text = args.text
    if text == "-":  # the text from stdin: for long or multi-line records (argv holds 128 KiB at most)
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UsageError(f"stdin is not UTF-8 text (byte {e.start})", hint="convert it to UTF-8") from None
    with _store(args, create=True) as store:
        result = store.write(text, kind=args.kind, scope=write_scope(args.scope, _project(), store.known_scopes),
                             default_scope=default_write_scope(_project()),
                             source=args.source, supersedes=(args.supersedes or [None])[0],
                             client_op_id=args.client_op_id, fields=_sharing_fields(args, _parse_fields(args.field)),
                             resolves=(args.supersedes or [])[1:] or None)
    return _report_write(args, cast("WriteReceipt", result))


def _sharing_fields(args: argparse.Namespace, fields: dict[str, Any] | None) -> dict[str, Any] | None:
    """--private / --shared as the record's fields (issue 19: what team memory may share)."""
    private, shared = getattr(args, "private", False), getattr(args, "shared", False)
    if private and shared:
        raise UsageError("--private and --shared contradict each other", hint="pick one")
    if not (private or shared):
        return fields
    return {**(fields or {}), ("private" if private else "shared"): True}


def _report_write(args: argparse.Namespace, result: WriteReceipt) -> int:
    if args.json:
        _print_json(result)
    else:
        checks = " ".join(f"{k} {'✓' if v else '✗'}" for k, v in result["checks"].items())
        verb = ("already written" if result["deduplicated"] else
                "wrote" if result["checks"]["append"] else "could not write")
        _out(f"{verb} {result['id']} (seq {result['seq']}) durable={str(result['durable']).lower()}: {checks}")
        _warn_all(result)
    return EXIT_OK if result["durable"] else EXIT_FAIL


def cmd_checkpoint(args: argparse.Namespace) -> int:
    with _store(args, create=True) as store:
        result = store.checkpoint(args.label, args.summary, scope=write_scope(args.scope, _project(), store.known_scopes),
                                  default_scope=default_write_scope(_project()))
    return _report_write(args, cast("WriteReceipt", result))


def cmd_search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise UsageError("the query is empty", hint="give the words or the question to look for")
    with _store(args) as store:
        scopes, notes = store.read_scopes(args.scope, _project())
        kw = {"scopes": scopes, "kind": args.kind, "k": args.k,
              "max_tokens": args.max_tokens, "include_superseded": args.include_superseded, "as_of": args.as_of}
        result = cast("SearchResult", _search_fast(store, args.query, kw, words_only=args.words))
        result["warnings"] = notes + result["warnings"]
    if args.json:
        _print_json(result)
    else:
        at_least = "" if result.get("total_exact", True) else "at least "
        more = (f", {at_least}{result['total_matched'] - result['returned']} not shown"
                if result["truncated"] and result["total_matched"] > result["returned"] else "")
        when = f" as of {args.as_of}" if args.as_of else ""
        _out(f"{result['returned']} of {at_least}{result['total_matched']} matching records{more}{when}")
        if result.get("match") == "any" and result["hits"]:
            _out("no record holds every word; showing records that hold any of them"
                 + (" or are close in meaning" if result.get("semantic") == "on" else ""))
        if str(result.get("semantic", "on")).startswith("off"):
            _out(f"words only (semantic {result['semantic']})")
        _show_hits(result["hits"])
        _warn_all([w for w in result["warnings"] if not w.startswith("no record holds every word")])
    return EXIT_OK if result["hits"] else EXIT_FAIL


CLI_INLINE_EMBED = 64  # new records a terminal search embeds itself (~0.2 s at most)


def _search_fast(store: Store, query: str, kw: dict[str, Any], words_only: bool) -> dict[str, Any]:
    """A running `retained serve` of the store searches with its loaded model; without one, this process
    loads the model (a few hundred ms) unless the caller asked for the instant answer by words only."""
    if embed_mode() == "off":
        return store.search(query, **kw)

    served = warm.search(store.directory, query, **kw)
    if served is not None:
        return served[0]
    if not words_only:
        store.semantic().quick_start()  # one search and out: the model loaded the way that answers soonest
        # A few new records are embedded here; a store never embedded is searched by words, saying so
        # (a background thread would die with this process).
        return store.search_scored(query, inline_embed=CLI_INLINE_EMBED, need_vectors=True, **kw)[0]
    store.semantic().defer("words only (--words)")
    result = store.search(query, **kw)
    result["warnings"].append("meaning was not used (--words); leave --words out to search by meaning too")
    return result


def cmd_get(args: argparse.Namespace) -> int:
    with _store(args) as store:
        result = cast("GetResult", store.get(args.ids))
    if args.json:
        _print_json(result)
    else:
        for rec in result["records"]:
            _out(shown(safejson.dumps(rec, ensure_ascii=False, sort_keys=True)))
        for rid in result["missing"]:
            _err(f"missing: {shown(rid)}")
        for rid in result.get("damaged", []):
            _err(f"damaged: {shown(rid)} (its line in the log no longer reads; run `retained verify`)")
        if not result["chain_ok"]:
            _err(f"warning: the log has {result['corrupt_lines']} corrupt line(s) or breaks; run `retained verify`")
        _warn_all(result)
    return EXIT_FAIL if result["missing"] or result.get("damaged") else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    if args.before_seq is not None:
        raise UsageError("--before-seq is gone: list pages follow the team order, the same on every clone",
                         hint="pass --cursor C, with the cursor the previous page printed after `more:`")
    with _store(args) as store:
        scopes, notes = store.read_scopes(args.scope, _project())
        result = cast("ListResult", store.list(
            scopes=scopes, kind=args.kind, limit=args.limit, cursor=args.cursor,
            include_superseded=args.include_superseded, as_of=args.as_of))
        result["warnings"] = notes + result["warnings"]
    if args.json:
        _print_json(result)
    else:
        when = f" as of {args.as_of}" if args.as_of else ""
        _out(f"{result['returned']} of {result['total']} records{when}, newest first")
        _show_hits(result["records"])
        if result.get("next_cursor"):
            _out(f"more: retained list --cursor {result['next_cursor']} (with the same other options)")
        _warn_all(result)
    return EXIT_OK


def _a_person_can_answer() -> bool:
    """Whether a question can be put to a person: stdin and stderr (where it is asked) are terminals."""
    try:
        return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def cmd_forget(args: argparse.Namespace) -> int:
    """Retract (default), bring back (--undo) or purge (--purge: the bytes go, for good)."""
    if args.undo and args.purge:
        raise UsageError("--undo and --purge exclude each other", hint="a purge cannot be undone")
    if args.purge and not args.yes and not _a_person_can_answer():
        # No terminal to confirm on: how an agent's shell tool runs commands. A purge is a person's call.
        raise UsageError("a purge needs a person to confirm it, and there is no terminal to ask on; nothing was purged",
                         hint="a person runs `retained forget --purge ID` in a terminal and answers y, "
                              "or adds --yes after reading what the ids hold (`retained get ID`)")
    if args.purge and not args.yes:
        sys.stderr.write(f"purge {len(args.ids)} record(s) for good? Their text leaves every file of the store "
                         "and cannot be brought back. [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            _err("nothing was purged")
            return EXIT_FAIL
    result: ForgetReceipt | PurgeReceipt
    with _store(args) as store:
        if args.purge:
            purged = cast("PurgeReceipt", store.purge(args.ids, args.reason))
            result, done = purged, [p["id"] for p in purged["purged"]]
        else:
            undone = store.unforget(args.ids, args.reason) if args.undo else store.forget(args.ids, args.reason)
            retracted = cast("ForgetReceipt", undone)
            result, done = retracted, retracted["targets"]
    if args.json:
        _print_json(result)
    else:
        verb = {"purge": "purged", "undo": "brought back", "retract": "retracted"}[result["action"]]
        if result["deduplicated"]:
            _out(f"already retracted by {result['id']} (seq {result['seq']}); nothing new was written")
        else:
            _out(f"{verb} {', '.join(done)} by {result['id']} (seq {result['seq']}) "
                 f"durable={str(result['durable']).lower()}")
        if result["action"] == "retract" and not result["deduplicated"]:
            _out(f"undo with: retained forget --undo {' '.join(done)}")
        _warn_all(result)
    return EXIT_OK if result["durable"] else EXIT_FAIL


def cmd_scopes(args: argparse.Namespace) -> int:
    """Every scope with its record counts and project key; the current project is marked."""
    ident = project_identity(project_vars=project_vars())
    with Store(store_dir(args.dir), create=False, read_only=True) as store:
        table = store.scopes(_project())
    result = {"current_project": ident, "scopes": table["scopes"], "warnings": table["warnings"]}
    if args.json:
        _print_json(result)
        return EXIT_OK
    if ident:
        _out(f"current project: {ident['name']} ({ident['key']}) at {ident['root']}")
    for r in result["scopes"]:
        mark = "*" if r["current_project"] else " "
        key = f"  [{r['key']}]" if r["key"] and r["key"] != r["scope"] else ""
        _out(f"{mark} {r['scope']}: {r['current']} current, {r['records']} in all{key}")
    _warn_all(result)
    return EXIT_OK


def cmd_maintain(args: argparse.Namespace) -> int:
    """Report what could be tidied (writes nothing); --apply retracts exact duplicates, keeping the oldest."""
    with Store(store_dir(args.dir), create=False, read_only=not args.apply) as store:
        result: dict[str, Any] = maintain.apply(store) if args.apply else {"report": maintain.report(store), "applied": []}
    if args.json:
        _print_json(result)
        return EXIT_OK
    rep = result["report"]
    t = rep["totals"]
    _out(f"{t['current']} current records; {t['superseded']} superseded, {t['retracted']} retracted, "
         f"{t['purged']} purged; {t['exact_duplicates']} exact-duplicate group(s), {t['near_duplicates']} near-duplicate "
         f"pair(s), {t['collapsible_chains']} chain(s) of 3+ versions, {t['old']} record(s) older than {rep['old_days']} days")
    for e in rep["scopes"]:
        _out(f"{e['scope']}: {e['current']} current, {e['superseded']} superseded, {e['retracted']} retracted")
        for g in e["exact_duplicates"]:
            _out(f"    exact duplicates of {g['keep']} ({g['kind']}): {', '.join(g['duplicates'])}")
        for p in e["near_duplicates"][:maintain.LISTED]:
            _out(f"    near duplicates ({p['similarity']:.2f}): {' '.join(p['ids'])} (supersede one with the other?)")
        for c in e["collapsible_chains"][:maintain.LISTED]:
            _out(f"    chain of {c['records']} versions ending in {c['head']}")
        unlisted = [f"{n} {what}" for n, what in ((len(e["near_duplicates"]) - maintain.LISTED, "near-duplicate pair(s)"),
                                                  (len(e["collapsible_chains"]) - maintain.LISTED, "chain(s)")) if n > 0]
        if unlisted:
            _out(f"    {' and '.join(unlisted)} more not listed here (--json lists them all)")
        if e.get("near_compared", e["current"]) < e["current"]:
            _out(f"    near duplicates were looked for among the newest {e['near_compared']} of its {e['current']} "
                 "current records only")
        if e["old"]:
            _out(f"    {e['old']} current record(s) older than {rep['old_days']} days")
    for f in cast("dict[str, Any]", rep).get("forks", []):  # issue 19
        _out(f"open fork: {f['target']} has {len(f['versions'])} current versions ({', '.join(f['versions'])}); "
             f"resolve with `retained write TEXT {' '.join('--supersedes ' + v for v in f['versions'])}`")
    if args.apply:
        n = sum(len(d["retracted"]) for d in result["applied"])
        _out(f"applied: retracted {n} exact duplicate(s), keeping the oldest of each "
             "(undo with `retained forget --undo ID`); nothing else was changed")
    elif t["exact_duplicates"]:
        _out("dry run: nothing was written; `retained maintain --apply` retracts the exact duplicates (keeping the "
             "oldest); the rest is for you to judge")
    else:
        _out("dry run: nothing was written")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    with _store(args) as store:
        result = cast("VerifyResult", store.verify(progress=_progress("verify")))
    if args.json:
        _print_json(result)
    else:
        state = "intact" if result["intact"] else "NOT INTACT"
        _out(f"{state}: {result['records']} records, chain {'ok' if result['chain_ok'] else 'broken'}, "
             f"index coverage {result['coverage'] * 100:.1f}%")
        if result["first_break"]:
            fb = result["first_break"]
            _out(f"first break: seq {fb['seq']} at line {fb['line']}: {fb['reason']}")
        for p in result["corrupt_lines"]:
            _out(f"corrupt line {p['line']} (seq {p['seq']}): {p['reason']}")
        for p in result["chain_breaks"]:
            _out(f"chain break at line {p['line']} (seq {p['seq']}): {p['reason']}")
        if result["torn_tail"]:
            _out(f"torn tail: {result['torn_tail']['bytes']} bytes after the last complete line "
                 "(a write cut short; the next write moves it to quarantine/)")
        q = result.get("quarantine") or {}
        if q.get("files"):
            whole = f", {len(q['records'])} of them whole records the log lacks" if q["records"] else ""
            _out(f"quarantine/: {q['files']} file(s), {q['bytes']} bytes{whole}")
        if result["missing_from_index"] or result["index_only"]:
            _out(f"index: {result['missing_from_index']} record(s) missing, {result['index_only']} row(s) not in the log "
                 "(hint: `retained reindex`)")
        for t in result.get("team_logs") or []:
            if not t["intact"]:
                _out(f"teammate log {t['writer']}: {t['missing_from_index']} record(s) missing from the index, "
                     f"{t['index_only']} index entr(ies) pointing at the wrong bytes (hint: `retained reindex`)")
        _warn_all(result)
    return EXIT_OK if result["intact"] else EXIT_FAIL


def cmd_reindex(args: argparse.Namespace) -> int:
    with _store(args) as store:
        # rebuilds the index, then its vectors (kept ones are reused; new texts go to the model)
        result = store.reindex(progress=_progress("reindex"), embed_progress=_progress("vectors", rate=True))
    if args.json:
        _print_json(result)
    else:
        _out(f"reindexed {result['records']} records from {result['lines_read']} lines"
             + (f"; {result['corrupt_lines']} corrupt line(s) skipped" if result["corrupt_lines"] else ""))
        if result.get("semantic") == "on":
            reused = result.get("vectors_reused", 0)
            kept = f" ({reused} took the vector kept for their text, {result.get('model_embedded', 0)} went to the model)"
            _out(f"embedded {result['embedded']} records in {result['embed_seconds']:.1f} s" + (kept if reused else ""))
        elif result.get("semantic"):
            _out(f"no vectors: semantic {result['semantic']}; search uses words only")
    return EXIT_OK


def cmd_brief(args: argparse.Namespace) -> int:
    project = _project()
    directory = store_dir(args.dir)
    if not os.path.lexists(directory):  # a read names the store it did not find, and creates none
        raise no_store_at(directory)
    try:
        empty = not (directory / LOG_NAME).exists() and not has_team(directory)
    except OSError:  # e.g. someone else's store: the Store names the problem
        empty = False
    if empty:
        result = render([], 0, project=project, budget=args.budget,
                        scope_label=args.scope or (None if project else NO_PROJECT))
    elif args.as_of:
        with Store(directory, create=False) as store:
            result = _brief_as_of(store, project, args)
    else:
        with Store(directory, create=False) as store:
            scopes, notes = store.read_scopes(args.scope, project)
            scope = args.scope if scopes is None or args.scope is None else scopes[0]
            result = make_brief(store, project, budget=args.budget, scope=scope,
                                loaded_at_start=loaded_for(os.environ))
            result["warnings"] = notes
    if args.json:
        _print_json(result)
    else:
        _out(result["text"])
        _warn_all(result.get("warnings", []))
    return EXIT_OK


def _brief_as_of(store: Store, project: str | None, args: argparse.Namespace) -> dict[str, Any]:
    """The brief as it would have read at --as-of: the records current then, checkpoints first."""
    scopes, notes = store.read_scopes(args.scope, project)
    rows_needed = max(args.budget // 8, 1) + 1
    checkpoints = store.list(scopes=scopes, kind="checkpoint", limit=min(rows_needed, 500), as_of=args.as_of)
    every = store.list(scopes=scopes, limit=min(rows_needed * 2, 500), as_of=args.as_of)
    rows = checkpoints["records"] + [r for r in every["records"] if r["kind"] != "checkpoint"]
    named = scopes[0] if args.scope is not None and scopes else None
    label = (named or ("all scopes" if args.scope is not None else project or "global")) + f" as of {args.as_of}"
    result = render(rows[:rows_needed], every["total"], project=project, budget=args.budget, scope_label=label)
    result["warnings"] = notes
    return result


def cmd_hook(args: argparse.Namespace) -> int:
    return run_hook(args.event, args.host, args.dir, args.budget)


def cmd_install(args: argparse.Namespace, uninstalling: bool = False) -> int:
    from .installers.commands import INSTALL_FLAGS, install  # ~20 ms of imports no other command needs

    hooks = not getattr(args, "no_hooks", False)
    flags = {name: not getattr(args, f"no_{name}", False) for name in INSTALL_FLAGS}
    flags["hooks"] = hooks
    flags["stop"] = hooks and not getattr(args, "no_stop_hook", False)
    flags["prompt"] = hooks and not getattr(args, "no_prompt_hook", False)
    flags["compact"] = hooks
    if not args.json:
        return install(host_names=args.host, scope=args.scope, dry_run=args.dry_run, flags=flags, yes=args.yes,
                       store=store_dir(args.dir).absolute(), out=_out, err=_err, uninstalling=uninstalling)
    # --json: one JSON document on stdout (what each host and file came to); the plan's text goes in
    # it as "messages", and the notes and refusals meant for a person still go to stderr
    lines: list[str] = []
    report: dict[str, Any] = {"json": True}
    install(host_names=args.host, scope=args.scope, dry_run=args.dry_run, flags=flags, yes=args.yes,
            store=store_dir(args.dir).absolute(), out=lines.append, err=_err, uninstalling=uninstalling, report=report)
    del report["json"]
    report["messages"] = lines
    _print_json(report)
    return int(report["exit_code"])


def cmd_uninstall(args: argparse.Namespace) -> int:
    return cmd_install(args, uninstalling=True)


def cmd_doctor(args: argparse.Namespace) -> int:
    from .installers.doctor import doctor  # ~80 ms of imports no other command needs

    return doctor(host_names=args.host, store=store_dir(args.dir).absolute(), as_json=args.json, out=_out,
                  scope=args.scope)


def cmd_serve(args: argparse.Namespace) -> int:
    from .transport import command  # ~70 ms of imports no other command needs

    return command(args.dir)


# -- export, import, the web page (retained/transfer.py, retained/ui.py) -----------------------------
def cmd_export(args: argparse.Namespace) -> int:
    from .transfer import export  # ~30 ms of imports no other command needs

    directory = store_dir(args.dir)
    if not os.path.lexists(directory):  # before any -o file is written: an export of nothing is no export
        raise no_store_at(directory)
    with _store(args) as store:
        scopes = store.read_scopes(args.scope, _project())[0] if args.scope is not None else None
        result = export(store, scopes=scopes, fmt=args.format, include_history=args.include_history, path=args.output)
    to_stdout = result["path"] == "-"
    if args.json and not to_stdout:
        _print_json(result)
    else:
        say = _err if to_stdout else _out
        if args.json:
            say(safejson.dumps(result, ensure_ascii=False))
        elif result["format"] == "jsonl":
            left = result["left_out"]
            extra = "".join([f", {result['tombstones']} tombstone(s)" if result["tombstones"] else "",
                             f", {result['retracted']} retracted" if result["retracted"] else "",
                             f"; left out {left['retracted']} retracted (--include-history keeps them)"
                             if left["retracted"] else ""])
            say(f"exported {result['records']} records{extra} to {'stdout' if to_stdout else result['path']}")
        else:
            where = "stdout" if to_stdout else ", ".join(result["files"]) or result["path"]
            say(f"exported {result['projects']} project(s) as Markdown to {where}")
        for w in result.get("warnings", []):
            _err(f"warning: {w}")
    return EXIT_OK


def cmd_ui(args: argparse.Namespace) -> int:
    from .ui import serve  # ~110 ms of imports (http.server and more) no other command needs

    return serve(store_dir(args.dir), open_browser=not args.no_open, port=args.port, project=_project())


def cmd_import(args: argparse.Namespace) -> int:
    from .transfer import apply, plan  # ~30 ms of imports no other command needs

    directory = store_dir(args.dir)

    def planned(store: Store) -> dict[str, Any]:  # --scope resolved as a write's is (a short name too)
        scope = write_scope(args.scope, _project(), store.known_scopes)
        return plan(store, path=args.path, source=getattr(args, "from_source", None), scope=scope,
                    memories=NativeMemories(), include_superseded=getattr(args, "include_superseded", False))

    if args.apply:
        with Store(directory) as store:
            result = apply(store, planned(store))
    elif directory.exists():  # a dry run changes no file of the store, the derived index included
        with Store(directory, read_only=True) as store:
            result = planned(store)
    else:  # nor creates one: plan against an empty store that is thrown away

        with tempfile.TemporaryDirectory() as empty, Store(empty) as store:
            result = planned(store)
    if args.json:
        data = dict(result)
        data["actions"] = [a.as_dict() for a in result["actions"]]
        _print_json(data)
    else:
        for a in result["actions"]:
            mark = {"add": "+", "already": "=", "skip": "!"}[a.action]
            note = f" (already there as {a.id})" if a.action == "already" and a.id else ""
            note += f" ({a.why})" if a.why else ""
            _out(f"{mark} {a.kind:<10} {a.scope}  {_oneline(a.text, 100)}{note}")
        if result["dry_run"]:
            _out(f"dry run: would add {result['would_add']}, already there {result['already']}, "
                 f"skipped {result['skipped']}; nothing was written (pass --apply to write)")
        else:
            _out(f"added {result['added']}, already there {result['already'] + result['deduplicated']}, "
                 f"skipped {result['skipped']}" + (f", NOT durable {result['not_durable']}" if result["not_durable"] else ""))
        for n in result["notes"]:
            _err(f"note: {n}")
    return EXIT_FAIL if not result["dry_run"] and result["not_durable"] else EXIT_OK


# -- parsing ------------------------------------------------------------------------------------
def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535: anything else is a usage error, not a bind failure."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535; 0 picks a free one)")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: `retained [--dir DIR] [--json] COMMAND ...`, a sub-parser per command."""
    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # one line plus a pointer to help, exit 2
            hint = f"`{self.prog} --help`"
            if _JSON_ERRORS[0]:
                _print_json({"error": message, "hint": hint})
            # the same shape as every other error (`_fail`); the hint names the command
            self.exit(EXIT_USAGE, f"error: {message} (hint: {hint})\n")

    common = _Parser(add_help=False)
    # SUPPRESS: `retained --json verify` and `retained verify --json` both work, neither resets the other.
    common.add_argument("--dir", metavar="DIR", default=argparse.SUPPRESS,
                        help="store directory (default: $RETAINED_DIR, else the user data dir)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the result as JSON")

    parser = _Parser(prog="retained", description="Memory for coding agents whose writes are provable.",
                     parents=[common])
    parser.add_argument("--version", action="version", version=f"retained {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, func: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(func=func, parser_of_command=p)  # its own help for a flag it does not know
        return p

    # In this order in `retained --help`.
    for commands in (_record_commands, _store_commands, _host_commands, _transfer_commands, _hook_command):
        commands(add)

    team_commands(add)  # share, unshare, sync (issue 19)
    return parser


_SCOPE_HELP = "scope (default: the current git project, else global)"
_READ_SCOPE_HELP = "one scope, or '*' for all (default: this project + global)"
_AS_OF_HELP = "as the memory stood then: RFC 3339 time or a date (end of day, UTC)"


def _record_commands(add: _AddCommand) -> None:
    """write, checkpoint, search, get, list, forget: records in and out."""
    p = add("write", cmd_write, "append one record to the log, proven before it is acknowledged")
    p.add_argument("text", help="what to remember; - reads it from stdin (UTF-8, kept byte for byte)")
    p.add_argument("--kind", default="note", help="record kind (default: note), e.g. decision, fact")
    p.add_argument("--scope", help=_SCOPE_HELP)
    p.add_argument("--source", help="where this came from (file, URL, ticket)")
    p.add_argument("--supersedes", metavar="ID", action="append",
                   help="id of the record this one corrects (repeat it to resolve a fork: every current version)")
    p.add_argument("--client-op-id", metavar="X", help="idempotency key: a repeat returns the first receipt")
    p.add_argument("--field", action="append", metavar="KEY=JSON", help="extra top-level field, kept verbatim")
    p.add_argument("--private", action="store_true", help="never share this record with the team (field private: true)")
    p.add_argument("--shared", action="store_true",
                   help="share this record with the team whatever its kind (field shared: true)")

    p = add("checkpoint", cmd_checkpoint, "record where the work stands (kind checkpoint)")
    p.add_argument("label", help="one line: what this checkpoint is")
    p.add_argument("--summary", help="state of the work, decisions, next steps")
    p.add_argument("--scope", help=_SCOPE_HELP)

    p = add("search", cmd_search, "search by words and meaning, best first; says how much it did not return")
    p.add_argument("query")
    p.add_argument("--scope", help=_READ_SCOPE_HELP)
    p.add_argument("--kind", help="only records of this kind")
    p.add_argument("-k", type=_positive, default=8, help="hits to return (default 8, max 100)")
    p.add_argument("--max-tokens", type=_positive, help="trim the hits to this token budget")
    p.add_argument("--include-superseded", action="store_true", help="show corrected records too")
    p.add_argument("--as-of", metavar="TIME", help=_AS_OF_HELP)
    p.add_argument("--words", action="store_true",
                   help="answer by words only, at once (default: by meaning too, loading the model here when no "
                        "running server lends it)")
    p.add_argument("--meaning", action="store_true", help="by meaning too (the default; kept for scripts)")

    p = add("get", cmd_get, "records by id, verbatim from the log")
    p.add_argument("ids", nargs="+", metavar="ID")

    p = add("list", cmd_list, "browse records newest first")
    p.add_argument("--scope", help=_READ_SCOPE_HELP)
    p.add_argument("--kind", help="only records of this kind")
    p.add_argument("--limit", type=_positive, default=20, help="records to return (default 20, max 500)")
    p.add_argument("--cursor", metavar="C", help="the next page: the cursor the previous page printed")
    p.add_argument("--before-seq", help="==SUPPRESS==")  # refused with a hint naming --cursor
    p.add_argument("--include-superseded", action="store_true", help="show corrected records too")
    p.add_argument("--as-of", metavar="TIME", help=_AS_OF_HELP)

    p = add("forget", cmd_forget, "retract records (reversible), bring them back (--undo) or purge their bytes (--purge)")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--reason", metavar="R", help="why; kept in the forget record (never the purged text)")
    p.add_argument("--undo", action="store_true", help="bring retracted records back")
    p.add_argument("--purge", action="store_true",
                   help="remove the records' bytes from every file of the store, for good (the chain still verifies)")
    p.add_argument("--yes", action="store_true",
                   help="purge without asking (without it, a purge asks on a terminal and is refused elsewhere)")


def _store_commands(add: _AddCommand) -> None:
    """scopes, maintain, verify, reindex, serve, brief: the store as a whole."""
    add("scopes", cmd_scopes, "list the scopes with their record counts and project keys (* = this project)")

    p = add("maintain", cmd_maintain, "report duplicates, long chains, retracted and old records per scope (writes nothing)")
    p.add_argument("--apply", action="store_true",
                   help="do the provably safe part: retract exact duplicates, keeping the oldest")

    add("verify", cmd_verify, "recompute the hash chain and reconcile the index with the log")
    add("reindex", cmd_reindex, "rebuild the search index from the log")
    add("serve", cmd_serve, "run the MCP server on stdin/stdout (what hosts start)")

    p = add("brief", cmd_brief, "the budgeted digest of this project's memory that sessions start with")
    p.add_argument("--budget", type=_positive, default=800, help="token budget (default 800)")
    p.add_argument("--scope", help=_READ_SCOPE_HELP)
    p.add_argument("--as-of", metavar="TIME", help=_AS_OF_HELP)


def _host_commands(add: _AddCommand) -> None:
    """install, uninstall, doctor: retained wired into agent hosts."""
    hosts_help = f"{', '.join(names())}; repeat for several (default: every host found)"
    for name, func, text in (("install", cmd_install, "wire retained into agent hosts, safely"),
                             ("uninstall", cmd_uninstall, "remove retained's entries and hooks, nothing else")):
        p = add(name, func, text)
        p.add_argument("--host", action="append", metavar="H", help=hosts_help)
        p.add_argument("--scope", choices=["user", "project"], default="user",
                       help="user config (default) or the current project's files")
        p.add_argument("--dry-run", action="store_true", help="print a unified diff; write nothing")
        p.add_argument("--yes", action="store_true", help="do not ask before changing files")
        if name == "install":
            p.add_argument("--no-hooks", action="store_true", help="only the server entry, no hooks")
            p.add_argument("--no-approve", action="store_true",
                           help="do not pre-approve retained's own tools (the host then asks each time)")
            p.add_argument("--no-stop-hook", action="store_true", help="no Stop hook asking for a checkpoint")
            p.add_argument("--no-prompt-hook", action="store_true",
                           help="no prompt-submit hook recalling memory relevant to each prompt")
    p = add("doctor", cmd_doctor, "prove the wiring works: configs, server start, hooks, store (read-only)")
    p.add_argument("--host", action="append", metavar="H", help=hosts_help)
    p.add_argument("--scope", choices=["user", "project"], default="user",
                   help="check the user config (default) or the current project's files")


def _transfer_commands(add: _AddCommand) -> None:
    """ui, export, import: the memory seen, written out and brought in."""
    p = add("ui", cmd_ui, "a local web page to see, search, correct and forget memories (127.0.0.1, token)")
    p.add_argument("--no-open", action="store_true", help="print the address instead of opening a browser")
    p.add_argument("--port", type=_port, default=0, help="port on 127.0.0.1 (default: a free one)")

    p = add("export", cmd_export, "write the memory out: jsonl (records verbatim) or Markdown (one file per project)")
    p.add_argument("--scope", help="one scope, or '*' for all (default: every scope)")
    p.add_argument("--format", choices=["jsonl", "markdown"], default="jsonl", help="jsonl (default) or markdown")
    p.add_argument("--include-history", action="store_true", help="also retracted records and forget records")
    p.add_argument("-o", "--output", metavar="PATH", help="file (jsonl), folder or .md file (markdown); default stdout")

    p = add("import", cmd_import, "bring memory in (dry run unless --apply): a retained export, a host's instruction "
            "file, a memory folder, or a host's own memory")
    p.add_argument("path", nargs="?", metavar="PATH", help="an export (.jsonl), an instruction file or a memory folder")
    p.add_argument("--from", dest="from_source", choices=memory_sources(), metavar="SOURCE",
                   help=f"a host's own memory: {', '.join(memory_sources())}")
    p.add_argument("--scope", help="file every imported record under this scope")
    p.add_argument("--apply", action="store_true", help="write; without it nothing is written")
    p.add_argument("--include-superseded", action="store_true",
                   help="also add lines that match a record a later one corrected (left out by default)")


def _hook_command(add: _AddCommand) -> None:
    """hook: what hosts run (read leniently by retained/entry.py; here for `retained hook --help`)."""
    p = add("hook", cmd_hook, "what agent hosts run at session start, prompt, compaction and stop (always exits 0)")
    p.add_argument("event", choices=list(EVENTS))
    p.add_argument("--host", choices=names(),
                   help="the calling host (default: worked out from the input and the environment)")
    p.add_argument("--budget", type=_positive, default=800, help="brief token budget (default 800)")


# Whether the command line asked for --json: then errors are a JSON object on stdout as well.
_JSON_ERRORS = [False]


def _fail(message: str, hint: str | None, code: int) -> int:
    """An error: one line on stderr, and with --json also {"error": …, "hint": …} on stdout."""
    if _JSON_ERRORS[0]:
        _print_json({"error": message, "hint": hint})
    _err(f"error: {message}" + (f" (hint: {hint})" if hint else ""))
    return code


def _os_error(e: OSError) -> tuple[str, str]:
    """A file the command could not use, said in one line (permission, read-only disk, full disk)."""
    what = e.strerror or type(e).__name__
    where = f": {e.filename}" if e.filename else ""
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied{where}", "run as the owner of the store, or pass --dir for a store of your own"
    if e.errno == errno.EROFS:
        return f"read-only file system{where}", "pass --dir for a store on a writable disk"
    if e.errno == errno.ENOSPC:
        return f"no space left on the device{where}", "free some space and retry; nothing was acknowledged"
    return f"{what}{where}", "check the path and its permissions"


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes (README, "Exit codes"): 0 ok, 1 failed / not found / not intact, 2 usage, 3 a bug,
    130 interrupted."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _JSON_ERRORS[0] = "--json" in argv
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported by the command's own parser, whose hint is `retained <command> --help`
        getattr(args, "parser_of_command", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    args.dir = getattr(args, "dir", None)
    args.json = getattr(args, "json", False)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if args.dir is not None and not args.dir.strip():
            raise UsageError("--dir is empty", hint="give a directory, or leave --dir out for the default store")
        return args.func(args)
    except RetainedError as e:
        return _fail(e.message, e.hint, e.exit_code)
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except OSError as e:  # a file the command needs: say which and why, in one line
        if os.environ.get("RETAINED_DEBUG"):
            raise
        return _fail(*_os_error(e), EXIT_FAIL)
    except Exception as e:
        if os.environ.get("RETAINED_DEBUG"):
            raise
        if type(e).__module__ == "sqlite3":  # the derived index: the log itself is untouched
            return _fail(f"the search index could not be used ({e})",
                         "run `retained verify`; `retained reindex` rebuilds the index from the log", EXIT_FAIL)
        return _fail(f"internal error: {type(e).__name__}: {e}",
                     "set RETAINED_DEBUG=1 for a traceback and report it", EXIT_BUG)
