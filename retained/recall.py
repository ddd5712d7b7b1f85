"""Recall at the prompt: the few current records a prompt needs, that the session has not seen yet.

`recall()` searches the current project's memory (plus global records) with the prompt and returns a
fenced block for the model holding the records that clear a relevance bar and were not already shown
(by the brief or an earlier prompt), within a small budget. Nothing clears the bar → None, so the hook
prints nothing: a hook that pads every prompt with noise is worse than none.

No host shapes here (the hook wraps the text for its host). Standard library only on this path when
the semantic tier is off. `RETAINED_RECALL=off` turns it off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from typing import Any

    from .store import Store

from .brief import BEGIN, END, _line
from .index import query_terms
from .ranking import words_held
from .records import GLOBAL_SCOPE
from .switches import switch
from .tokens import estimate_tokens

DEFAULT_BUDGET = 250
DEFAULT_MAX_RECORDS = 3
_CANDIDATES = 12


def recall_enabled(env: dict[str, str] | None = None) -> bool:
    return switch("RETAINED_RECALL", True, env)


def _relevant(hit: dict[str, Any], terms: list[str], detail: dict[str, Any]) -> bool:
    """The relevance bar (see SEMANTIC_BAR below): close in meaning; or near in meaning and holding half
    the prompt's words; or near and standing alone (no other record of the scope comes close); or
    holding an identifier of the prompt; or naming a tool of the kind the prompt speaks of and not far
    in meaning (BRIDGE_BAR); or, without meaning, enough of its words."""
    cosine = detail.get("cosine")
    if cosine is not None and cosine >= SEMANTIC_BAR:
        return True
    if detail.get("tier", 0) >= 1:  # holds an identifier, path, error code or version of the prompt verbatim
        return True
    bridge = detail.get("bridge") or 0  # names the tool of the kind the prompt speaks of ('the CI' → GitHub Actions)
    if cosine is not None and ((bridge >= 2 and cosine >= STRONG_BRIDGE_BAR)
                               or (bridge == 1 and cosine >= BRIDGE_BAR and (detail.get("lead") or 0) >= 0)):
        return True
    content = [t for t in terms if len(t) >= 3]
    n = words_held(content, hit["text"]) if content else 0
    share = n / len(content) if content else 0.0
    if cosine is not None and cosine >= NEAR_BAR:
        lead = detail.get("lead")
        if (n >= 1 and share >= 0.5) or (lead is not None and lead >= ALONE_LEAD):
            return True
    if cosine is not None:  # meaning was measured and fell short: words alone must be strong
        return n >= 3 and share >= 0.5
    return n >= 2 and share >= 0.34


# Cosine of prompt and record (MiniLM, L2-normalised) from which a record counts as relevant by meaning
# alone. On the repository's eval (bench/eval/team.json) the no-answer questions' best cosine peaked at
# 0.33; at 0.40 recall stayed silent on all of them. Silence is worth more than reach here, hence the
# margin. A short or paraphrased prompt rarely gets that close ("how do we run the tests?" to "Run the
# test suite with `make check`..." is 0.34), so from NEAR_BAR a record also counts when the prompt's
# words back it (half of them) or when it stands alone: ALONE_LEAD above every other record of the
# scope. Unrelated prompts of the dev split came no closer than 0.33 ("fix the failing test"), sharing
# one word of three and leading by 0.13. Chosen on the dev splits of bench/eval only.
SEMANTIC_BAR = 0.40
NEAR_BAR = 0.30
ALONE_LEAD = 0.15
# A record naming a tool of the kind the prompt speaks of (retained/vocabulary.py) counts from this cosine,
# when no other record of the scope is nearer.
# On the dev split of bench/eval/recall.json the answers so bridged ran from 0.03 to 0.34 (7 of 10 at 0.2 or
# above), and unrelated prompts that use a kind word in another sense ('a CPU cache', 'a list of pages')
# bridged to records at -0.10 to 0.19, but one at 0.31 ('a dependency graph of these modules' to the
# package manager's record).
BRIDGE_BAR = 0.20
# ... and from this one when the prompt speaks of the kind in two words or more ('crash reports', 'the
# container orchestrator'): such a phrase rarely means anything else. The floor of closeness in meaning.
STRONG_BRIDGE_BAR = 0.10
# A prompt longer than this is cut before searching (pasted logs or code would drown the question).
PROMPT_CHARS = 2000


def recall(store: Store, prompt: str, *, project: str | None, shown: set[str],
           budget_tokens: int = DEFAULT_BUDGET, max_records: int = DEFAULT_MAX_RECORDS) -> dict[str, Any] | None:
    """The records relevant to `prompt` not in `shown`, fenced as data: {"text", "ids"}; else None.

    Searched here, with this process's model when the semantic tier is on; a warm server of the store
    answers the same question for the hook without it (retained/warm.py `recall`, through `pick`)."""
    if not recall_enabled() or not isinstance(prompt, str) or not prompt.strip():
        return None
    if max_records < 1 or budget_tokens < 1:
        return None
    found = candidates(store, prompt, project)
    if found is None:
        return None
    return pick(store, prompt, *found, project=project, shown=shown, budget_tokens=budget_tokens,
                max_records=max_records)


def candidates(store: Store, prompt: str, project: str | None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """What recall weighs: the prompt searched in the project's scopes (plus global), a dozen hits with
    their cosines (`Store.search_scored`); None when the prompt holds no word to search by. The hook's
    own recall and a warm server's answer to it (retained/warm.py) both start here."""
    if not query_terms(prompt):
        return None
    # Only the prompt is embedded here: a hook must stay quick, so at most a few new records are
    # embedded on its path, and a store without vectors yet is searched by words alone.
    scopes = [project, GLOBAL_SCOPE] if project else None
    return store.search_scored(prompt[:PROMPT_CHARS], kind=None, max_tokens=None, include_superseded=False,
                               as_of=None, scopes=scopes, k=_CANDIDATES, inline_embed=16, need_vectors=True)


def pick(store: Store, prompt: str, result: dict[str, Any], cosines: dict[str, dict[str, Any]], *,
         project: str | None, shown: set[str], budget_tokens: int = DEFAULT_BUDGET,
         max_records: int = DEFAULT_MAX_RECORDS) -> dict[str, Any] | None:
    """From a search's hits for `prompt`, the ones that clear the bar and were not shown, rendered."""
    terms = query_terms(prompt)
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
