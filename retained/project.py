"""Which project a call belongs to: the scope records are filed under by default."""

from __future__ import annotations

import os
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


def project_dir(cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None) -> Path | None:
    """The project a call belongs to, the same rule for the CLI, the server and the hooks.

    The git root of CLAUDE_PROJECT_DIR (when a host sets it) or of `cwd` (default: the process cwd);
    without a git root, CLAUDE_PROJECT_DIR itself; else no project.
    """
    env = os.environ if env is None else env
    hinted = env.get("CLAUDE_PROJECT_DIR", "").strip()
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


def project_scope(cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None) -> str | None:
    """The scope string of the current project (its absolute path), or None outside any project."""
    root = project_dir(cwd, env)
    return str(root) if root is not None else None


def default_write_scope(project: str | None) -> str:
    return project if project else GLOBAL_SCOPE


def default_read_scopes(project: str | None) -> list[str] | None:
    """The current project plus global records; every scope (None) when there is no project."""
    return [project, GLOBAL_SCOPE] if project else None


def read_scopes(scope: str | None, project: str | None) -> list[str] | None:
    """Resolve a caller's `scope` argument: None → defaults, "*" → every scope, else that one scope."""
    if scope is None:
        return default_read_scopes(project)
    if scope == "*":
        return None
    from .records import check_scope

    return [check_scope(scope)]
