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
