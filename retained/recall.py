"""Recall at the prompt: the few current records a prompt needs, that the session has not seen yet.

`recall()` searches the current project's memory (plus global records) with the prompt and returns a
fenced block for the model holding the records that clear a relevance bar and were not already shown
(by the brief or an earlier prompt), within a small budget. Nothing clears the bar → None, so the hook
prints nothing: a hook that pads every prompt with noise is worse than none.

No host shapes here (the hook wraps the text for its host). Standard library only on this path when
the semantic tier is off. `RETAINED_RECALL=off` turns it off.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from typing import Any

from .brief import BEGIN, END, _line
from .records import GLOBAL_SCOPE
from .tokens import estimate_tokens

DEFAULT_BUDGET = 250
DEFAULT_MAX_RECORDS = 3
_CANDIDATES = 12
_WORD = re.compile(r"\w+", re.UNICODE)


def recall_enabled(env: dict[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get("RETAINED_RECALL", "on").strip().lower()
    return value not in ("off", "0", "false", "no")


def _stem(word: str) -> str:
    """A crude prefix stem, enough to tell 'migrate' and 'migrations' are one word for the bar."""
    return word[: max(4, len(word) - 3)] if len(word) > 4 else word


def _lexical_strength(terms: list[str], text: str) -> tuple[int, float]:
    """How many of the prompt's content words the record holds (by stem), and what share that is."""
    if not terms:
        return 0, 0.0
    words = {w.lower() for w in _WORD.findall(text)}
    stems = {_stem(w) for w in words}
    hit = 0
    for t in terms:
        if t in words or _stem(t) in stems or any(w.startswith(t) for w in words if len(t) >= 4):
            hit += 1
    return hit, hit / len(terms)


def _is_identifier(term: str) -> bool:
    return any(c.isdigit() for c in term) or "_" in term


def _relevant(hit: dict[str, Any], terms: list[str], detail: dict[str, Any]) -> bool:
    """The relevance bar: close in meaning, or holding an identifier of the prompt, or enough of its words."""
    cosine = detail.get("cosine")
    if cosine is not None and cosine >= SEMANTIC_BAR:
        return True
    if detail.get("tier", 0) >= 1:  # holds an identifier, path, error code or version of the prompt verbatim
        return True
    content = [t for t in terms if len(t) >= 3]
    n, share = _lexical_strength(content, hit["text"])
    if cosine is not None:  # meaning was measured and fell short: words alone must be strong
        return n >= 3 and share >= 0.5
    return n >= 2 and share >= 0.34


# Cosine of prompt and record (MiniLM, L2-normalised) from which a record counts as relevant by meaning.
# On the repository's eval (bench/eval) the no-answer questions' best cosine peaked at 0.32; at 0.40
# recall stayed silent on all of them and injected the answer for 27 of 42 (0.35: 29, 0.45: 22). Silence
# is worth more than reach here, hence the margin.
SEMANTIC_BAR = 0.40
# A prompt longer than this is cut before searching (pasted logs or code would drown the question).
PROMPT_CHARS = 2000


def recall(store: Any, prompt: str, *, project: str | None, shown: set[str],
           budget_tokens: int = DEFAULT_BUDGET, max_records: int = DEFAULT_MAX_RECORDS) -> dict[str, Any] | None:
    """The records relevant to `prompt` not in `shown`, fenced as data: {"text", "ids"}; else None."""
    if not recall_enabled() or not isinstance(prompt, str) or not prompt.strip():
        return None
    if max_records < 1 or budget_tokens < 1:
        return None
    from .index import query_terms

    terms = query_terms(prompt)
    if not terms:
        return None
    scopes = [project, GLOBAL_SCOPE] if project else None
    # Only the prompt is embedded here: a hook must stay quick, so at most a few new records are
    # embedded on its path, and a store without vectors yet is searched by words alone.
    # A running server of this store has the model loaded: it searches for us when it can (retained/warm.py).
    kw: dict[str, Any] = {"scopes": scopes, "k": _CANDIDATES, "inline_embed": 16, "need_vectors": True}
    served = None
    from .embed import mode

    if mode() != "off":
        from .warm import search

        served = search(store.directory, prompt[:PROMPT_CHARS], **kw)
    result, cosines = served or store.search_scored(prompt[:PROMPT_CHARS], kind=None, max_tokens=None,
                                                    include_superseded=False, as_of=None, **kw)
    picked: list[dict[str, Any]] = []
    for hit in result.get("hits", []):
        if hit["id"] in shown or hit.get("superseded_by"):
            continue
        if _relevant(hit, terms, cosines.get(hit["id"], {})):
            picked.append(hit)
        if len(picked) >= max_records:
            break
    if not picked:
        return None
    damage = store.damage_note() if hasattr(store, "damage_note") else None  # reads never hide damage (I2)
    return _render(picked, project, budget_tokens, damage)


def _render(hits: list[dict[str, Any]], project: str | None, budget: int,
            damage: str | None = None) -> dict[str, Any] | None:
    """The largest best-first prefix of `hits` whose block fits the budget; None if not even one does."""
    kept = list(hits)
    while kept:
        n = len(kept)
        head = (f"retained recalled {n} stored record{'s' if n != 1 else ''} that may bear on this prompt "
                "(memory_get for more)" + (f"; {damage}:" if damage else ":"))
        text = "\n".join([head, BEGIN, *(_line(h, project) for h in kept), END])
        if estimate_tokens(text) <= budget:
            return {"text": text, "ids": [h["id"] for h in kept]}
        kept.pop()
    return None
