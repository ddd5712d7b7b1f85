"""The team's clock and order: a hybrid logical clock per record and one total order on every clone. Pure.

A writer's clock is `(ms, n)`: wall-clock milliseconds and a counter. A new record's clock is past both
the wall clock at writing and every clock the writer had seen by then (its own last record and every
record it had imported from teammates), so a record that saw another always sorts after it, however
wrong the wall clocks are. "Newest" across writers is the total order `(ms, n, writer, sha256)`: the
same on every clone because it uses only what the records carry.

What a writer had seen when it wrote is known from its import history (`Imports`): each sync that
brought teammates' lines in notes when they became readable and how far each teammate's log reached.
A record published later (offline, a failed push) takes the clock and the `seen` heads of the last
import before its own `ts`, not of the sync that publishes it: it did not see what came in since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ..records import MAX_CLOCK_DRIFT_MS, next_clock
from ..records import ts_ms as ts_ms  # a stored time in milliseconds, read one way (records.py)

#: A teammate's clock this far ahead of ours is not followed (its records keep their own clock, ours
#: do not jump ahead with it): one bad clock would otherwise drag every later record of the team along.
MAX_DRIFT_MS = MAX_CLOCK_DRIFT_MS
#: Import history entries kept beyond the one that covers the oldest pending record.
KEEP_IMPORTS = 8


class HLC(NamedTuple):
    ms: int
    n: int

    def as_json(self) -> list[int]:
        return [self.ms, self.n]


ZERO = HLC(0, 0)


def parse(value: object) -> HLC | None:
    """A record's `hlc` field (`[ms, n]`, two non-negative integers), or None when it is not one."""
    if not isinstance(value, list) or len(value) != 2:
        return None
    ms, n = value
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in (ms, n)):
        return None
    return HLC(ms, n)


def tick(last: HLC, wall_ms: int) -> HLC:
    """The clock of a new record written at `wall_ms` after everything up to `last`: strictly after `last`."""
    return HLC(*next_clock(last, wall_ms))


def observe(last: HLC, seen: HLC, now_ms: int) -> tuple[HLC, bool]:
    """`last` advanced past `seen`, unless `seen` runs more than MAX_DRIFT_MS ahead of `now_ms`.
    Returns (clock, followed): followed is False when `seen` was too far ahead to follow."""
    if seen.ms > now_ms + MAX_DRIFT_MS:
        return last, False
    return max(last, seen), True


def order_key(writer: str, record: Mapping[str, object]) -> tuple[int, int, str, str]:
    """The team's total order: (hlc ms, hlc counter, writer, sha256). A record without a clock (a
    tombstone keeps none) sorts first; the writer and the hash still make the order total."""
    clock = parse(record.get("hlc")) or ZERO
    return clock.ms, clock.n, writer, str(record.get("sha256", ""))




class Import(NamedTuple):
    """One sync that made teammates' lines readable here.

    `at`: just before the new lines became readable (a record written later may have seen them, so
    the clock is advanced past `hlc` from then on: the safe side for order). `done`: once they were
    (only a record written later counts them in `seen`: the safe side for delete-wins, which must
    never believe an edit saw a retraction it did not)."""

    at: int
    done: int | None
    hlc: HLC
    heads: dict[str, int]

    def as_json(self) -> dict[str, object]:
        return {"at": self.at, "done": self.done, "hlc": self.hlc.as_json(), "heads": dict(self.heads)}


def parse_imports(value: object) -> list[Import]:
    """The import history as saved in the sync state; entries that do not parse are dropped."""
    out: list[Import] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        at, done, clock, heads = item.get("at"), item.get("done"), parse(item.get("hlc")), item.get("heads")
        if not isinstance(at, int) or clock is None or not isinstance(heads, dict):
            continue
        if done is not None and not isinstance(done, int):
            done = None
        out.append(Import(at, done, clock, {str(k): v for k, v in heads.items() if isinstance(v, int)}))
    return sorted(out, key=lambda i: i.at)


def floor_at(imports: Sequence[Import], when_ms: int) -> HLC:
    """The highest clock a record written at `when_ms` may have seen (its clock must pass it)."""
    best = ZERO
    for item in imports:
        if item.at <= when_ms:
            best = max(best, item.hlc)
    return best


def seen_at(imports: Sequence[Import], when_ms: int) -> dict[str, int]:
    """How far each teammate's log had been read here by `when_ms` (seq per writer): what a record
    written then had certainly seen."""
    heads: dict[str, int] = {}
    for item in imports:
        if item.done is not None and item.done <= when_ms:
            for writer, seq in item.heads.items():
                heads[writer] = max(heads.get(writer, 0), seq)
    return heads


def prune(imports: Sequence[Import], oldest_pending_ms: int | None, now_ms: int) -> list[Import]:
    """Drop the history no record can still need. Heads and clocks only grow, so the last entry
    completed before both the oldest record not yet published and now stands for every entry
    before it; those go (KEEP_IMPORTS of the newest always stay)."""
    ordered = sorted(imports, key=lambda i: i.at)
    horizon = now_ms if oldest_pending_ms is None else min(oldest_pending_ms, now_ms)
    covered = [i for i, item in enumerate(ordered) if item.done is not None and item.done <= horizon]
    cut = min(covered[-1] if covered else 0, max(0, len(ordered) - KEEP_IMPORTS))
    return ordered[cut:]
