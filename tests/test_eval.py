"""The retrieval eval in bench/eval runs and holds the figures the semantic tier was tuned to."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_retrieval_eval_prints_hit_rates_per_kind_for_each_method():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "eval" / "run_eval.py"), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    res = data["results"]
    assert set(res) == {"lexical", "semantic", "blend"}
    for method in res:
        assert set(res[method]) == {"lexical", "paraphrase", "identifier", "scope"}
    # Exact words still win with the blend; meaning finds paraphrases words cannot.
    assert res["blend"]["identifier"][:2] == [6, 6] and res["blend"]["lexical"][:2] == [15, 15]
    assert res["blend"]["scope"][:2] == [6, 6]
    assert res["lexical"]["paraphrase"][1] == 0 and res["blend"]["paraphrase"][1] >= 10
    assert data["paraphrases_sharing_a_word"] == []
    assert data["recall_silent_on_no_answer"] == "5/5"
    assert data["recall_injects_only_other_records"].startswith("0/")
