"""The server's instructions: how an agent should use retained's tools, plus a brief of the project's
memory, cut to fit the tightest host.

Apart from retained/server.py so that `retained serve` can make them on a thread while it answers the
opening requests, before it imports server.py and the tool-call code (retained/transport.py).
"""

from __future__ import annotations

import os

from .brief import make_brief
from .installers import hosts as registry  # host facts: the instructions cut
from .store import Store
from .tools import DATA_NOTE

INSTRUCTIONS_MAX_CHARS = registry.instructions_max_chars()  # the tightest cut of server instructions a host makes

GUIDANCE = (
    "retained is this project's long-term memory, shared across sessions and agent hosts. "
    "Before relying on what you think was decided earlier, memory_search (by words) or memory_list (newest "
    "first, for 'what happened recently'). Write down decisions, facts you had to discover, and user "
    "preferences with memory_write; correct an outdated record by writing a new one with supersedes=<old id>. "
    "Before you stop after real work, save where things stand with memory_checkpoint. " + DATA_NOTE
)


def compute_instructions(store: Store, project: str | None) -> str:
    """Guidance plus a brief of the project's memory, within the tightest host's cut."""
    room = INSTRUCTIONS_MAX_CHARS - len(GUIDANCE) - 2
    budget = 400
    while budget >= 40:
        brief = make_brief(store, project, budget=budget, loaded_at_start=registry.loaded_for(os.environ))
        if len(brief["text"]) <= room:
            return GUIDANCE + "\n\n" + brief["text"]
        budget = budget * 3 // 4
    return GUIDANCE
