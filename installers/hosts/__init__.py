"""The host registry: one module per host in this package, each declaring `HOST`.

Everything that faces a user or a host (the CLI, the server, the hook runner, install, doctor, the web
page) asks this registry, and passes what it says into the core as arguments (the core never imports
it). No other module keeps its own list of host names, caps or shapes. Adding a host is a module here
plus `templates/<name>.json`.
"""

from __future__ import annotations

import importlib
import os

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from retained.native import Item

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
        import pkgutil  # lazy: +9.5 ms on a hook (measured), and only for a zipped package

        return [info.name for info in pkgutil.iter_modules(__path__)]


def names() -> list[str]:
    return list(hosts())


def get(name: str) -> Host | None:
    return hosts().get(name)


def _ordered() -> list[Host]:
    return sorted(hosts().values(), key=lambda h: h.order)


def recognise(data: dict[str, Any], env: Mapping[str, str], explicit: str | None = None) -> Host:
    """Which host called a hook: --host wins, then the input's shape and the environment, then the fallback."""
    chosen = get(explicit) if explicit else None
    if chosen is not None:
        return chosen
    ordered = _ordered()
    for host in ordered:
        if host.recognises(data, env):
            return host
    return next(h for h in ordered if h.fallback)


def _union(attr: str) -> list[str]:
    out: list[str] = []
    for host in _ordered():
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


def project_vars() -> list[str]:
    """Environment variables in which hosts name the project directory (retained/project.py takes them)."""
    return _union("project_vars")


def project_start(data: dict[str, Any]) -> str | None:
    """Where the session works, from the input: a host's workspace root, else `cwd`."""
    for host in _ordered():
        found = host.project_start(data)
        if found:
            return found
    return None


# -- installing: each host's placeholders, and the files a host shares with another ------------------
def context(host: Host, store: Path, project: Path, scope: str = "user",
            env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The placeholders of `host`'s template (`Host.context`), and where the files it shares with
    another host are (`Host.shares`: that host's file, as that host's own template and placeholders say)."""
    env = os.environ if env is None else env
    ctx = host.context(store, project, scope, env)
    shared: dict[str, Path] = {}
    for (role, at), owner_name in host.shares.items():
        owner = get(owner_name)
        path = owner.file_path(role, at, owner.context(store, project, at, env)) if owner else None
        if at == scope and path is not None:
            shared[role] = path
    ctx["shared_paths"] = shared
    return ctx


# -- the hosts' own memories (retained/native.py has the readers; this says whose memory is where) ----
def loaded_at_start(host: str | None = None) -> frozenset[str]:
    """File names a host loads into every session by itself (instruction files and memory indexes): of
    the named `host` only (a brief leaves out what that host loads, not what another host would), of
    every host when None (an import marks what some host loads), of none for an unknown name or ''."""
    if host is not None:
        h = get(host) if host else None
        return frozenset((*h.instruction_files, *h.memory_at_start)) if h is not None else frozenset()
    return frozenset(n for h in hosts().values() for n in (*h.instruction_files, *h.memory_at_start))


def loaded_for(env: Mapping[str, str]) -> frozenset[str]:
    """`loaded_at_start` of the host this process runs under, as its environment says; none when it does
    not say (then a brief leaves nothing out: better twice than lost)."""
    found = next((h for h in _ordered() if h.recognises({}, env)), None)
    return loaded_at_start(found.name) if found is not None else frozenset()


def memory_sources() -> list[str]:
    """The hosts whose own memory `retained import --from` reads."""
    return [name for name, host in hosts().items() if host.memory_source]


def current_project(cwd: str | None, env: Mapping[str, str]) -> str | None:
    """The current project's scope, as the hosts' variables and `cwd` say (None outside a project)."""
    from retained.project import project_scope  # lazy: +7 ms on the stop hook (measured)

    try:
        return project_scope(cwd=cwd, env=env, project_vars=project_vars())
    except OSError:
        return None


def native_memory(host_name: str, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> dict[str, Any] | None:
    """What native memory a host has, whether it is on, and how big it is; None for hosts without one.

    Keys: host, feature, enabled, why (what decided it), location, files, bytes, loaded_at_start (files
    the host injects at every session start), summary (one line), fix (how to move it into retained).
    """
    env = os.environ if env is None else env
    host = get(host_name)
    return host.memory_report(env, cwd, current_project(cwd, env)) if host is not None else None


class NativeMemories:
    """The hosts' own memories as `retained import` reads them (retained/native.py's `HostMemories`)."""

    def sources(self) -> list[str]:
        return memory_sources()

    def source_items(self, source: str, env: Mapping[str, str],
                     known_scopes: list[str]) -> tuple[list[Item], list[str]]:
        """Candidate records from one host's own memory (`retained import --from <source>`)."""
        host = get(source)
        if host is None or not host.memory_source:
            raise ValueError(source)
        return host.memory_items(env, known_scopes, None, current_project(None, env))

    def path_items(self, path: Path, scope: str | None, env: Mapping[str, str],
                   notes: list[str] | None = None) -> list[Item]:
        """A file or folder given by path: an instruction file, or a memory folder (a host's, if it is one).
        What it recognises but leaves out (sections, files too big to read) is said in `notes`."""
        from retained import native  # lazy: +14 ms on a hook (measured), for `retained import` only

        readers = [h for h in hosts().values() if h.memory_source]
        if path.is_dir():
            for host in readers:
                found = host.memory_path_items(path, scope, env, notes)
                if found is not None:
                    return found
            inner = path / "memory" if (path / "memory").is_dir() else path
            return native.memory_dir_items(inner, fmt="memory-folder", scope=scope or native.project_of(path),
                                           notes=notes)
        if scope is None:
            user_level = {f.resolve() for f in (h.user_instruction_file(env) for h in readers) if f is not None}
            scope = "global" if path.resolve() in user_level else native.project_of(path.parent)
        return instruction_items(path, scope)


def instruction_items(path: Path, scope: str | None) -> list[Item]:
    """An instruction file's items, in the format of the host that loads a file of that name (else Markdown)."""
    from retained import native  # lazy, as in `path_items`

    fmt = next((h.instruction_files[path.name] for h in hosts().values() if path.name in h.instruction_files),
               "markdown")
    return native.instruction_items(path, scope, fmt=fmt, host_loaded=path.name in loaded_at_start())
