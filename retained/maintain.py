"""`retained maintain`: what a store's memory could lose without losing anything, dry-run first.

The report changes no file (the store is opened read-only). `apply` does only what is provably safe:
it retracts exact duplicates (same normalised text, kind and scope as an older current record),
keeping the oldest, with a retraction record that says why (reversible with `forget --undo`).
Everything judgmental (near duplicates, long chains, old records) is reported for a person to decide.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from . import records
from .store import Store

OLD_DAYS = 90
NEAR_CAP = 500  # current records per scope compared for near duplicates (pairs are quadratic)
LISTED = 20  # pairs and chains a person is shown per scope (the JSON holds them all)


def report(store: Store, *, old_days: int = OLD_DAYS) -> dict[str, Any]:
    """Per scope: exact and near duplicates, collapsible chains, retracted/superseded counts, old records."""
    store.index.catch_up()
    index = store.index
    scopes: dict[str, dict[str, Any]] = {}

    def entry(scope: str) -> dict[str, Any]:
        return scopes.setdefault(scope, {"scope": scope, "current": 0, "superseded": 0, "retracted": 0,
                                         "purged": 0, "exact_duplicates": [], "near_duplicates": [],
                                         "collapsible_chains": [], "old": 0})

    for row in index.scope_summary():
        entry(row["scope"]).update(current=int(row["cur"] or 0), superseded=int(row["sup"] or 0),
                                   retracted=int(row["ret"] or 0), purged=int(row["pur"] or 0))
    for row in index.exact_duplicate_groups():
        ids = index.in_log_order(row["ids"].split(","))
        entry(row["scope"])["exact_duplicates"].append({"kind": row["kind"], "keep": ids[0], "duplicates": ids[1:]})
    for row in index.long_chains(2):
        entry(row["scope"])["collapsible_chains"].append({"head": row["head"], "records": int(row["n"])})
    cutoff = (datetime.now(timezone.utc) - timedelta(days=old_days)).strftime("%Y-%m-%dT%H:%M:%S")
    for scope, n in index.old_counts(cutoff).items():
        entry(scope)["old"] = n
    for scope, e in scopes.items():
        e["near_duplicates"] = _near(store, scope)
        e["near_compared"] = min(e["current"], NEAR_CAP)
    out = sorted(scopes.values(), key=lambda e: (-e["current"], e["scope"]))
    totals = {k: sum(len(e[k]) if isinstance(e[k], list) else e[k] for e in out)
              for k in ("current", "superseded", "retracted", "purged", "exact_duplicates", "near_duplicates",
                        "collapsible_chains", "old")}
    forks = index.open_forks()  # issue 19: records two writers superseded concurrently
    return {"scopes": out, "totals": totals, "old_days": old_days, "forks": forks,
            "note": ("'old' counts current records written more than "
                     f"{old_days} days ago: retained does not record reads, so age stands in for 'nothing read it'")}


def _near(store: Store, scope: str) -> list[dict[str, Any]]:
    rows = store.index.current_texts(scope, NEAR_CAP)
    norm = [(r["id"], r["kind"], records.near_form(r["text"])) for r in rows]
    prepared = [records.Near(t) for _, _, t in norm]
    pairs = []
    for i, (a, ka, ta) in enumerate(norm):
        for b, kb, tb in norm[i + 1:]:
            if ta == tb and ka == kb:
                continue  # exact: reported above
            if ka == kb == "checkpoint":
                continue  # a series of checkpoints of one piece of work reads alike by design
            ratio = prepared[i].closeness(tb, min_length_ratio=records.NEAR_RATIO)
            if ratio is not None:
                pairs.append({"ids": [b, a], "similarity": round(ratio, 2)})
    return pairs


def apply(store: Store) -> dict[str, Any]:
    """Retract every exact duplicate, keeping the oldest of each group. Returns the report and what was done."""
    plan = report(store)
    done = []
    for e in plan["scopes"]:
        for group in e["exact_duplicates"]:
            receipt = store.forget(group["duplicates"], f"exact duplicate of {group['keep']} (retained maintain)")
            done.append({"kept": group["keep"], "retracted": receipt.get("targets", []), "by": receipt["id"],
                         "durable": receipt["durable"]})
    return {"report": plan, "applied": done}
