"""Which project a call belongs to: the scope records are filed under by default.

What a host says about the project (the environment variables that carry its directory) reaches
this module as arguments: the callers ask the host registry; this module imports none of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .records import GLOBAL_SCOPE


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
        try:
            starts.append(os.getcwd())
        except OSError:
            pass
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


def write_scope(scope: str | None, project: str | None) -> str | None:
    """A caller's `scope` for a write, in any spelling (see `resolve_scope`); None stays None (the store
    then keeps a correction's scope, or files the record under the current project)."""
    if scope is None:
        return None
    from .records import check_scope

    return resolve_scope(check_scope(scope), project)


def default_read_scopes(project: str | None) -> list[str] | None:
    """The current project plus global records; every scope (None) when there is no project."""
    return [project, GLOBAL_SCOPE] if project else None


def read_scopes(scope: str | None, project: str | None) -> list[str] | None:
    """Resolve a caller's `scope` argument: None → defaults, "*" → every scope, else that one scope
    (a path in any spelling, the project's key or its short name: see `resolve_scope`)."""
    if scope is None:
        return default_read_scopes(project)
    if scope == "*":
        return None
    from .records import check_scope

    return [resolve_scope(check_scope(scope), project)]


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
    import re

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


def resolve_scope(scope: str, project: str | None = None) -> str:
    """Every spelling of a project's scope as the scope retained files it under (`scope_of`): `.`, a
    relative path, a trailing slash or a symlink (the git root when the path lies inside a repository),
    and the current project's key or short name. Anything else is returned as given."""
    from .records import GLOBAL_SCOPE as _GLOBAL

    if scope in (_GLOBAL, "*") or scope == project:
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
    return scope
