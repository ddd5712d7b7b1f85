"""`retained ui`: a local web page to see and steer the store.

Starlette and uvicorn come with the `mcp` SDK already, so the page adds no dependency; its script and
style ship in `retained/ui_static/` (no CDN: it works offline).

Who may talk to it: the server listens on 127.0.0.1 only, on a free port. Every request must carry
the random token of this run: in the printed URL (`?token=`, swapped for an HttpOnly, SameSite=Strict
cookie on the first load), the cookie, or the `X-Retained-Token` header. A request whose `Host` is not
the address served, whose `Origin` is any other origin, or that a browser marks as coming from another
site (`Sec-Fetch-Site`) is refused before it reaches a handler, which keeps out other websites (CSRF,
DNS rebinding) and other local users (they do not have the token). A state change must also carry the
token in the `X-Retained-Token` header with a JSON body: a form or an image on another site can send
neither. Stored text is data: the page only ever puts it into the document as text nodes, and the
Content-Security-Policy allows no inline script, so a record holding HTML or script shows as text.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import webbrowser
from datetime import date, datetime, timedelta
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import reads, records, safejson
from .errors import NotFound, RetainedError, UsageError
from .index import query_terms
from .installers.hosts import memory_sources, native_memory
from .reads import cursor_of, parse_cursor
from .records import MAX_TEXT_BYTES
from .replies import shown, who
from .store import Store
from .team.share import team_status

STATIC = Path(__file__).with_name("ui_static")
PAGE = 50
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8",
          "icon.svg": "image/svg+xml"}


# -- the guard ------------------------------------------------------------------------------------
class Guard:
    """ASGI middleware: loopback Host, same Origin, the token; refuses everything else with 403."""

    def __init__(self, app: Any, *, token: str, port: int) -> None:
        self.app, self.token, self.port = app, token, port
        self.host = f"127.0.0.1:{port}"
        self.origin = f"http://127.0.0.1:{port}"
        self.cookie = f"retained_ui_{port}"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":
            return await _refuse(scope, send, "only plain HTTP requests are served")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        if headers.get("host") != self.host:
            return await _refuse(scope, send, f"wrong Host: this page answers only to {self.host}")
        origin = headers.get("origin")
        if origin is not None and origin != self.origin:
            return await _refuse(scope, send, "requests from another origin are refused")
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return await _refuse(scope, send, "requests from another site are refused")
        if method == "OPTIONS":  # no cross-origin access is ever granted, so no preflight either
            return await _refuse(scope, send, "cross-origin requests are refused")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = (query.get("token") or [None])[0]
        cookie = _cookie(headers.get("cookie", ""), self.cookie)
        header = headers.get("x-retained-token")
        if method in STATE_CHANGING:
            if not self._ok(header):
                return await _refuse(scope, send, "a change needs the X-Retained-Token header")
            if not headers.get("content-type", "").startswith("application/json"):
                return await _refuse(scope, send, "a change needs a JSON body")
        elif not (self._ok(given) or self._ok(cookie) or self._ok(header)):
            return await _refuse(scope, send, "no token: open the address `retained ui` printed")
        if given is not None and self._ok(given) and method == "GET" and scope["path"] == "/":
            # Swap the token in the address for a cookie, and take it out of the address bar and history.
            cookie_value = f"{self.cookie}={self.token}; HttpOnly; SameSite=Strict; Path=/"
            await send({"type": "http.response.start", "status": 303,
                        "headers": [(b"location", b"/"), (b"set-cookie", cookie_value.encode()), *HEADERS]})
            await send({"type": "http.response.body", "body": b""})
            return None
        return await self.app(scope, receive, send)

    def _ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode("utf-8", "replace"), self.token.encode())


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


async def _refuse(scope: dict[str, Any], send: Any, why: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"error": why}).encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *HEADERS]})
    await send({"type": "http.response.body", "body": body})


# -- the handlers ---------------------------------------------------------------------------------
class Api:
    """What the page asks; plain functions over the store, each returning JSON-ready data."""

    def __init__(self, store: Store, token: str, store_dir: Path, project: str | None = None) -> None:
        self.store, self.token, self.store_dir = store, token, store_dir
        self.project = project  # the project the page was opened in: shown first, never the only memory shown
        self._facets: tuple[tuple[int, int], dict[str, Any]] | None = None  # kind counts, keyed by log size
        self._scopes: tuple[tuple[int, int], dict[str, Any]] | None = None  # facets, likewise
        self._doctor: tuple[float, dict[str, Any]] | None = None
        self._doctor_lock = threading.Lock()
        # Damage a read met that the index does not know of (a byte flipped in place, size and mtime
        # kept): said by every view from then on, until Health's full check finds the log intact.
        self._met_damage: dict[str, str] = {}

    def _damage(self) -> list[str]:
        """What every view says about damage: the index's count of unreadable lines, and what reads met."""
        note = self.store.damage_note()
        return ([note] if note else []) + list(self._met_damage.values())

    # reading
    def facets(self) -> dict[str, Any]:
        warnings = self.store.refresh()
        key = (self.store.log.size(), self.store.index.counts()["records"])
        if self._scopes is None or self._scopes[0] != key:  # the kinds in use cost a walk of an index
            self._scopes = (key, self.store.index.facets())
        out = dict(self._scopes[1])
        counts = self.store.index.counts()
        here = self._here()
        out["scopes"] = sorted(out["scopes"], key=lambda s: s["scope"] not in here)  # this project first
        for sc in out["scopes"]:
            sc["here"] = sc["scope"] in here
        out.update(store=str(self.store_dir), corrupt=counts["corrupt"], breaks=counts["breaks"],
                   warnings=warnings + self._damage(), kinds_known=list(KNOWN_KINDS), project=self.project,
                   here=here, here_current=sum(sc["n"] for sc in out["scopes"] if sc["here"]))
        return out

    def _here(self) -> list[str]:
        """The scopes of the project the page was opened in (its other checkouts too); [] outside one."""
        if not self.project:
            return []
        return list(self.store.project_scopes([self.project]) or [])

    def kinds(self) -> dict[str, Any]:
        """Current records per kind: a scan at 100k, so asked for after the page is up, and cached."""
        self.store.refresh()
        key = (self.store.log.size(), self.store.index.counts()["records"])
        if self._facets is None or self._facets[0] != key:
            self._facets = (key, {"kinds": self.store.index.kind_counts()})
        return self._facets[1]

    def records(self, q: dict[str, str]) -> dict[str, Any]:
        """A page of the person's memory, newest first in the team order: every scope unless `scope`
        names one ('here': the project the page was opened in); `elsewhere=1` leaves that project out.
        `next` is the cursor of the next page (`cursor=`), None on the last."""
        if q.get("before"):
            raise UsageError("the page's list no longer pages by line", hint="reload the page (pages follow a cursor)")
        after = parse_cursor(q["cursor"]) if q.get("cursor") else None
        warnings = self.store.refresh()
        limit = _int(q.get("limit"), PAGE, 1, 200)
        scopes, notes = self._read_scopes(q)
        warnings = notes + warnings
        rows, total = self.store.index.browse(
            scopes=scopes, kind=_kind(q), ts_from=_day(q.get("from")),
            ts_to=_day(q.get("to"), next_day=True),
            as_of=_instant(q.get("as_of")), history=q.get("history") == "1",
            after=after, limit=limit, exclude=self._here() if q.get("elsewhere") == "1" else None)

        return {"records": [_row(r) for r in rows], "total": total, "returned": len(rows),
                "next": cursor_of(rows[-1]) if len(rows) == limit else None, "warnings": warnings + self._damage()}

    def search(self, q: dict[str, str]) -> dict[str, Any]:
        text = q.get("q", "")
        k = _int(q.get("k"), 50, 1, 100)
        scopes, notes = self._read_scopes(q)
        kwargs: dict[str, Any] = {"scopes": scopes, "kind": _kind(q), "k": k,
                                  "include_superseded": q.get("history") == "1"}
        as_of = _instant(q.get("as_of"))
        if as_of is not None and _accepts(self.store.search, "as_of"):
            kwargs["as_of"] = as_of
        result = self.store.search(text, **kwargs)
        lo, hi = _day(q.get("from")), _day(q.get("to"), next_day=True)
        hits = [h for h in result["hits"] if (lo is None or h["ts"] >= lo) and (hi is None or h["ts"] < hi)
                and (as_of is None or "as_of" in kwargs or h["ts"] <= as_of)]
        mode = result.get("match", "all")
        for h in hits:
            h["state"] = "superseded" if h.get("superseded_by") else "current"
            h.setdefault("match", "words")
            h["how"] = _how(h["match"], mode)
            h["text"] = h["text"][:400]
        out = {k: v for k, v in result.items() if k != "hits"}
        said_by_summary = "no record holds every word"  # the page's summary says it (as_any), once
        out.update(hits=hits, terms=query_terms(text), filtered=len(result["hits"]) - len(hits),
                   warnings=notes + [w for w in result.get("warnings") or [] if not w.startswith(said_by_summary)])
        said = list(out.get("warnings") or [])
        out["warnings"] = said + [w for w in self._damage() if w not in said]
        return out

    def _read_scopes(self, q: dict[str, str]) -> tuple[list[str] | None, list[str]]:
        """The scopes a read of the page takes, and what it says of them. The page is the person's view
        of all of their memory: no scope (or '*') reads every scope; 'here' the project it was opened in
        (with its other checkouts); any other scope through the store's one resolver."""
        scope = q.get("scope") or None
        if scope is None or scope == "*":
            return None, []
        if scope == "here":
            return (self._here() or None), ([] if self.project else ["the page was opened outside a project: "
                                                                     "showing every scope"])
        scopes, notes = self.store.read_scopes(records.check_scope(scope), self.project)
        return self.store.project_scopes(scopes), notes

    def record(self, rid: str) -> dict[str, Any]:
        index = self.store.index
        self.store.refresh()
        row = index.by_id(rid)
        if row is None:
            damaged = self._damaged_line(rid)
            if damaged is None:
                raise NotFound(f"no record {rid!r} in this store", hint="it may have been imported elsewhere")
            return damaged
        got = self.store.get([rid])
        rec = got["records"][0] if got["records"] else None
        if rec is None:
            self._met_damage[rid] = (f"record {rid} (line {row['line']} of the log) is damaged: its bytes no longer "
                                     "match its hash; see Health, or run `retained verify`")
            got["warnings"] = list(got["warnings"]) + [w for w in self._damage() if w not in got["warnings"]]
        proof = self._proof(row, rec)
        chain = [_row(r) for r in index.chain(row["head"])]
        head = index.at_line(row["head"])
        forgets = self._forgets(rid, {c["id"] for c in chain})
        return {"record": rec, "row": _row(row), "proof": proof, "chain": chain,
                "current": head["id"] if head else rid, "forgets": forgets, "damaged": rec is None,
                "warnings": got["warnings"]}

    def _damaged_line(self, rid: str) -> dict[str, Any] | None:
        """The record view of an id the index left out because its line is damaged: found by its bytes
        among the lines the index could not read (it holds no id for them)."""
        needle = rid.encode("utf-8", "replace")
        for p in self.store.index.problems():
            if p["kind"] == "break":
                continue
            try:
                chunk = self.store.log.read_at(p["offset"], 1024 * 1024)
            except OSError:
                continue
            line = chunk.split(b"\n", 1)[0]
            if needle not in line:
                continue
            why = (f"record {rid} is on line {p['line']} of the log, which is damaged ({p['reason']}): it cannot be "
                   "read as a record; see Health, or run `retained verify`")
            self._met_damage[rid] = why
            row = {"line": p["line"], "seq": p["seq"], "id": rid, "ts": "", "kind": "damaged", "scope": "",
                   "text": "", "chars": 0, "tomb": False, "state": "damaged"}
            proof = {"seq": p["seq"], "sha256": None, "prev": None, "line": p["line"], "offset": p["offset"],
                     "bytes": len(line) + 1, "hash_ok": False, "link_ok": False, "tombstone": False,
                     "chain_ok": False, "chain_problems": self.store.index.counts()["corrupt"]}
            return {"record": None, "row": row, "proof": proof, "chain": [], "current": rid, "forgets": [],
                    "damaged": True, "warnings": self._damage()}
        return None

    def _proof(self, row: dict[str, Any], rec: dict[str, Any] | None) -> dict[str, Any]:
        counts = self.store.index.counts()
        prev_row = self.store.index.at_line(row["line"] - 1) if row["line"] > 1 else None
        if row["line"] == 1:
            link = row["seq"] == 1 and (rec or {}).get("prev", records.GENESIS) == records.GENESIS
        else:
            link = prev_row is not None and rec is not None and rec.get("prev") == prev_row["sha256"]
        own = rec is not None and (bool(row.get("tomb")) or records.compute_sha256(
            {k: v for k, v in rec.items() if k not in ("retracted", "superseded_by")}) == row["sha256"])
        return {"seq": row["seq"], "sha256": row["sha256"], "prev": (rec or {}).get("prev"), "line": row["line"],
                "offset": row["offset"], "bytes": row["length"], "hash_ok": own, "link_ok": link,
                "tombstone": bool(row.get("tomb")),
                "chain_ok": counts["corrupt"] == 0 and counts["breaks"] == 0,
                "chain_problems": counts["corrupt"] + counts["breaks"]}

    def _forgets(self, rid: str, chain_ids: set[str]) -> list[dict[str, Any]]:
        out = []
        for f in self.store.index.forget_records():
            try:
                rec = reads.read_row(self.store.index, self.store.log, f)
            except (records.BadLine, OSError):
                continue
            named: set[str] = set(rec.get("targets") or []) | {
                p["id"] for p in rec.get("purged") or [] if isinstance(p, dict) and isinstance(p.get("id"), str)}
            if named & chain_ids:
                out.append({"id": rec["id"], "ts": rec["ts"], "action": rec.get("action"), "reason": rec.get("reason"),
                            "targets": sorted(named & chain_ids), "this": rid in named})
        return out

    def health(self) -> dict[str, Any]:
        report = self.store.verify()
        if report.get("chain_ok") and not report.get("corrupt_lines"):
            self._met_damage.clear()  # the full check found every line intact: what reads met is past
        elif report.get("corrupt_lines"):
            first = report["corrupt_lines"][0]
            n = len(report["corrupt_lines"])
            self._met_damage["health"] = (f"{n} damaged line{'s' if n != 1 else ''} in the log (the first is line "
                                          f"{first.get('line')}): see Health, or run `retained verify`")
        qdir = self.store_dir / "quarantine"
        quarantine = []
        if qdir.is_dir():
            for p in sorted(qdir.iterdir()):
                try:
                    st = p.stat()
                except OSError:
                    continue
                quarantine.append({"name": p.name, "bytes": st.st_size,
                                   "mtime": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(st.st_mtime))})
        fixes = []
        if not report["chain_ok"]:
            fixes.append("retained verify  (names each damaged line; restore it from a backup or an export)")
        if report["missing_from_index"] or report["index_only"]:
            fixes.append("retained reindex")
        if report["torn_tail"]:
            fixes.append("retained write … (the next write moves the torn tail to quarantine/)")
        report["quarantine"] = quarantine
        report["fixes"] = fixes

        report["team"] = team_status(self.store_dir, self.store)
        return report

    def doctor(self, refresh: bool = False) -> dict[str, Any]:
        """doctor's checks (the wiring of every host found), run as the CLI runs them, plus each
        host's own memory. Cached for a minute: doctor starts servers and hooks."""
        with self._doctor_lock:
            if self._doctor is not None and not refresh and time.monotonic() - self._doctor[0] < 60:
                return self._doctor[1]
            env = dict(os.environ, RETAINED_DIR=str(self.store_dir))
            try:
                proc = subprocess.run([sys.executable, "-m", "retained", "doctor", "--json", "--dir", str(self.store_dir)],
                                      capture_output=True, text=True, timeout=120, env=env)
                data: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {"ok": False, "checks": []}
                error = None if proc.stdout.strip() else (proc.stderr.strip().splitlines() or ["doctor printed nothing"])[-1]
            except (OSError, ValueError, subprocess.TimeoutExpired) as e:
                data, error = {"ok": False, "checks": []}, f"doctor could not run: {e}"
            hosts: dict[str, dict[str, Any]] = {}
            for c in data.get("checks", []):
                h = hosts.setdefault(c.get("host", "?"), {"host": c.get("host", "?"), "ok": True, "checks": []})
                h["checks"].append(c)
                h["ok"] = h["ok"] and bool(c.get("ok"))

            for name in memory_sources():
                report = native_memory(name)
                if report is not None:
                    hosts.setdefault(name, {"host": name, "ok": True, "checks": [], "wired": False})["native"] = report
            for h in hosts.values():
                h.setdefault("wired", any(c.get("ok") and "server entry" in c.get("check", "") for c in h["checks"]))
            result = {"ok": bool(data.get("ok")), "hosts": sorted(hosts.values(), key=lambda h: h["host"] != "store"),
                      "error": error}
            self._doctor = (time.monotonic(), result)
            return result

    # changing
    def supersede(self, rid: str, body: dict[str, Any]) -> dict[str, Any]:
        row = self.store.index.by_id(rid)
        if row is None:
            raise NotFound(f"no record {rid!r}", hint="reload the page")
        text = body.get("text")
        if not isinstance(text, str):
            raise UsageError("the corrected text must be a string", hint="type the new text in the box")
        kind = body.get("kind") or row["kind"]
        receipt = self.store.write(text, kind=kind, scope=row["scope"], supersedes=rid, source="retained ui")
        return receipt

    def forget(self, body: dict[str, Any], undo: bool = False) -> dict[str, Any]:
        ids = _ids(body)
        reason = body.get("reason") or None
        return self.store.unforget(ids, reason) if undo else self.store.forget(ids, reason)

    def purge(self, body: dict[str, Any]) -> dict[str, Any]:
        ids = body.get("ids")
        if not isinstance(ids, list) or not ids or body.get("confirm") != ids:
            raise UsageError("a purge needs the confirmation naming exactly the records it removes",
                             hint="confirm in the dialog, which lists them")
        return self.store.purge(ids, body.get("reason") or None)


def _ids(body: dict[str, Any]) -> list[str]:
    ids = body.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise UsageError("ids must be a list of record ids", hint="reload the page and pick the records again")
    return ids


KNOWN_KINDS = ("decision", "convention", "preference", "fact", "todo", "note", "checkpoint")


def _accepts(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _how(match: str, mode: str) -> str:
    words = "every word" if mode == "all" else "some of the words"
    return {"words": f"matched {words}", "meaning": "matched by meaning (no shared word)",
            "both": f"matched {words} and by meaning"}.get(match, match)


def _row(r: dict[str, Any]) -> dict[str, Any]:
    out = {k: r.get(k) for k in ("line", "seq", "id", "ts", "kind", "scope", "source", "supersedes", "superseded_by",
                                  "retracted_by", "writer", "author")}
    text = out["text"] = r.get("text") or ""
    out["chars"] = r.get("chars") if r.get("chars") is not None else len(text)
    out["tomb"] = bool(r.get("tomb"))
    out["state"] = ("purged" if r.get("tomb") else "forget" if r.get("kind") == records.FORGET_KIND
                    else "retracted" if r.get("hidden") else "superseded" if r.get("superseded_by") else "current")
    return out


def _int(value: str | None, default: Any, lo: int, hi: int) -> Any:
    if value in (None, ""):
        return default
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"{value!r} is not a whole number", hint="reload the page") from None
    return min(max(n, lo), hi)


def _kind(q: dict[str, str]) -> str | None:
    kind = q.get("kind") or None
    return None if kind is None else records.check_kind(kind)


def _day(value: str | None, next_day: bool = False) -> str | None:
    """A date (YYYY-MM-DD) as the RFC 3339 prefix records' `ts` compare against."""
    if not value:
        return None

    try:
        d = date.fromisoformat(value[:10])
    except ValueError:
        raise UsageError(f"{value!r} is not a date", hint="use YYYY-MM-DD") from None
    return (d + timedelta(days=1) if next_day else d).isoformat()


def _instant(value: str | None) -> str | None:
    """A date or date-time as the RFC 3339 UTC text records' `ts` compare against."""
    if not value:
        return None

    text = value.strip().replace(" ", "T")
    if len(text) == 10:
        text += "T23:59:59.999999"
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{value!r} is not a date or time", hint="use YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    return records.rfc3339(dt)


# -- the app ------------------------------------------------------------------------------------------
class Page:
    """The page: one response holding its style and the first screen (the newest records, rendered
    here with every stored character escaped, plus the same data for the script), so the records are
    painted after a single round trip while the script (a file, deferred) loads. The style is
    ui_static/app.css inlined and allowed by its hash in the Content-Security-Policy; no inline
    script is allowed at all."""

    def __init__(self) -> None:
        self.css = (STATIC / "app.css").read_text("utf-8")

        def digest(text: str) -> str:
            return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

        self.csp = CSP.replace("style-src 'self'", f"style-src 'self' {digest(self.css)}")

    def html(self, token: str, initial: dict[str, Any] | None) -> bytes:
        data = ""
        if initial is not None:
            # A data block, never run; escaped so stored text cannot end the element.
            blob = json.dumps(initial, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e") \
                .replace("&", "\\u0026").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
            data = f'<script type="application/json" id="initial">{blob}</script>\n'
        return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="retained-token" content="{escape(token, quote=True)}">
<title>retained memory</title>
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
<style>{self.css}</style>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <h1><a href="#/">retained</a></h1>
  <nav aria-label="Views"><a href="#/" data-nav="list">Memory</a> <a href="#/health" data-nav="health">Health</a>
  <button type="button" id="help-button" aria-haspopup="dialog">Keys <kbd>?</kbd></button></nav>
</header>
<main id="main" tabindex="-1">{first_screen(initial)}</main>
<dialog id="dialog" aria-labelledby="dialog-title"></dialog>
<div id="toast" role="status" aria-live="polite"></div>
<noscript>This page needs JavaScript (served from this machine; nothing is fetched from the internet).</noscript>
{data}<script src="/static/app.js" defer></script>
</body>
</html>
""".encode()


def first_screen(initial: dict[str, Any] | None) -> str:
    """The newest records of all memory as HTML, the same markup the script builds; stored text escaped
    (HTML-escaped, and control characters shown as escapes). Inside a project the script draws the
    project's group first; this paints what it can before the script runs."""
    if initial is None:
        return '<p class="loading">Loading…</p>'
    data = initial["records"]
    total = data["total"]
    what = "this project" if "others" in initial else "all memory, every scope"
    out = [f'<p class="summary" id="summary">{total:,} record{"s" if total != 1 else ""} · {what} · newest first</p>']
    if not data["records"]:
        return out[0] + f'<p class="empty">{escape(empty_note(initial["facets"]))}</p>'
    out.append('<ol class="records" id="records">')
    for r in data["records"]:
        more = "…" if r["chars"] > len(r["text"]) else ""
        rid, kind, scope = escape(shown(r["id"])), escape(shown(r["kind"])), escape(shown(r["scope"]))
        label = escape(scope_label(shown(r["scope"])))
        author = who(r)
        by = f'<span class="author">by {escape(shown(author))}</span>' if author else ""
        out.append(f'<li><a class="rec" href="#/r/{escape(quote_id(r["id"]))}" data-id="{escape(r["id"])}"><div class="meta">'
                   f'<span class="badge kind kind-{kind}">{kind}</span>'
                   f'<span class="scope" title="{scope}" data-scope="{escape(r["scope"])}">{label}</span>{by}'
                   f'<time datetime="{escape(r["ts"])}">{escape(r["ts"][:10])}</time>'
                   f'<code class="rid">{rid}</code></div><p class="text">{escape(shown_text(r["text"]))}{more}</p></a></li>')
    out.append("</ol>")
    return "".join(out)


def scope_label(scope: str) -> str:
    """A scope as the page labels it: a path scope by its last part (the project's folder)."""
    return (scope.rstrip("/").rsplit("/", 1)[-1] or scope) if scope.startswith("/") else scope


def shown_text(text: str) -> str:
    """Stored text on the page: line breaks and tabs kept, every other control character as an escape."""
    return "\n".join("\t".join(shown(part) for part in line.split("\t")) for line in text.split("\n"))


def empty_note(facets: dict[str, Any]) -> str:
    """What an empty view says: never that the store is empty unless it is."""
    if not facets.get("records"):
        return "The store holds no records yet."
    n, scopes = facets.get("current", 0), len(facets.get("scopes") or [])
    return (f"No record in this view. The store holds {n:,} current record{'s' if n != 1 else ''} in "
            f"{scopes} scope{'s' if scopes != 1 else ''}: clear the filters to see all of them.")


def quote_id(rid: str) -> str:
    return quote(rid, safe="")


#: The largest request body the page takes: a record's text may be this large, and no more.
MAX_BODY_BYTES = MAX_TEXT_BYTES


async def _bounded_body(request: Any) -> bytes | None:
    """The request's body, or None when it is larger than MAX_BODY_BYTES: a declared Content-Length
    over the bound is refused before a byte is read, and a body sent without one (or longer than it
    said) is read in the server's chunks and given up on as soon as it passes the bound, so no
    request holds more than the bound in memory."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > MAX_BODY_BYTES:
                return None
        except ValueError:
            pass  # the server itself refuses a malformed Content-Length before we are called
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def build_app(store: Store, token: str, port: int, store_dir: Path, project: str | None = None) -> Any:
    api = Api(store, token, store_dir, project)

    def _json(data: Any, status: int = 200) -> Response:
        return JSONResponse(data, status_code=status, headers={k.decode(): v.decode() for k, v in HEADERS})

    def wrap(fn: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            body: dict[str, Any] = {}
            if request.method in STATE_CHANGING:
                raw = await _bounded_body(request)
                if raw is None:
                    return _json({"error": f"the body is larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB",
                                  "hint": "a change this large is for the command line: `retained write -`"}, 413)
                try:
                    body = safejson.loads(raw or b"{}", max_bytes=MAX_BODY_BYTES)
                except ValueError as e:
                    return _json({"error": f"the body is not JSON ({getattr(e, 'msg', e)})"}, 400)
                if not isinstance(body, dict):
                    return _json({"error": "the body must be a JSON object"}, 400)
            try:
                data = await run_in_threadpool(fn, request, body)
            except NotFound as e:
                return _json({"error": e.message, "hint": e.hint}, 404)
            except RetainedError as e:
                return _json({"error": e.message, "hint": e.hint}, 400)
            return _json(data)
        return endpoint

    def q(request: Request) -> dict[str, str]:
        return {k: v for k, v in request.query_params.items()}

    page = Page()

    def first_screen() -> dict[str, Any] | None:
        try:
            facets = api.facets()
            if facets["here"]:  # opened inside a project: that project first, then everything else
                return {"facets": facets, "records": api.records({"scope": "here"}),
                        "others": api.records({"elsewhere": "1"})}
            return {"facets": facets, "records": api.records({})}
        except RetainedError:
            return None  # the page then asks for it itself, and shows the error

    first_screen()  # before the address is printed: the index catches up and the facets are cached

    async def index(request: Request) -> Response:
        headers = {k.decode(): v.decode() for k, v in HEADERS}
        headers["content-security-policy"] = page.csp
        initial = await run_in_threadpool(first_screen)
        return Response(page.html(token, initial), media_type="text/html; charset=utf-8", headers=headers)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return _json({"error": "no such file"}, 404)
        headers = {k.decode(): v.decode() for k, v in HEADERS}
        return Response((STATIC / name).read_bytes(), media_type=ASSETS[name], headers=headers)

    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/api/facets", wrap(lambda r, b: api.facets())),
        Route("/api/kinds", wrap(lambda r, b: api.kinds())),
        Route("/api/records", wrap(lambda r, b: api.records(q(r)))),
        Route("/api/search", wrap(lambda r, b: api.search(q(r)))),
        Route("/api/record/{rid}", wrap(lambda r, b: api.record(r.path_params["rid"]))),
        Route("/api/health", wrap(lambda r, b: api.health())),
        Route("/api/doctor", wrap(lambda r, b: api.doctor(refresh=r.query_params.get("refresh") == "1"))),
        Route("/api/record/{rid}/supersede", wrap(lambda r, b: api.supersede(r.path_params["rid"], b)), methods=["POST"]),
        Route("/api/forget", wrap(lambda r, b: api.forget(b)), methods=["POST"]),
        Route("/api/unforget", wrap(lambda r, b: api.forget(b, undo=True)), methods=["POST"]),
        Route("/api/purge", wrap(lambda r, b: api.purge(b)), methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    return Guard(app, token=token, port=port)


def loopback_socket(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 only (port 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    sock.set_inheritable(False)
    return sock


def serve(store_dir: Path, *, open_browser: bool = True, port: int = 0, out: Any = None,
          project: str | None = None) -> int:
    """Run the page until interrupted. Prints its address (with the token) first. `project`: the
    project the page was opened in (shown first; the page shows every scope, the person's whole memory)."""
    out = out or (lambda s: (sys.stdout.write(s + "\n"), sys.stdout.flush()))
    token = secrets.token_urlsafe(32)
    sock = loopback_socket(port)
    port = sock.getsockname()[1]
    with Store(store_dir) as store:
        app = build_app(store, token, port, Path(store_dir).absolute(), project)
        url = f"http://127.0.0.1:{port}/?token={token}"
        out(f"retained ui: {url}")
        out("(listening on 127.0.0.1 only; the token is this run's own; Ctrl-C stops it)")
        if open_browser:
            threading.Timer(0.3, lambda: webbrowser.open(url)).start()
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", ws="none",
                                server_header=False, date_header=False)
        uvicorn.Server(config).run(sockets=[sock])
    return 0
