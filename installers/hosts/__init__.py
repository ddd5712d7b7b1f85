"""The host registry: one module per host in this package, each declaring `HOST`.

Everything else (the CLI, the hook runner, install, doctor) asks this registry; no other module keeps
its own list of host names, caps or shapes. Adding a host is a module here plus `templates/<name>.json`.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..host import Host

_CACHE: dict[str, Host] = {}


def hosts() -> dict[str, Host]:
    """Every supported host, by the name `--host` takes, in name order."""
    if not _CACHE:
        found = []
        for name in _module_names():
            if not name.startswith("_"):
                found.append(importlib.import_module(f"{__name__}.{name}").HOST)
        _CACHE.update((h.name, h) for h in sorted(found, key=lambda h: h.name))
    return dict(_CACHE)


def _module_names() -> list[str]:
    """This package's modules. From the directory listing: pkgutil imports inspect, which costs every
    hook about 10 ms; pkgutil only where the package is not a directory (a zip)."""
    try:
        return sorted({n[:-3] for d in __path__ for n in os.listdir(d) if n.endswith(".py")})
    except OSError:
        import pkgutil

        return [info.name for info in pkgutil.iter_modules(__path__)]


def names() -> list[str]:
    return list(hosts())


def get(name: str) -> Host | None:
    return hosts().get(name)


def recognise(data: dict, env: dict[str, str], explicit: str | None = None) -> Host:
    """Which host called a hook: --host wins, then the input's shape and the environment, then the fallback."""
    every = hosts()
    if explicit in every:
        return every[explicit]  # type: ignore[index]
    ordered = sorted(every.values(), key=lambda h: h.order)
    for host in ordered:
        if host.recognises(data, env):
            return host
    return next(h for h in ordered if h.fallback)


def context_vars(home: str, env: dict[str, str]) -> dict[str, str]:
    """Every host's own path placeholders for the templates (a file two hosts share is named once)."""
    out: dict[str, str] = {}
    for host in hosts().values():
        out.update(host.context_vars(home, env))
    return out


def _union(attr: str) -> list[str]:
    out: list[str] = []
    for host in sorted(hosts().values(), key=lambda h: h.order):
        out += [x for x in getattr(host, attr) if x not in out]
    return out


def session_keys() -> list[str]:
    """Input keys that carry a session id, any host's (a shared hook file may be run by another host)."""
    keys = _union("session_keys")
    return sorted(keys, key=lambda k: k != "session_id")  # the common key first


def session_vars() -> list[str]:
    """Environment variables in which hosts pass the session id to hooks and servers."""
    return _union("session_vars")


def session_id(env: Mapping[str, str]) -> str | None:
    """The session id a host put in the environment (of a hook or a server it started), if any."""
    return next((env[v] for v in session_vars() if env.get(v)), None)


def instructions_max_chars() -> int:
    """The most a server's `instructions` may hold so that every host keeps them whole."""
    return min(h.instructions_max_chars for h in hosts().values() if h.instructions_max_chars)


def project_hint(env: dict[str, str]) -> str | None:
    """The project directory a host put in the environment, if any."""
    return next((env[v] for v in _union("project_vars") if env.get(v)), None)


def project_start(data: dict) -> str | None:
    """Where the session works, from the input: a host's workspace root, else `cwd`."""
    for host in sorted(hosts().values(), key=lambda h: h.order):
        found = host.project_start(data)
        if found:
            return found
    return None
