"""On/off switches read from the environment, one way everywhere: `1/true/yes/on` and `0/false/no/off`
(any case, spaces ignored); anything else, or nothing, is the switch's default. Standard library only:
the hook path reads these."""

from __future__ import annotations

import os
from collections.abc import Mapping

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


def parse(value: str | None) -> bool | None:
    """True or False for a word that says so, None for no value or any other word."""
    v = (value or "").strip().lower()
    return True if v in ON else False if v in OFF else None


def switch(name: str, default: bool, env: Mapping[str, str] | None = None) -> bool:
    """The switch `name` in `env` (default: this process's environment)."""
    said = parse((os.environ if env is None else env).get(name))
    return default if said is None else said


def embed_mode(env: Mapping[str, str] | None = None) -> str:
    """'local', 'ollama' or 'off' from RETAINED_EMBED (default local): `embed.mode`, here so that the
    hook asks it without importing the embedder's module."""
    value = (os.environ if env is None else env).get("RETAINED_EMBED", "").strip().lower()
    if value in ("off", "0", "false", "no", "none", "lexical"):
        return "off"
    if value == "ollama":
        return "ollama"
    return "local"


def embed_config_key(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """What names this process's embedder (`embed.config_key`): two processes with the same key embed alike."""
    e = os.environ if env is None else env
    m = embed_mode(e)
    if m == "ollama":
        return ("ollama", e.get("RETAINED_OLLAMA_URL", ""), e.get("RETAINED_EMBED_MODEL", ""))
    if m == "local":
        return ("local", e.get("RETAINED_EMBED_MODEL_PATH", ""))
    return ("off",)
