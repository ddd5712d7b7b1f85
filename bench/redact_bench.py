"""Redaction cost (issue 29 item 7): `redact.redact_text` of this tree beside a same-run baseline (another
checkout, e.g. main), on ordinary text and on hostile text built to make a pattern backtrack.

    python bench/redact_bench.py --baseline DIR [--rounds 9]

Both trees' `retained/redact.py` are loaded into this process (the module imports only the standard
library) and take turns within each round, so a busy moment of a shared machine falls on both. Figures:
* ordinary: every paragraph of README.md and the token-count corpora (tests/data/tokens), the kind of
  text a write redacts; the median and the smallest of the rounds' totals;
* hostile: ~100-260 kB of one fragment repeated (a command name, a key word, the start of a webhook URL,
  an opening quote), each timed once a round: the largest of the rounds' medians says whether any
  pattern went quadratic.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]

HOSTILE = {
    "docker login, no -p": "docker login " * 10000,
    "docker words": "docker a b c d login x " * 5000,
    "redis-cli": "redis-cli " * 10000,
    "mongo -u": "mongo -u x " * 10000,
    "mysql -u": "mysql -u x " * 10000,
    "password lines": "password reset\n" * 10000,
    "password words": "password " * 20000,
    "pw is": "pw is " * 20000,
    "password for the": "password for the " * 10000,
    "pgpass-like lines": "host:5432:db:user:\n" * 10000,
    "htpasswd-like": "u:$apr1$" * 20000,
    "login x password": "login x password " * 10000,
    "discord webhook starts": "https://discord.com/api/webhooks/123456/" * 5000,
    "power automate starts": "https://a.logic.azure.com/workflows/" * 5000,
    "google chat starts": "https://chat.googleapis.com/v1/spaces/" * 5000,
    "opening quotes": 'password is "' * 20000,
    "client-key-data:": "client-key-data: " * 10000,
}


def load(tree: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, tree / "retained" / "redact.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ordinary() -> list[str]:
    texts = (ROOT / "README.md").read_text(encoding="utf-8").split("\n\n")
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "tests" / "data" / "tokens").iterdir())]
    return texts


def timed(module: ModuleType, texts: list[str]) -> float:
    start = time.perf_counter()
    for text in texts:
        module.redact_text(text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the baseline")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    trees = {"this tree": load(ROOT, "redact_this"), "baseline": load(args.baseline.resolve(), "redact_base")}
    texts = ordinary()
    plain: dict[str, list[float]] = {k: [] for k in trees}
    hostile: dict[tuple[str, str], list[float]] = {(k, h): [] for k in trees for h in HOSTILE}
    for n in range(args.rounds):
        order = list(trees) if n % 2 == 0 else list(reversed(trees))
        for name in order:
            plain[name].append(timed(trees[name], texts))
            for h, text in HOSTILE.items():
                hostile[name, h].append(timed(trees[name], [text]))
    size = sum(len(t) for t in texts) // 1000
    print(f"ordinary text: {len(texts)} texts, {size} kB, {args.rounds} rounds")
    for name in trees:
        print(f"  {name:10s} median {statistics.median(plain[name]) * 1e3:7.1f} ms, min {min(plain[name]) * 1e3:7.1f} ms")
    print("hostile text (median of rounds, ms):")
    print(f"  {'':24s} {'this tree':>10s} {'baseline':>10s}")
    for h, text in HOSTILE.items():
        mine, base = (statistics.median(hostile[k, h]) * 1e3 for k in trees)
        print(f"  {h:24s} {mine:10.1f} {base:10.1f}   ({len(text) // 1000} kB)")


if __name__ == "__main__":
    main()
