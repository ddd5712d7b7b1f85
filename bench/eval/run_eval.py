"""Retrieval and recall eval: hit@1 / hit@3 per question kind for words, meaning and the blend, and
the prompt hook's recall on answerable and unrelated prompts, per split.

    python bench/eval/run_eval.py [--set bench/eval/team.json ...] [--json]

Two sets, both written for retained (without --set, both run):
* team.json: memories of a software team in two projects plus global facts, and questions that share
  words with their memory (lexical), share none (paraphrase), name an identifier, depend on the
  scope, or have no answer. The semantic tier was tuned on it: all of it counts as `dev`.
* platform.json (issue 18): another team's memories, some corrected by a later record (supersedes),
  questions of the same kinds plus "what did we decide about X" (decision), and prompts as users
  type them to an agent, answerable (short, paraphrased) or unrelated. Every question and prompt has
  a split: `dev` was used for tuning, `heldout` never was, and both are reported.

A scope question sees only its scope's memories; the others see every scope. A recall prompt is
asked in its project (plus global). Figures:
* hit@1 / hit@3 per kind and split; the obsolete-decision rate (ODR): answerable questions whose top
  three hold a record that a later record corrected;
* recall on answerable prompts (the answer is among the injected records), wrong injections (only
  other records injected) and abstention on unrelated prompts (nothing injected).
An independent held-out set is run from the outside.
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
# RETAINED_EVAL_TREE: evaluate another checkout's retained (a same-run baseline) with these sets.
sys.path.insert(0, os.environ.get("RETAINED_EVAL_TREE") or str(ROOT))

HERE = Path(__file__).parent
SETS = (HERE / "team.json", HERE / "platform.json", HERE / "recall.json", HERE / "sources.json")
METHODS = ("lexical", "semantic", "blend")


def _stems(text: str) -> set[str]:
    from retained.index import STOPWORDS

    return {w[:5] for w in re.findall(r"\w+", text.lower()) if w not in STOPWORDS and len(w) > 2}


def build(directory: Path, memories: list[dict], embed: str):
    """A store holding the memories (corrections written after the records they correct)."""
    os.environ["RETAINED_EMBED"] = embed
    from retained.store import Store

    store = Store(directory)
    ids: dict[str, str] = {}
    for m in sorted(memories, key=lambda m: "supersedes" in m):
        kw = {"scope": m["scope"]}
        if m.get("source"):
            kw["source"] = m["source"]
        if "supersedes" in m:
            kw["supersedes"] = ids[m["supersedes"]]
        ids[m["id"]] = store.write(m["text"], **kw)["id"]
    store.embed_all()
    return store, ids


class Eval:
    def __init__(self, data: dict, tmp: Path) -> None:
        self.memories, self.questions = data["memories"], data["questions"]
        self.prompts = data.get("prompts", [])
        self.by_id = {m["id"]: m for m in self.memories}
        self.obsolete = {m["supersedes"] for m in self.memories if "supersedes" in m}
        self.lex_store, lex_ids = build(tmp / "lexical", self.memories, "off")
        self.store, self.ids = build(tmp / "semantic", self.memories, "local")
        self.back = {v: k for k, v in self.ids.items()}
        self.lex_back = {v: k for k, v in lex_ids.items()}
        # the line each memory's vector is stored under
        self.mem_of_line = {self.store.index.by_id(rid)["line"]: m for m, rid in self.ids.items()}

    def close(self) -> None:
        self.lex_store.close()
        self.store.close()

    def ranked(self, q: dict) -> dict[str, list[str]]:
        import numpy as np

        scopes = [q["scope"]] if q["kind"] == "scope" else None
        sem = self.store.semantic()
        lines, sims, _ = sem.similarities(sem.query_vector(q["q"]))
        order = [self.mem_of_line[int(lines[i])] for i in np.argsort(-sims)]
        current = [m for m in order if m not in self.obsolete]
        return {"lexical": [self.lex_back[h["id"]] for h in self.lex_store.search(q["q"], scopes=scopes, k=3)["hits"]],
                "semantic": [m for m in current if scopes is None or self.by_id[m]["scope"] in scopes][:3],
                "blend": [self.back[h["id"]] for h in self.store.search(q["q"], scopes=scopes, k=3)["hits"]]}

    def retrieval(self) -> dict:
        from retained.recall import recall

        cells: dict[str, dict[str, dict[str, list[int]]]] = {}
        odr = [0, 0]
        rec = {"answer": 0, "other": 0, "of": 0, "silent_on_none": 0, "none": 0}
        for q in self.questions:
            if "sources" in q:  # judged by gold_sources
                continue
            split = q.get("split", "dev")
            got = recall(self.store, q["q"], project=q.get("scope"), shown=set())
            if q["kind"] == "none":
                rec["none"] += 1
                rec["silent_on_none"] += got is None
                continue
            rec["of"] += 1
            rec["answer"] += bool(got and self.ids[q["answer"]] in got["ids"])
            rec["other"] += bool(got and self.ids[q["answer"]] not in got["ids"])
            ranked = self.ranked(q)
            odr[0] += any(m in self.obsolete for m in ranked["blend"])
            odr[1] += 1
            for method, top in ranked.items():
                cell = cells.setdefault(method, {}).setdefault(split, {}).setdefault(q["kind"], [0, 0, 0])
                cell[0] += top[:1] == [q["answer"]]
                cell[1] += q["answer"] in top[:3]
                cell[2] += 1
        return {"results": cells, "odr": odr, "question_recall": rec}

    def gold_sources(self) -> dict:
        """Questions over long, multi-record sources (sources.json): how many gold sources the top 5
        holds, words only against words + meaning, per split; and top-1 from a gold source."""
        out: dict[str, dict[str, list[int]]] = {}
        for q in self.questions:
            if "sources" not in q:
                continue
            gold = set(q["sources"])
            tops = {"words": [self.by_id[self.lex_back[h["id"]]]["source"] for h in self.lex_store.search(q["q"], k=5)["hits"]],
                    "hybrid": [self.by_id[self.back[h["id"]]]["source"] for h in self.store.search(q["q"], k=5)["hits"]]}
            for method, top in tops.items():
                cell = out.setdefault(q["split"], {}).setdefault(method, [0, 0, 0, 0, 0])
                cell[0] += len(gold & set(top))  # gold sources in the top 5
                cell[1] += len(gold)
                cell[2] += gold <= set(top)      # every gold source in the top 5
                cell[3] += bool(top) and top[0] in gold
                cell[4] += 1
        return {"sources": out}

    def prompt_recall(self) -> dict:
        from retained.recall import recall

        out: dict[str, dict[str, int]] = {}
        misses: list[str] = []
        for p in self.prompts:
            cell = out.setdefault(p["split"], {"answered": 0, "answerable": 0, "wrong": 0, "silent": 0,
                                               "unrelated": 0, "obsolete": 0, "injections": 0, "tokens": 0})
            got = recall(self.store, p["prompt"], project=p["project"], shown=set())
            if got is not None:  # what the agent pays for recall: the injected block
                from retained.tokens import estimate_tokens

                cell["injections"] += 1
                cell["tokens"] += estimate_tokens(got["text"])
            injected = [self.back[i] for i in (got or {}).get("ids", [])]
            cell["obsolete"] += any(m in self.obsolete for m in injected)
            if p["answer"] is None:
                cell["unrelated"] += 1
                cell["silent"] += got is None
                if got is not None:
                    misses.append(f"{p['split']}: {p['prompt']!r} injected {injected}")
            else:
                cell["answerable"] += 1
                cell["answered"] += p["answer"] in injected
                cell["wrong"] += bool(injected) and p["answer"] not in injected
                if p["answer"] not in injected:
                    misses.append(f"{p['split']}: {p['prompt']!r} wanted {p['answer']}, injected {injected}")
        return {"prompts": out, "prompt_misses": misses}


def run_set(path: Path) -> dict:
    data = json.loads(path.read_text())
    by_id = {m["id"]: m for m in data["memories"]}
    with tempfile.TemporaryDirectory() as tmp:
        ev = Eval(data, Path(tmp))
        try:
            out = {"set": path.name, "memories": len(data["memories"]), "questions": len(data["questions"]),
                   **ev.retrieval(), **ev.prompt_recall(), **ev.gold_sources()}
        finally:
            ev.close()
    out["paraphrases_sharing_a_word"] = [q["q"] for q in data["questions"] if q.get("kind") == "paraphrase"
                                         and _stems(q["q"]) & _stems(by_id[q["answer"]]["text"])]
    if "recall.json" in path.name:  # every answerable prompt there is a paraphrase
        out["paraphrases_sharing_a_word"] += [p["prompt"] for p in data["prompts"] if p["answer"]
                                              and _stems(p["prompt"]) & _stems(by_id[p["answer"]]["text"])]
    return out


def _frac(a: int, b: int) -> str:
    return f"{a}/{b} = {a / b:.2f}" if b else "-"


def show(r: dict) -> None:
    print(f"\n{r['set']}: {r['memories']} memories, {r['questions']} questions")
    kinds = sorted({k for m in r["results"].values() for s in m.values() for k in s},
                   key=lambda k: ("lexical", "paraphrase", "identifier", "scope", "decision").index(k))
    for split in sorted({s for m in r["results"].values() for s in m}):
        print(f"  split {split}: cells are hit@1/hit@3 of n")
        print(f"  {'method':<10}" + "".join(f"{k:>14}" for k in (*kinds, "overall")))
        for method in METHODS:
            row = r["results"][method].get(split, {})
            tot = [sum(row.get(k, [0, 0, 0])[i] for k in kinds) for i in range(3)]
            cells = [f"{row[k][0]}/{row[k][1]} of {row[k][2]}" if k in row else "-" for k in kinds]
            print(f"  {method:<10}" + "".join(f"{c:>14}" for c in [*cells, f"{tot[0]}/{tot[1]} of {tot[2]}"])
                  + f"   hit@1 {tot[0] / max(tot[2], 1):.2f} hit@3 {tot[1] / max(tot[2], 1):.2f}")
    print(f"  obsolete-decision rate (blend top 3): {r['odr'][0]}/{r['odr'][1]}")
    qr = r["question_recall"]
    print(f"  recall on the questions: answer injected {_frac(qr['answer'], qr['of'])}, only others "
          f"{qr['other']}/{qr['of']}, silent on no-answer {qr['silent_on_none']}/{qr['none']}")
    for split, c in sorted(r["prompts"].items()):
        print(f"  prompt recall, split {split}: recall {_frac(c['answered'], c['answerable'])} (wrong only "
              f"{c['wrong']}), abstention {_frac(c['silent'], c['unrelated'])}, obsolete injected {c['obsolete']}; "
              f"{c['tokens']} tokens injected in {c['injections']} injection(s)"
              + (f", {c['tokens'] / c['injections']:.0f} each" if c["injections"] else ""))
    for split, cells in sorted(r.get("sources", {}).items()):
        for method, (found, gold, every, first, n) in cells.items():
            print(f"  gold sources in the top 5, split {split}, {method:<6}: {_frac(found, gold)}; every gold source "
                  f"{every}/{n}; top hit from a gold source {first}/{n}")
    for m in r["prompt_misses"]:
        print(f"    miss {m}")
    if r["paraphrases_sharing_a_word"]:
        print(f"  paraphrases sharing a word with their answer: {r['paraphrases_sharing_a_word']}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", help="an eval file (repeatable; default: every set here)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = [run_set(Path(p)) for p in (args.set or SETS)]
    if args.json:
        print(json.dumps({"sets": results}, indent=2))
        return 0
    for r in results:
        show(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
