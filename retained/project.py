"""Which project a call belongs to: the scope records are filed under by default.

What a host says about the project (the environment variables that carry its directory) reaches
this module as arguments: the callers ask the host registry; this module imports none of it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from .errors import UsageError
from .records import GLOBAL_SCOPE, check_scope

ALL_SCOPES = "*"  # in a read's scope: every scope


def find_root(start: str | os.PathLike[str]) -> Path | None:
    """The nearest directory at or above `start` holding `.git` (a directory or a worktree file)."""
    try:
        here = Path(start).resolve()
    except (OSError, RuntimeError):
        return None
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d
    return None


def project_dir(cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                project_vars: Sequence[str] = ()) -> Path | None:
    """The project a call belongs to, the same rule for the CLI, the server and the hooks.

    The git root of `cwd` (default: the process cwd) or of the project directory a host put in the
    environment (`project_vars`: the variables hosts use for it, which the caller gets from the host
    registry); without a git root, that directory itself; else no project.
    """
    env = os.environ if env is None else env
    hinted = project_hint(env, project_vars)
    starts: list[str] = []
    if hinted and os.path.isdir(hinted):
        starts.append(hinted)
    if cwd is not None:
        starts.insert(0, str(cwd))
    else:
        with contextlib.suppress(OSError):
            starts.append(os.getcwd())
    for start in starts:
        root = find_root(start)
        if root is not None:
            return root
    if hinted and os.path.isdir(hinted):
        return Path(hinted).resolve()
    return None


def project_hint(env: Mapping[str, str], project_vars: Sequence[str]) -> str:
    """The project directory a host put in the environment, in the first of `project_vars` set ("": none)."""
    return next((env[v] for v in project_vars if env.get(v)), "").strip()


def project_scope(cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                  project_vars: Sequence[str] = ()) -> str | None:
    """The scope the current project's records are filed under (see `scope_of`), or None outside any project."""
    root = project_dir(cwd, env, project_vars)
    return scope_of(root) if root is not None else None


def scope_of(root: str | os.PathLike[str]) -> str:
    """The scope of the project at `root`: its key when the repository has an `origin` (the normalised
    URL: the same for every worktree and clone, on this machine and a colleague's), else the absolute
    path of its root. Records filed under a path before (or without) a remote stay the project's: the
    index joins every path scope whose repository has the same key (`Index.same_project`)."""
    common = git_common_dir(root)
    url = origin_url(common) if common is not None else None
    return normalise_remote(url) if url else str(root)


def default_write_scope(project: str | None) -> str:
    return project if project else GLOBAL_SCOPE


Known = Callable[[], Iterable[str]] | Iterable[str] | None  # the scopes a store holds, or how to get them


def write_scope(scope: str | None, project: str | None, known: Known = None) -> str | None:
    """A caller's `scope` for a write, in any spelling (see `resolve_scope`); None stays None (the store
    then keeps a correction's scope, or files the record under the current project). '*' names every
    scope, which no record can be filed under: refused."""
    if scope is None:
        return None

    if isinstance(scope, str) and scope.strip() == ALL_SCOPES:
        raise UsageError("scope '*' means every scope and is for reads only: a record goes to one scope",
                         hint="omit scope for the current project, or pass 'global' or a project's scope")
    return resolve_scope(check_scope(scope), project, known)


def default_read_scopes(project: str | None) -> list[str]:
    """The current project plus global records; global records only when there is no project (a read
    from outside every project must not show any project's memory)."""
    return [project, GLOBAL_SCOPE] if project else [GLOBAL_SCOPE]


def read_scopes(scope: str | None, project: str | None, known: Known = None) -> list[str] | None:
    """Resolve a caller's `scope` argument: None → defaults, "*" → every scope (None), else that one
    scope (a path in any spelling, a project's key or short name: see `resolve_scope`)."""
    if scope is None:
        return default_read_scopes(project)
    if isinstance(scope, str) and scope.strip() == ALL_SCOPES:
        return None

    return [resolve_scope(check_scope(scope), project, known)]


def default_note(scope: str | None, project: str | None) -> str | None:
    """What a read says when it took the default scopes outside every project: only global records."""
    if scope is not None or project:
        return None
    return ("no current project (not inside a git repository): only global records were read; name a "
            "project's scope, or '*' for every scope")


def unknown_note(asked: str, scopes: list[str] | None, project: str | None, known: Iterable[str]) -> str | None:
    """What a read of a scope the store has never held says: so, and the nearest known scopes."""
    if not scopes or len(scopes) != 1:
        return None
    scope = scopes[0]
    known = list(known)
    if scope in (GLOBAL_SCOPE, project) or scope in known:
        return None
    named = repr(asked) + (f" ({scope})" if scope != asked else "")
    several = by_short_name(asked, known)
    if len(several) > 1:
        return (f"scope {named} holds no records; it is the short name of several projects, so name one: "
                + ", ".join(several[:5]))
    near = nearest_scopes(scope, known)
    return (f"scope {named} holds no records" + ("; nearest known: " + ", ".join(near) if near else "")
            + " (see `retained scopes`)")


def short_name(scope: str) -> str:
    """The last part of a scope that names a project: `app` of `github.com/org/app` or `/src/app`."""
    return scope.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


def by_short_name(name: str, known: Iterable[str]) -> list[str]:
    """The known scopes whose short name is `name` (a project key before a path when both are there)."""
    if not name or "/" in name or "\\" in name or name in (GLOBAL_SCOPE, ALL_SCOPES):
        return []
    found = [s for s in known if s != name and s != GLOBAL_SCOPE and short_name(s) == name]
    return sorted(found, key=lambda s: (os.path.isabs(s), s))


def nearest_scopes(scope: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` known scopes spelled most like `scope` (whole, or by short name), nearest first."""
    import difflib  # lazy: +1.1 ms on every hook that finds the project (measured), for a misspelt scope

    pool = [s for s in known if s != scope]
    scored: dict[str, float] = {}
    for s in pool:
        whole = difflib.SequenceMatcher(None, scope, s).ratio()
        short = difflib.SequenceMatcher(None, short_name(scope), short_name(s)).ratio()
        best = max(whole, short)
        if best >= 0.6:
            scored[s] = best
    return sorted(scored, key=lambda s: (-scored[s], s))[:n]


# -- identity: what every worktree and clone of one repository share ------------------------------------
def git_common_dir(root: str | os.PathLike[str]) -> Path | None:
    """The repository's common git directory (shared by all its worktrees), or None."""
    dot = Path(root) / ".git"
    try:
        if dot.is_dir():
            return dot.resolve()
        text = dot.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:"):].strip())
    if not gitdir.is_absolute():
        gitdir = Path(root) / gitdir
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
        return (gitdir / common).resolve()
    except OSError:
        return gitdir.resolve()


def origin_url(common: Path) -> str | None:
    """`remote.origin.url` from the repository's config, read without running git."""
    try:
        lines = (common / "config").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    in_origin = False
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):
            in_origin = line.replace(" ", "").replace("'", '"').lower() == '[remote"origin"]'
        elif in_origin and "=" in line:
            key, _, value = line.partition("=")
            if key.strip().lower() == "url":
                return value.strip().strip('"') or None
    return None


def normalise_remote(url: str) -> str:
    """One spelling per repository: `git@github.com:Org/Repo.git`, `https://github.com/Org/Repo`
    and `ssh://git@github.com/Org/Repo.git/` all become `github.com/Org/Repo`."""
    u = url.strip()
    if u.lower().startswith("file://"):  # a local remote: its path
        u = u[len("file://"):]
    m = re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/]*@)?([^/:]+)(?::\d+)?/(.*)$", u)
    if m is None:
        m = re.match(r"^(?:[^@/]*@)?([^/:]+):(?!/)(.*)$", u)  # scp-like: user@host:path
    if m is None:  # a local path
        u = u.rstrip("/")
        return u[:-4] if u.endswith(".git") else u
    host, path = m.group(1).lower(), m.group(2).strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host}/{path}".rstrip("/")


def canonical_key(key: str) -> str:
    """A project key as compared: any URL spelling normalised (`normalise_remote`), then case, a
    `www.` host prefix and a trailing `.git` or slash set aside."""
    k = normalise_remote(key).lower().rstrip("/")
    if k.startswith("www."):
        k = k[4:]
    return k[:-4] if k.endswith(".git") else k


def same_project_key(a: str, b: str) -> bool:
    """Whether two spellings of a project key name one repository: equal once canonical, or equal in
    their path on hosts that differ only by name (an SSH host alias, a mirror's host name)."""
    ca, cb = canonical_key(a), canonical_key(b)
    if ca == cb:
        return True
    pa, pb = ca.partition("/")[2], cb.partition("/")[2]
    return bool(pa) and pa == pb and "/" in pa and not a.startswith("/") and not b.startswith("/")


def identity(root: str | os.PathLike[str]) -> dict[str, str] | None:
    """{"key", "name"} of the project at `root`: the normalised origin URL (the same for every worktree
    and clone, here or on a colleague's machine), else the git common directory; None outside git."""
    common = git_common_dir(root)
    if common is None:
        return None
    url = origin_url(common)
    if url:
        key = normalise_remote(url)
        return {"key": key, "name": key.rsplit("/", 1)[-1] or key}
    base = common.parent if common.name == ".git" else common
    return {"key": "git-dir:" + str(common), "name": base.name}


def project_identity(cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                     project_vars: Sequence[str] = ()) -> dict[str, str] | None:
    """The current project's stable key and short name (and its root), or None outside any project."""
    root = project_dir(cwd, env, project_vars)
    if root is None:
        return None
    ident = identity(root) or {"key": str(root), "name": root.name}
    return {**ident, "root": str(root)}


def resolve_scope(scope: str, project: str | None = None, known: Known = None) -> str:
    """Every spelling of a project's scope as the scope retained files it under (`scope_of`): `.`, a
    relative path, a trailing slash or a symlink (the git root when the path lies inside a repository),
    the current project's key or short name, and, from anywhere, the short name of a project the store
    knows (`known`: its scopes) when exactly one has it and no scope is spelled so. Anything else is
    returned as given."""
    if scope in (GLOBAL_SCOPE, ALL_SCOPES) or scope == project:
        return scope
    if project is not None:
        ident = identity(project) if os.path.isabs(project) and os.path.isdir(project) else None
        names = (ident["key"], ident["name"]) if ident else (project, project.rstrip("/").rsplit("/", 1)[-1])
        if scope in names:
            return project
    looks_like_path = scope.startswith((".", "/", "~")) or os.sep in scope or (os.altsep or "\0") in scope
    if looks_like_path or os.path.isdir(scope):
        try:
            real = Path(os.path.expanduser(scope)).resolve()
        except (OSError, RuntimeError):
            return scope
        if real.is_dir():
            root = find_root(real)
            return scope_of(root) if root is not None else str(real)
        return str(real) if scope.startswith((".", "~")) or scope.endswith(("/", os.sep)) else scope.rstrip("/") or scope
    if known is not None:
        scopes = list(known() if callable(known) else known)
        if scope not in scopes:
            found = by_short_name(scope, scopes)
            keys = [s for s in found if not os.path.isabs(s)]
            if len(keys) == 1 or (not keys and len(found) == 1):
                return (keys or found)[0]
    return scope
