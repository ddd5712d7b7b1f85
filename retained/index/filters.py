"""The conditions reads add to their SQL, written once: which rows a read may show (not hidden), which
scopes and kind it asked for, and what was current at a point in time. Callers outside the package
pass filters (scopes, kind, as_of, include_superseded), never SQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records import FORGET_KIND

if TYPE_CHECKING:
    from typing import Any


def visible(alias: str = "") -> str:
    """The SQL condition every default read adds: the row is not retracted, purged or a forget record,
    and neither is the head of its chain. `alias` names the records table in the query."""
    return f"{alias + '.' if alias else ''}hidden = 0"


def visible_at(prefix: str, as_of: str) -> tuple[str, list[Any]]:
    """`visible` as the store stood at `as_of`: a record retracted later (itself, or through the head
    of its chain) was still shown then; a purged record or a forget record never is."""
    by = f"COALESCE({prefix}retracted_by, (SELECT x.retracted_by FROM records x WHERE x.line = {prefix}head))"
    return (f"({prefix}hidden = 0 OR ({prefix}tomb = 0 AND {prefix}kind != ? AND "
            f"COALESCE((SELECT f.ts FROM records f WHERE f.id = {by}), '') > ?))"), [FORGET_KIND, as_of]


def marks(values: list[Any] | tuple[Any, ...]) -> str:
    """'?,?,?': one bound parameter per value, for an IN (...) list."""
    return ",".join("?" * len(values))


def scope_clause(scopes: list[str] | None, column: str) -> tuple[str, list[Any]]:
    if not scopes:
        return "", []
    return f" AND {column} IN ({marks(scopes)})", list(scopes)


def filter_clause(alias: str, scopes: list[str] | None, kind: str | None, as_of: str | None,
                  include_superseded: bool) -> tuple[str, list[Any]]:
    """WHERE terms (each starting with AND) selecting the records a read may show.

    With `as_of`: records written at or before it, and (unless include_superseded) only those not
    superseded by a record written at or before it. Without it, and unless include_superseded, only
    current records (for alias "r"; alias "h" names chain heads, current by definition).
    """
    where, params = scope_clause(scopes, f"{alias}.scope")
    if as_of is None:
        where += " AND " + visible(alias)
    else:
        clause, more = visible_at(alias + ".", as_of)
        where += " AND " + clause
        params += more
    if kind is not None:
        where += f" AND {alias}.kind = ?"
        params.append(kind)
    if as_of is not None:
        clause, more = as_of_clause(alias + ".", as_of, include_superseded)
        where += clause
        params += more
    elif not include_superseded and alias == "r":
        where += " AND r.superseded_by IS NULL"
    return where, params


def as_of_clause(prefix: str, as_of: str, include_superseded: bool) -> tuple[str, list[Any]]:
    """Records as they stood at `as_of` (a normalised UTC timestamp): written at or before it and,
    unless include_superseded, not yet superseded by a record written at or before it. `prefix` is
    the table alias with its dot, or ''."""
    where, params = f" AND {prefix}ts <= ?", [as_of]
    if not include_superseded:
        where += (f" AND ({prefix}superseded_by IS NULL OR NOT EXISTS (SELECT 1 FROM records s"
                  f" WHERE s.id = {prefix}superseded_by AND s.ts <= ?))")
        params.append(as_of)
    return where, params
