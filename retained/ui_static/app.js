// retained ui: list, search, read, correct and forget memories. No framework, no network beyond this
// server. Stored text only ever enters the page as text nodes (textContent), never as markup.
(() => {
  "use strict";
  const TOKEN = document.querySelector('meta[name="retained-token"]').content;
  const main = document.getElementById("main");
  const dialog = document.getElementById("dialog");
  const toast = document.getElementById("toast");
  const PAGE = 50;
  const state = { facets: null, kindCounts: null, rows: [], next: null, total: 0, filters: {}, view: "" };
  const initialNode = document.getElementById("initial");
  let initial = initialNode ? JSON.parse(initialNode.textContent) : null;

  // -- small helpers ------------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  async function api(path, body) {
    const opts = { headers: { "X-Retained-Token": TOKEN }, credentials: "same-origin" };
    if (body !== undefined) {
      opts.method = "POST";
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(path, opts);
    let data = null;
    try { data = await res.json(); } catch (e) { data = { error: `${res.status} ${res.statusText}` }; }
    if (!res.ok) {
      const err = new Error(data.error + (data.hint ? ` (${data.hint})` : ""));
      err.status = res.status;
      throw err;
    }
    return data;
  }

  function say(text, bad) {
    toast.textContent = text;
    toast.className = bad ? "show bad" : "show";
    clearTimeout(say.timer);
    say.timer = setTimeout(() => { toast.className = ""; }, 6000);
  }

  const day = (ts) => (ts || "").slice(0, 10);
  const when = (ts) => (ts || "").slice(0, 19).replace("T", " ");
  const plural = (n, word) => `${n.toLocaleString()} ${n === 1 ? word : /(s|x|ch|sh)$/.test(word) ? word + "es" : word + "s"}`;
  // A stored field as data: control characters (and bidi overrides) shown as escapes, never acted on.
  const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
  const shown = (v) => String(v ?? "").replace(CONTROL, (c) => {
    const n = c.charCodeAt(0);
    return n < 0x100 ? `\\x${n.toString(16).padStart(2, "0")}` : `\\u${n.toString(16).padStart(4, "0")}`;
  });
  const field = (v) => shown(v).replace(/[\t\n]/g, (c) => (c === "\t" ? "\\t" : "\\n"));
  // A scope as a label: a path scope by its last part (the project's folder), the whole in its title.
  const scopeLabel = (sc) => { const t = field(sc); return t.startsWith("/") ? (t.split("/").filter(Boolean).pop() || t) : t; };
  // A teammate's record: its author's name (the email left out), else its writer; null for one's own.
  function who(r) {
    if (!r.writer) return null;
    let a = r.author;
    if (a && typeof a === "object") a = a.name || a.email;
    const name = a ? String(a).split(" <")[0].trim() : "";
    return name || String(r.writer);
  }

  // Replace a node's children, skipping the empty slots (null, false) a view leaves.
  function put(node, ...children) {
    node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  }

  function badge(text, cls) { return el("span", { class: `badge ${cls || ""}`, text }); }

  function receiptLine(r) {
    const checks = Object.entries(r.checks || {}).map(([k, v]) => `${k} ${v ? "✓" : "✗"}`).join(" ");
    return `${r.id} (seq ${r.seq}) durable ${r.durable ? "✓" : "✗"}: ${checks}`;
  }

  // Highlight the query's words inside stored text, still as text nodes only.
  function highlighted(text, terms) {
    if (!terms || !terms.length) return [text];
    const stems = terms.map((t) => t.toLowerCase()).map((t) => (t.length > 4 ? t.slice(0, t.length - 2) : t));
    const out = [];
    const re = /[\p{L}\p{N}_]+/gu;
    let last = 0;
    let m;
    while ((m = re.exec(text)) !== null) {
      const word = m[0].toLowerCase();
      if (stems.some((s) => word.startsWith(s))) {
        if (m.index > last) out.push(text.slice(last, m.index));
        out.push(el("mark", { text: m[0] }));
        last = m.index + m[0].length;
      }
    }
    if (last < text.length) out.push(text.slice(last));
    return out;
  }

  // -- routing ------------------------------------------------------------------------------------
  function parseHash() {
    const raw = location.hash.replace(/^#/, "") || "/";
    const [path, query] = raw.split("?");
    const params = Object.fromEntries(new URLSearchParams(query || ""));
    return { path, params };
  }

  function listHash(filters) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    const s = q.toString();
    return "#/" + (s ? "?" + s : "");
  }

  async function route() {
    const { path, params } = parseHash();
    for (const a of document.querySelectorAll("[data-nav]")) {
      const on = (a.dataset.nav === "health") === path.startsWith("/health");
      if (on) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    try {
      if (path.startsWith("/r/")) await showRecord(decodeURIComponent(path.slice(3)));
      else if (path.startsWith("/health")) await showHealth();
      else await showList(params);
    } catch (e) {
      put(main, el("p", { class: "error", role: "alert", text: e.message }));
    }
  }

  // -- the list -----------------------------------------------------------------------------------
  function filterForm(filters) {
    const f = state.facets;
    const scopeSel = el("select", { id: "f-scope", name: "scope" },
      el("option", { value: "", text: `All memory, every scope (${f.current.toLocaleString()})` }),
      f.project ? el("option", { value: "here", selected: filters.scope === "here", text: `This project: ${field(f.project)} (${f.here_current.toLocaleString()})` }) : null,
      f.scopes.map((s) => el("option", { value: s.scope, selected: filters.scope === s.scope,
        text: `${scopeLabel(s.scope)}${s.here ? " (this project)" : ""} (${s.n.toLocaleString()})${scopeLabel(s.scope) !== field(s.scope) ? " · " + field(s.scope) : ""}` })));
    const kinds = [...new Set([...f.kinds_known, ...f.kinds])];
    const counts = state.kindCounts || {};
    const kindSel = el("select", { id: "f-kind", name: "kind" },
      el("option", { value: "", text: "All kinds" }),
      kinds.map((k) => el("option", { value: k, selected: filters.kind === k, dataset: { kind: k },
        text: k in counts || state.kindCounts ? `${field(k)} (${(counts[k] || 0).toLocaleString()})` : field(k) })));
    const label = (name, input) => el("label", { class: "field" }, el("span", { text: name }), input);
    const form = el("form", { class: "filters", role: "search", "aria-label": "Filter and search memory" },
      label("Search", el("input", { id: "f-q", name: "q", type: "search", value: filters.q || "", placeholder: "words or a question  ( / )", autocomplete: "off" })),
      label("Project / scope", scopeSel),
      label("Kind", kindSel),
      label("From", el("input", { id: "f-from", name: "from", type: "date", value: filters.from || "" })),
      label("To", el("input", { id: "f-to", name: "to", type: "date", value: filters.to || "" })),
      label("As of", el("input", { id: "f-as-of", name: "as_of", type: "datetime-local", step: "1", value: filters.as_of || "" })),
      el("label", { class: "check" }, el("input", { id: "f-history", name: "history", type: "checkbox", value: "1", checked: filters.history === "1" }),
        " history"),
      el("div", { class: "buttons" },
        el("button", { type: "submit", id: "f-apply", text: "Apply" }),
        el("button", { type: "button", class: "quiet", id: "f-clear", text: "Clear", onclick: () => { location.hash = "#/"; } })));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const data = Object.fromEntries(new FormData(form));
      location.hash = listHash(data);
    });
    for (const sel of form.querySelectorAll("select, input[type=checkbox]")) {
      sel.addEventListener("change", () => form.requestSubmit());
    }
    return form;
  }

  function recordItem(r, terms) {
    const author = who(r);
    const meta = el("div", { class: "meta" },
      badge(field(r.kind), `kind kind-${field(r.kind)}`),
      r.state && r.state !== "current" ? badge(r.state, `state state-${r.state}`) : null,
      el("span", { class: "scope", title: field(r.scope), dataset: { scope: r.scope }, text: scopeLabel(r.scope) }),
      author ? el("span", { class: "author", text: `by ${field(author)}` }) : null,
      el("time", { datetime: r.ts, text: day(r.ts) }),
      r.how ? el("span", { class: "how", text: r.how }) : null,
      el("code", { class: "rid", text: field(r.id) }));
    const text = r.state === "purged" ? [el("em", { text: "purged: no content kept" })] : highlighted(shown(r.text), terms);
    const more = r.chars > r.text.length ? "…" : "";
    return el("li", {},
      el("a", { class: "rec", href: `#/r/${encodeURIComponent(r.id)}`, dataset: { id: r.id } },
        meta, el("p", { class: "text" }, text, more)));
  }

  // One group of the list: a heading, its records newest first (the team order), its own "Load more".
  function group(id, title, data, params) {
    const list = el("ol", { class: "records", id: id === "main" ? "records" : `records-${id}` });
    list.append(...data.records.map((r) => recordItem(r)));
    const g = { rows: [...data.records], next: data.next, total: data.total };
    const count = el("span", { class: "count", text: ` · ${plural(data.total, "record")}` });
    const more = el("button", { type: "button", id: id === "main" ? "more" : `more-${id}`, class: "more", hidden: !g.next,
      text: "Load more", onclick: async () => {
        more.disabled = true;
        try {
          const page = await api(`/api/records?${params}&limit=${PAGE}&cursor=${encodeURIComponent(g.next)}`);
          list.append(...page.records.map((r) => recordItem(r)));
          g.rows.push(...page.records);
          g.next = page.next;
          more.hidden = !g.next;
          count.textContent = ` · ${plural(g.total, "record")}, ${g.rows.length.toLocaleString()} shown`;
        } catch (e) { say(e.message, true); } finally { more.disabled = false; }
      } });
    state.rows.push(...data.records);
    return el("section", { class: "group", "aria-labelledby": `h-group-${id}` },
      title ? el("h2", { id: `h-group-${id}`, class: "group-title" }, title, count) : null,
      data.records.length ? list : el("p", { class: "empty", text: emptyNote() }),
      more);
  }

  // An empty view never claims the store is empty unless it is.
  function emptyNote() {
    const f = state.facets || {};
    if (!f.records) return "The store holds no records yet.";
    return `No record in this view. The store holds ${plural(f.current || 0, "current record")} in ${plural((f.scopes || []).length, "scope")}: clear the filters to see all of them.`;
  }

  async function showList(params) {
    state.view = "list";
    const filters = { q: params.q || "", scope: params.scope || "", kind: params.kind || "", from: params.from || "",
      to: params.to || "", as_of: params.as_of || "", history: params.history || "" };
    state.filters = filters;
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v && k !== "q") q.set(k, v);
    const first = initial && !Object.values(filters).some(Boolean) ? initial : null;
    initial = null;  // the server's first screen serves the first view only
    const facets = first ? first.facets : state.facets || await api("/api/facets");
    state.facets = facets;
    state.rows = [];
    const plain = !Object.values(filters).some(Boolean);
    const grouped = plain && facets.here && facets.here.length;  // opened inside a project: it comes first
    let summary;
    let body;
    let warnings = [];
    if (filters.q) {
      const data = await api(`/api/search?${q}&q=${encodeURIComponent(filters.q)}`);
      const how = data.semantic ? ` · semantic ${data.semantic}` : "";
      summary = `${plural(data.total_matched, "match")}, ${data.hits.length} shown` +
        (data.match === "any" ? " (no record holds every word: showing records with any of them)" : "") +
        (data.filtered ? ` · ${data.filtered} outside the dates` : "") + how;
      const list = el("ol", { class: "records", id: "records" }, data.hits.map((h) => recordItem(h, data.terms)));
      state.rows = data.hits;
      body = data.hits.length ? list : el("p", { class: "empty", text: "Nothing matches these words. " + emptyNote().replace(/^No record in this view\. /, "") });
      warnings = data.warnings || [];
    } else if (grouped) {
      const [mine, others] = first && first.others ? [first.records, first.others]
        : await Promise.all([api(`/api/records?scope=here&limit=${PAGE}`), api(`/api/records?elsewhere=1&limit=${PAGE}`)]);
      summary = `${plural(mine.total + others.total, "record")} · all memory, this project first · newest first`;
      body = [group("here", `This project: ${field(facets.project)}`, mine, "scope=here"),
        group("elsewhere", "Other projects and global", others, "elsewhere=1")];
      warnings = [...new Set([...(mine.warnings || []), ...(others.warnings || [])])];
    } else {
      const data = first ? first.records : await api(`/api/records?${q}&limit=${PAGE}`);
      const what = filters.as_of ? `as of ${filters.as_of.replace("T", " ")}` : filters.history === "1" ? "all records, history included" : "current memory";
      const where = filters.scope === "here" ? "this project" : filters.scope ? field(filters.scope) : "every scope";
      summary = `${plural(data.total, "record")} · ${what} · ${where} · newest first`;
      body = group("main", null, data, q.toString());
      warnings = data.warnings || [];
    }
    const notes = [...(facets.corrupt || facets.breaks ? [`${facets.corrupt + facets.breaks} damaged line(s) or chain break(s): see Health`] : []),
      ...warnings];
    put(main,
      filterForm(filters),
      notes.length ? el("p", { class: "warn", role: "alert", text: notes.map(field).join(" · ") }) : null,
      el("p", { class: "summary", id: "summary", "aria-live": "polite", text: summary }),
      body);
    listFinish(summary);
  }

  function listFinish(summary) {
    document.title = `retained · ${summary}`;
    performance.mark("list-rendered");
    document.body.dataset.ready = "list";
    if (!state.kindCounts) fillKindCounts();
  }

  // Per-kind counts cost the server a scan at 100k records: fetched once the list is on screen.
  async function fillKindCounts() {
    try {
      state.kindCounts = (await api("/api/kinds")).kinds;
    } catch (e) { return; }
    for (const opt of document.querySelectorAll("#f-kind option[data-kind]")) {
      opt.textContent = `${opt.dataset.kind} (${(state.kindCounts[opt.dataset.kind] || 0).toLocaleString()})`;
    }
  }

  // -- one record ---------------------------------------------------------------------------------
  function dl(pairs) {
    return el("dl", { class: "pairs" }, pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => [el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : String(v))]));
  }

  const CORE = new Set(["seq", "id", "writer", "author", "ts", "kind", "text", "prev", "sha256", "scope", "source", "supersedes",
    "client_op_id", "retracted", "superseded_by", "forgotten"]);

  async function showRecord(id) {
    state.view = "record";
    const data = await api(`/api/record/${encodeURIComponent(id)}`);
    const rec = data.record || {};
    const row = data.row;
    const p = data.proof;
    const ok = (v) => el("span", { class: v ? "ok" : "bad", text: v ? "✓" : "✗" });
    let banner = null;
    if (data.damaged) banner = el("p", { class: "banner damaged", role: "alert",
      text: (data.warnings || []).find((w) => w.includes(row.id)) || "This record's line in the log is damaged: see Health." });
    else if (row.state === "purged") banner = el("p", { class: "banner purged", text: `Purged by ${row.retracted_by}: the bytes are gone; the line is a tombstone that keeps the chain.` });
    else if (rec.retracted) banner = el("p", { class: "banner retracted" }, `Retracted ${day(rec.retracted.ts)}`, rec.retracted.reason ? ` — ${rec.retracted.reason}` : "",
      rec.retracted.via ? ` (through its current version ${rec.retracted.via})` : "", ". Left out of search, list, brief and recall.");
    else if (row.superseded_by) banner = el("p", { class: "banner superseded" }, "Superseded: the current version is ",
      el("a", { href: `#/r/${encodeURIComponent(data.current)}`, text: data.current }), ".");
    const extra = Object.fromEntries(Object.entries(rec).filter(([k]) => !CORE.has(k)));
    const actions = el("div", { class: "actions", role: "group", "aria-label": "Actions" });
    const live = row.state === "current" && !data.damaged;
    if (live) actions.append(el("button", { type: "button", id: "edit", onclick: () => editForm(data), text: "Edit (supersede)" }, el("kbd", { text: "e" })));
    if (live) actions.append(el("button", { type: "button", id: "retract", onclick: () => retractDialog(data), text: "Retract" }, el("kbd", { text: "r" })));
    if (rec.retracted && !rec.retracted.via) actions.append(el("button", { type: "button", id: "undo", onclick: () => undo(data), text: "Undo retraction" }, el("kbd", { text: "u" })));
    if (row.state !== "purged" && row.state !== "forget" && !data.damaged) actions.append(el("button", { type: "button", id: "purge", class: "danger", onclick: () => purgeDialog(data), text: "Purge…" }, el("kbd", { text: "p" })));
    const history = el("ol", { class: "history", id: "history" },
      data.chain.map((c) => el("li", { class: c.id === row.id ? "this" : "" },
        el("a", { href: `#/r/${encodeURIComponent(c.id)}` }, el("code", { text: c.id })), " ",
        badge(c.state, `state state-${c.state}`), " ", el("time", { datetime: c.ts, text: when(c.ts) }), " ",
        c.supersedes ? el("span", { class: "muted", text: `supersedes ${c.supersedes} · ` }) : null,
        el("span", { class: "snippet", text: c.state === "purged" ? "(purged)" : c.text }))),
      data.forgets.map((f) => el("li", { class: "forget" },
        el("code", { text: f.id }), " ", badge(f.action, `state state-${f.action}`), " ", el("time", { datetime: f.ts, text: when(f.ts) }),
        " ", el("span", { class: "snippet", text: `${f.targets.join(", ")}${f.reason ? " — " + f.reason : ""}` }))));
    put(main, 
      el("p", {}, el("a", { href: listHash(state.filters || {}), id: "back" }, "← Back to the list ", el("kbd", { text: "Esc" }))),
      el("h2", {}, badge(field(row.kind), `kind kind-${field(row.kind)}`), " ", el("code", { text: field(row.id) })),
      banner,
      el("section", { "aria-labelledby": "h-text" }, el("h3", { id: "h-text", class: "sr-only", text: "Text" }),
        el("div", { class: "fulltext", id: "fulltext", tabindex: "0", text: row.state === "purged" ? "" : shown(rec.text ?? "") })),
      actions,
      el("div", { id: "editor" }),
      el("section", { "aria-labelledby": "h-meta" }, el("h3", { id: "h-meta", text: "Record" }),
        dl([["Scope", field(rec.scope || row.scope)], ["Author", who(rec.writer ? rec : row) ? field(who(rec.writer ? rec : row)) : null],
          ["Written", when(rec.ts || row.ts)], ["Source", field(rec.source ?? "")], ["Supersedes", rec.supersedes],
          ["Superseded by", row.superseded_by], ["Client op id", rec.client_op_id],
          ["Other fields", Object.keys(extra).length ? el("pre", { class: "fields", text: JSON.stringify(extra, null, 2) }) : null]])),
      el("section", { "aria-labelledby": "h-proof", id: "proof" }, el("h3", { id: "h-proof", text: "Proof" }),
        dl([["Seq", p.seq], ["SHA-256", el("code", { class: "hash", text: p.sha256 })], ["Prev", el("code", { class: "hash", text: p.prev || "" })],
          ["Place", `line ${p.line}, byte ${p.offset.toLocaleString()}, ${p.bytes} bytes`],
          ["Own hash", p.tombstone ? el("span", { text: "tombstone: vouched for by the purge record and the next line's prev" }) : el("span", {}, ok(p.hash_ok), p.hash_ok ? " recomputed, matches" : " does not match")],
          ["Link", el("span", {}, ok(p.link_ok), p.link_ok ? " prev is the previous record's sha256" : " does not link to the previous line")],
          ["Chain", el("span", {}, ok(p.chain_ok), p.chain_ok ? " the whole log links up" : ` ${p.chain_problems} problem(s) in the log: see Health`)]])),
      el("section", { "aria-labelledby": "h-history" }, el("h3", { id: "h-history", text: "History" }), history));
    document.title = `retained · ${row.id}`;
    document.body.dataset.ready = "record";
    main.focus({ preventScroll: true });
  }

  function editForm(data) {
    const row = data.row;
    const holder = document.getElementById("editor");
    const area = el("textarea", { id: "edit-text", rows: 8, "aria-label": "New text" });
    area.value = data.record.text;
    const kinds = new Set([...state.facets?.kinds_known || [], row.kind]);
    const kind = el("select", { id: "edit-kind", "aria-label": "Kind" }, [...kinds].map((k) => el("option", { value: k, selected: k === row.kind, text: k })));
    const form = el("form", { class: "editor" },
      el("p", { class: "muted", text: "Saving writes a new record that supersedes this one; this version stays in the history." }),
      area, el("div", { class: "buttons" }, kind,
        el("button", { type: "submit", id: "edit-save", text: "Save correction" }),
        el("button", { type: "button", class: "quiet", text: "Cancel", onclick: () => put(holder) })));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const r = await api(`/api/record/${encodeURIComponent(row.id)}/supersede`, { text: area.value, kind: kind.value });
        say(`Saved ${receiptLine(r)}`, !r.durable);
        state.facets = null; state.kindCounts = null;
        location.hash = `#/r/${encodeURIComponent(r.id)}`;
      } catch (e) { say(e.message, true); }
    });
    put(holder, form);
    area.focus();
  }

  function openDialog(title, body, confirmText, onConfirm, danger) {
    const confirm = el("button", { type: "submit", id: "dialog-confirm", class: danger ? "danger" : "", text: confirmText });
    const form = el("form", { method: "dialog" },
      el("h2", { id: "dialog-title", text: title }), body,
      el("div", { class: "buttons" }, confirm, el("button", { type: "button", class: "quiet", id: "dialog-cancel", text: "Cancel", onclick: () => dialog.close() })));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      confirm.disabled = true;
      try { await onConfirm(form); dialog.close(); } catch (e) { say(e.message, true); confirm.disabled = false; }
    });
    put(dialog, form);
    dialog.showModal();
    (form.querySelector("input, textarea") || confirm).focus();
  }

  function retractDialog(data) {
    const reason = el("input", { id: "reason", type: "text", "aria-label": "Reason", placeholder: "why it should no longer be used" });
    openDialog(`Retract ${data.row.id}?`, [el("p", { text: "It leaves search, list, the brief and recall; it stays in the log and Undo brings it back." }),
      el("label", { class: "field" }, el("span", { text: "Reason" }), reason)], "Retract", async () => {
      const r = await api("/api/forget", { ids: [data.row.id], reason: reason.value });
      say(`Retracted: ${receiptLine(r)}`, !r.durable);
      state.facets = null; state.kindCounts = null;
      await route();
    });
  }

  async function undo(data) {
    try {
      const r = await api("/api/unforget", { ids: [data.row.id] });
      say(`Brought back: ${receiptLine(r)}`, !r.durable);
      state.facets = null; state.kindCounts = null;
      await route();
    } catch (e) { say(e.message, true); }
  }

  function purgeDialog(data) {
    const row = data.row;
    const older = data.chain.filter((c) => c.id !== row.id && c.state !== "purged" && c.line < row.line);
    const item = (c, checked, locked) => el("li", {},
      el("label", {}, el("input", { type: "checkbox", name: "ids", value: c.id, checked, disabled: locked }),
        " ", el("code", { text: c.id }), ` · ${c.kind} · ${day(c.ts)} · `, el("span", { class: "snippet", text: c.text.slice(0, 120) })));
    const list = el("ul", { class: "purge-list", id: "purge-list" }, item(row, true, true), older.map((c) => item(c, false, false)));
    const reason = el("input", { id: "purge-reason", type: "text", "aria-label": "Reason", placeholder: "e.g. a leaked credential" });
    const chosen = () => [row.id, ...[...list.querySelectorAll("input:checked:not([disabled])")].map((i) => i.value)];
    const confirmLabel = () => `Purge ${chosen().length === 1 ? row.id : plural(chosen().length, "record")} permanently`;
    openDialog("Purge for good?", [
      el("p", { class: "warn", text: "This removes the bytes of the records below from every file of the store. It cannot be undone; the log keeps a tombstone (id, seq, date, hash) so the chain still verifies." }),
      list,
      older.length ? el("p", { class: "muted", text: "Older versions of this record keep their own text unless ticked." }) : null,
      el("label", { class: "field" }, el("span", { text: "Reason (kept, without the content)" }), reason),
    ], confirmLabel(), async () => {
      const ids = chosen();
      const r = await api("/api/purge", { ids, confirm: ids, reason: reason.value });
      say(`Purged ${ids.join(", ")}: ${receiptLine(r)}`, !r.durable);
      state.facets = null; state.kindCounts = null;
      await route();
    }, true);
    list.addEventListener("change", () => { document.getElementById("dialog-confirm").textContent = confirmLabel(); });
  }

  // -- health -------------------------------------------------------------------------------------
  async function showHealth() {
    state.view = "health";
    put(main, el("h2", { text: "Store health" }), el("p", { class: "loading", text: "Verifying the chain…" }));
    const h = await api("/api/health");
    const ok = h.intact;
    const problems = [...h.corrupt_lines, ...h.chain_breaks];
    const doctorBox = el("section", { id: "doctor", "aria-labelledby": "h-doctor", "aria-busy": "true" },
      el("h3", { id: "h-doctor", text: "Hosts" }), el("p", { class: "loading", text: "Running doctor (it starts each wired host's server and hooks)…" }));
    put(main, 
      el("h2", { text: "Store health" }),
      el("section", { id: "verify", "aria-labelledby": "h-verify" }, el("h3", { id: "h-verify", text: "Verify" }),
        el("p", { class: ok ? "banner good" : "banner bad", id: "verify-summary",
          text: `${ok ? "Intact" : "NOT INTACT"}: ${plural(h.records, "record")}, chain ${h.chain_ok ? "ok" : "broken"}, index coverage ${(h.coverage * 100).toFixed(1)}%, last seq ${h.last_seq}` }),
        h.first_break ? el("p", { text: `First break: seq ${h.first_break.seq} at line ${h.first_break.line}: ${h.first_break.reason}` }) : null,
        problems.length ? el("table", { id: "damaged" }, el("caption", { text: "Damaged lines and breaks" }),
          el("thead", {}, el("tr", {}, ["Line", "Seq", "What", "Why"].map((t) => el("th", { scope: "col", text: t })))),
          el("tbody", {}, problems.map((p) => el("tr", {}, [p.line, p.seq ?? "", p.kind, p.reason].map((t) => el("td", { text: String(t) })))))) : el("p", { text: "No damaged line, no break." }),
        h.torn_tail ? el("p", { text: `Torn tail: ${h.torn_tail.bytes} bytes after the last complete line (an unacknowledged write).` }) : null,
        el("h4", { text: "Quarantine" }),
        h.quarantine.length ? el("ul", { id: "quarantine" }, h.quarantine.map((q) => el("li", {}, el("code", { text: q.name }), ` · ${q.bytes} bytes · ${q.mtime}`)))
          : el("p", { id: "quarantine", text: "Empty." }),
        h.fixes.length ? [el("h4", { text: "Fix" }), el("ul", { class: "fixes" }, h.fixes.map((f) => el("li", {}, el("code", { text: f }))))] : null),
      (h.team || []).length ? el("section", { id: "team", "aria-labelledby": "h-team" }, el("h3", { id: "h-team", text: "Team memory" }),
        el("table", { id: "team-projects" }, el("caption", { text: "Shared projects" }),
          el("thead", {}, el("tr", {}, ["Project", "Remote", "Last sync", "Outcome", "Writers seen", "Pending push", "Open conflicts"].map((t) => el("th", { scope: "col", text: t })))),
          el("tbody", {}, h.team.map((t) => el("tr", {}, [t.project, t.remote, t.last_sync || "never", t.last_sync ? (t.last_ok ? "ok" : `failed: ${t.last_error}`) : "",
            String(t.writers.length), String(t.pending), String(t.conflicts)].map((v) => el("td", { text: String(v) }))))))) : null,
      doctorBox);
    document.body.dataset.ready = "health";
    try {
      const d = await api("/api/doctor?refresh=1");
      const hosts = d.hosts.map((host) => {
        const failed = host.checks.filter((c) => !c.ok);
        return el("li", { class: "host" },
          el("h4", {}, host.host, " ", host.host === "store" ? null : badge(host.wired ? "wired" : "not wired", host.wired ? "good" : "muted"),
            " ", host.checks.length ? badge(failed.length ? `${failed.length} failing` : "all checks pass", failed.length ? "bad" : "good") : null),
          failed.length ? el("ul", {}, failed.map((c) => el("li", {}, `✗ ${c.check}${c.detail ? " — " + c.detail : ""}`,
            c.fix ? [el("br"), "fix: ", el("code", { text: c.fix })] : null))) : null,
          host.native ? el("p", { class: "native" }, el("strong", { text: "Own memory: " }), host.native.summary,
            el("br"), "move it: ", el("code", { text: host.native.fix.split(" (")[0] })) : null);
      });
      put(doctorBox, el("h3", { id: "h-doctor", text: "Hosts" }),
        el("p", { class: d.ok ? "banner good" : "banner bad", id: "doctor-summary", text: d.ok ? "doctor: every check passes" : "doctor: some checks fail (fixes below)" }),
        d.error ? el("p", { class: "warn", text: d.error }) : null,
        el("ul", { class: "hosts" }, hosts));
    } catch (e) {
      put(doctorBox, el("h3", { text: "Hosts" }), el("p", { class: "error", text: e.message }));
    }
    doctorBox.setAttribute("aria-busy", "false");
    document.body.dataset.doctor = "done";
  }

  // -- keyboard -----------------------------------------------------------------------------------
  function helpDialog() {
    const keys = [["/", "search"], ["j / ↓", "next record"], ["k / ↑", "previous record"], ["Enter", "open"], ["Esc", "back to the list"],
      ["e", "edit (supersede)"], ["r", "retract"], ["u", "undo a retraction"], ["p", "purge…"], ["g h", "health"], ["g m", "memory"], ["?", "this help"]];
    put(dialog, el("form", { method: "dialog" }, el("h2", { id: "dialog-title", text: "Keyboard" }),
      el("dl", { class: "pairs keys" }, keys.map(([k, v]) => [el("dt", {}, el("kbd", { text: k })), el("dd", { text: v })])),
      el("div", { class: "buttons" }, el("button", { type: "submit", text: "Close" }))));
    dialog.showModal();
  }

  function move(delta) {
    const items = [...document.querySelectorAll("a.rec")];
    if (!items.length) return;
    const i = items.indexOf(document.activeElement);
    const next = items[Math.max(0, Math.min(items.length - 1, i < 0 ? 0 : i + delta))];
    next.focus();
  }

  let pendingG = false;
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const typing = ev.target.closest && ev.target.closest("input, textarea, select, [contenteditable]");
    if (dialog.open) return;  // the dialog handles its own keys (Esc closes it)
    if (ev.key === "Escape") {
      if (typing) { ev.target.blur(); return; }
      if (state.view !== "list") { ev.preventDefault(); location.hash = listHash(state.filters || {}); }
      return;
    }
    if (typing) return;
    const click = (id) => { const b = document.getElementById(id); if (b) { ev.preventDefault(); b.click(); } };
    if (pendingG) {
      pendingG = false;
      if (ev.key === "h") { location.hash = "#/health"; return; }
      if (ev.key === "m") { location.hash = listHash(state.filters || {}); return; }
    }
    switch (ev.key) {
      case "/": { const q = document.getElementById("f-q"); if (q) { ev.preventDefault(); q.focus(); q.select(); } break; }
      case "j": case "ArrowDown": if (state.view === "list") { ev.preventDefault(); move(1); } break;
      case "k": case "ArrowUp": if (state.view === "list") { ev.preventDefault(); move(-1); } break;
      case "e": click("edit"); break;
      case "r": click("retract"); break;
      case "u": click("undo"); break;
      case "p": click("purge"); break;
      case "g": pendingG = true; setTimeout(() => { pendingG = false; }, 1200); break;
      case "?": ev.preventDefault(); helpDialog(); break;
      default: break;
    }
  });
  document.getElementById("help-button").addEventListener("click", helpDialog);
  // A click on the view already shown shows it again, checked anew (Health verifies and runs doctor again).
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.addEventListener("click", (ev) => {
      if (a.getAttribute("href") === (location.hash || "#/")) { ev.preventDefault(); route(); }
    });
  }
  window.addEventListener("hashchange", route);
  route();
})();
