"""The retrieval and recall eval in bench/eval runs and holds the figures the semantic tier was tuned to."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)  # one run of the eval (half a minute) for both tests
def _sets() -> dict[str, dict]:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "eval" / "run_eval.py"), "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return {s["set"]: s for s in json.loads(out.stdout)["sets"]}


def _total(res: dict, method: str, split: str) -> list[int]:
    cells = res[method][split].values()
    return [sum(c[i] for c in cells) for i in range(3)]


def test_retrieval_and_recall_evals_print_their_figures_per_kind_and_split():
    sets = _sets()
    team, platform = sets["team.json"]["results"], sets["platform.json"]["results"]
    assert set(team) == set(platform) == {"lexical", "semantic", "blend"}
    assert set(team["blend"]["dev"]) == {"lexical", "paraphrase", "identifier", "scope"}
    assert set(platform["blend"]) == {"dev", "heldout"}
    assert set(platform["blend"]["dev"]) == {"lexical", "paraphrase", "identifier", "scope", "decision"}
    # Exact words still win with the blend; meaning finds paraphrases words cannot.
    for res in (team, platform):
        for split in res["blend"]:
            for kind in ("identifier", "scope"):
                hit1, hit3, n = res["blend"][split][kind]
                assert hit1 == n, (split, kind)
    assert team["blend"]["dev"]["lexical"][:2] == [15, 15]
    # Words alone put no paraphrase first (the vocabulary of tools brings a few into their top 3).
    assert team["lexical"]["dev"]["paraphrase"][0] == 0 and team["blend"]["dev"]["paraphrase"][1] >= 10
    # The blend is no worse than meaning alone on what it was tuned on.
    for res in (team, platform):
        assert _total(res, "blend", "dev")[:2] >= _total(res, "semantic", "dev")[:2]
    assert sets["team.json"]["paraphrases_sharing_a_word"] == []
    for s in sets.values():
        assert s["odr"][0] == 0  # no corrected record among the top three
        assert s["question_recall"]["silent_on_none"] == s["question_recall"]["none"]


def test_prompt_recall_finds_short_paraphrased_prompts_and_stays_silent_on_unrelated_ones():
    prompts = _sets()["platform.json"]["prompts"]
    for split in ("dev", "heldout"):
        c = prompts[split]
        assert c["answered"] / c["answerable"] >= 0.8, (split, c)
        assert c["silent"] / c["unrelated"] >= 0.9, (split, c)
        assert c["obsolete"] == 0


def test_recall_bridges_a_kind_of_tool_on_the_held_out_prompts_and_still_abstains():
    prompts = _sets()["recall.json"]["prompts"]
    for split in ("dev", "heldout"):
        c = prompts[split]
        assert c["answered"] >= 6 and c["answerable"] == 10, (split, c)
        assert c["silent"] / c["unrelated"] >= 0.9, (split, c)


def test_hybrid_ranking_finds_as_many_gold_sources_as_words_alone_on_long_multi_record_sources():
    for split, cells in _sets()["sources.json"]["sources"].items():
        words, hybrid = cells["words"], cells["hybrid"]
        assert hybrid[0] >= words[0] and hybrid[0] / hybrid[1] >= 0.85, (split, cells)
        assert hybrid[3] >= words[3], (split, cells)  # the top hit from a gold source as often
