"""`retained maintain`: what a store's memory could lose without losing anything, dry-run first.

The report changes no file (the store is opened read-only). `apply` does only what is provably safe:
it retracts exact duplicates (same normalised text, kind and scope as an older current record),
keeping the oldest, with a retraction record that says why (reversible with `forget --undo`).
Everything judgmental (near duplicates, long chains, old records) is reported for a person to decide.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

from . import records

OLD_DAYS = 90
NEAR_CAP = 500  # current records per scope compared for near duplicates (pairs are quadratic)


def report(store: Any, *, old_days: int = OLD_DAYS) -> dict[str, Any]:
    """Per scope: exact and near duplicates, collapsible chains, retracted/superseded counts, old records."""
    store.index.catch_up()
    q = store.index.query
    scopes: dict[str, dict[str, Any]] = {}

    def entry(scope: str) -> dict[str, Any]:
        return scopes.setdefault(scope, {"scope": scope, "current": 0, "superseded": 0, "retracted": 0,
                                         "purged": 0, "exact_duplicates": [], "near_duplicates": [],
                                         "collapsible_chains": [], "old": 0})

    for row in q("SELECT scope, SUM(superseded_by IS NULL AND hidden = 0) AS cur, SUM(superseded_by IS NOT NULL)"
                 " AS sup, SUM(retracted_by IS NOT NULL AND tomb = 0) AS ret, SUM(tomb) AS pur"
                 " FROM records WHERE kind != ? GROUP BY scope", (records.FORGET_KIND,)):
        e = entry(row["scope"])
        e.update(current=int(row["cur"] or 0), superseded=int(row["sup"] or 0), retracted=int(row["ret"] or 0),
                 purged=int(row["pur"] or 0))
    for row in q("SELECT scope, kind, text_key, GROUP_CONCAT(id) AS ids, COUNT(*) AS n FROM records"
                 " WHERE superseded_by IS NULL AND hidden = 0 AND text_key IS NOT NULL"
                 " GROUP BY scope, kind, text_key HAVING n > 1"):
        ids = _in_log_order(store, row["ids"].split(","))
        entry(row["scope"])["exact_duplicates"].append({"kind": row["kind"], "keep": ids[0], "duplicates": ids[1:]})
    for row in q("SELECT h.scope, h.id AS head, COUNT(*) AS n FROM records r JOIN records h ON h.line = r.head"
                 " WHERE h.hidden = 0 GROUP BY r.head HAVING n > 2"):
        entry(row["scope"])["collapsible_chains"].append({"head": row["head"], "records": int(row["n"])})
    cutoff = (datetime.now(timezone.utc) - timedelta(days=old_days)).strftime("%Y-%m-%dT%H:%M:%S")
    for row in q("SELECT scope, COUNT(*) AS n FROM records WHERE superseded_by IS NULL AND hidden = 0 AND ts < ?"
                 " GROUP BY scope", (cutoff,)):
        entry(row["scope"])["old"] = int(row["n"])
    for scope, e in scopes.items():
        e["near_duplicates"] = _near(store, scope)
    out = sorted(scopes.values(), key=lambda e: (-e["current"], e["scope"]))
    totals = {k: sum(len(e[k]) if isinstance(e[k], list) else e[k] for e in out)
              for k in ("current", "superseded", "retracted", "purged", "exact_duplicates", "near_duplicates",
                        "collapsible_chains", "old")}
    return {"scopes": out, "totals": totals, "old_days": old_days,
            "note": ("'old' counts current records written more than "
                     f"{old_days} days ago: retained does not record reads, so age stands in for 'nothing read it'")}


def _in_log_order(store: Any, ids: list[str]) -> list[str]:
    rows = store.index.query(f"SELECT id FROM records WHERE id IN ({','.join('?' * len(ids))}) ORDER BY line", ids)
    return [r["id"] for r in rows]


def _near(store: Any, scope: str) -> list[dict[str, Any]]:
    rows = store.index.query("SELECT id, kind, text FROM records WHERE scope = ? AND superseded_by IS NULL"
                             " AND hidden = 0 ORDER BY line DESC LIMIT ?", (scope, NEAR_CAP))
    norm = [(r["id"], r["kind"], records.near_form(r["text"])) for r in rows]
    pairs = []
    for i, (a, ka, ta) in enumerate(norm):
        for b, kb, tb in norm[i + 1:]:
            if ta == tb and ka == kb:
                continue  # exact: reported above
            ratio = records.closeness(ta, tb, min_length_ratio=records.NEAR_RATIO)
            if ratio is not None:
                pairs.append({"ids": [b, a], "similarity": round(ratio, 2)})
    return pairs


def apply(store: Any) -> dict[str, Any]:
    """Retract every exact duplicate, keeping the oldest of each group. Returns the report and what was done."""
    plan = report(store)
    done = []
    for e in plan["scopes"]:
        for group in e["exact_duplicates"]:
            receipt = store.forget(group["duplicates"], f"exact duplicate of {group['keep']} (retained maintain)")
            done.append({"kept": group["keep"], "retracted": receipt.get("targets", []), "by": receipt["id"],
                         "durable": receipt["durable"]})
    return {"report": plan, "applied": done}
