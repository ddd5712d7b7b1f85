"""Retrieval eval: hit@1 / hit@3 per question kind for lexical, semantic (meaning only) and the blend.

    python bench/eval/run_eval.py [--set bench/eval/team.json] [--json]

The set (team.json) was written for retained: memories of a software team in two projects plus global
facts, and questions that share words with their memory (lexical), share none (paraphrase), name an
identifier, depend on the scope, or have no answer. A scope question sees only its scope's memories;
the others see every scope. For the no-answer questions it reports the top cosine and whether the
prompt hook's recall stayed silent; for the answerable ones, whether recall would inject the answer.
Tune only on this set; an independent held-out set is run from the outside.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

KINDS = ("lexical", "paraphrase", "identifier", "scope")


def _stems(text: str) -> set[str]:
    from retained.index import STOPWORDS

    return {w[:5] for w in re.findall(r"\w+", text.lower()) if w not in STOPWORDS and len(w) > 2}


def _lines_of(store) -> dict[str, int]:
    """Record id -> its line (the key vectors are stored under), read from the index file itself."""
    import sqlite3

    db = sqlite3.connect(store.index.path)
    try:
        return dict(db.execute("SELECT id, line FROM records"))
    finally:
        db.close()


def build(directory: Path, memories: list[dict], embed: str):
    os.environ["RETAINED_EMBED"] = embed
    from retained.store import Store

    store = Store(directory)
    ids = {}
    for m in memories:
        ids[m["id"]] = store.write(m["text"], scope=m["scope"])["id"]
    store.embed_all()
    return store, ids


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default=str(Path(__file__).with_name("team.json")))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    data = json.loads(Path(args.set).read_text())
    memories, questions = data["memories"], data["questions"]
    by_id = {m["id"]: m for m in memories}
    overlap = [q["q"] for q in questions if q["kind"] == "paraphrase" and _stems(q["q"]) & _stems(by_id[q["answer"]]["text"])]

    import numpy as np

    from retained.recall import recall

    results: dict[str, dict[str, list[int]]] = {}
    extra: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lex_store, lex_ids = build(Path(tmp) / "lexical", memories, "off")
        store, ids = build(Path(tmp) / "semantic", memories, "local")
        back = {v: k for k, v in ids.items()}
        lex_back = {v: k for k, v in lex_ids.items()}
        sem = store.semantic()
        lines, _, _ = sem.similarities(sem.query_vector("warm up"))
        line_of = _lines_of(store)
        mem_of_line = {line_of[ids[m]]: m for m in ids}
        recall_hits = recall_total = recall_other = 0
        none_cos, none_silent, answer_cos = [], 0, []
        for q in questions:
            scopes = [q["scope"]] if q["kind"] == "scope" else None
            ranked: dict[str, list[str]] = {}
            ranked["lexical"] = [lex_back[h["id"]] for h in lex_store.search(q["q"], scopes=scopes, k=3)["hits"]]
            ranked["blend"] = [back[h["id"]] for h in store.search(q["q"], scopes=scopes, k=3)["hits"]]
            lines, sims, _ = sem.similarities(sem.query_vector(q["q"]))
            order = [mem_of_line[int(lines[i])] for i in np.argsort(-sims)]
            ranked["semantic"] = [m for m in order if scopes is None or by_id[m]["scope"] in scopes][:3]
            got = recall(store, q["q"], project=q.get("scope"), shown=set())
            if q["kind"] == "none":
                none_cos.append(round(float(sims.max()), 3))
                none_silent += got is None
                continue
            recall_total += 1
            answer_cos.append(round(float(sims[[i for i in range(len(lines)) if mem_of_line[int(lines[i])] == q["answer"]][0]]), 3))
            recall_hits += bool(got and ids[q["answer"]] in got["ids"])
            recall_other += bool(got and ids[q["answer"]] not in got["ids"])
            for method, top in ranked.items():
                cell = results.setdefault(method, {}).setdefault(q["kind"], [0, 0, 0])
                cell[0] += bool(top[:1] == [q["answer"]])
                cell[1] += q["answer"] in top[:3]
                cell[2] += 1
        extra = {"no_answer_top_cosine": none_cos, "answer_cosine_lowest": sorted(answer_cos)[:8], "recall_silent_on_no_answer": f"{none_silent}/{len(none_cos)}",
                 "recall_injects_the_answer": f"{recall_hits}/{recall_total}",
                 "recall_injects_only_other_records": f"{recall_other}/{recall_total}",
                 "paraphrases_sharing_a_word": overlap}
        lex_store.close()
        store.close()
    if args.json:
        print(json.dumps({"results": results, **extra}, indent=2))
        return 0
    print(f"retrieval eval: {len(memories)} memories, {len(questions)} questions ({Path(args.set).name})")
    print(f"{'method':<10}" + "".join(f"{k:>16}" for k in (*KINDS, "overall")))
    for method in ("lexical", "semantic", "blend"):
        row = results[method]
        tot = [sum(row[k][i] for k in KINDS) for i in range(3)]
        cells = [f"{row[k][0]}/{row[k][1]} of {row[k][2]}" for k in KINDS] + [f"{tot[0]}/{tot[1]} of {tot[2]}"]
        print(f"{method:<10}" + "".join(f"{c:>16}" for c in cells))
    print("cells are hit@1/hit@3 of n")
    for key, value in extra.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
