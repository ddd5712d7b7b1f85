"""The order rows take across logs: a clock per row, `(ord_ms, ord_n)`, compared before the row key.

Every record retained writes carries its hybrid logical clock (`hlc`, retained/team/hlc.py) from the
moment it is written (`Appender.seal`: past every clock the index holds and the wall clock), and its
shared copy keeps it: a record has the same place in the team's order on every clone. A local record
without one (written before clocks, or by another program) gets one advanced along the log from its
`ts`. Rows of the local log are strictly increasing in log order, so newest-first over the local log
alone is still log order. Pure; no SQL.
"""

from __future__ import annotations

from .. import records


def ts_ms(ts: object) -> int:
    """Milliseconds since the epoch of an RFC 3339 `ts`; 0 when it does not parse."""
    return max(0, records.ts_ms(ts) or 0)


#: The next local row's clock after `last`, for a record written at `wall_ms` (records.next_clock).
advance = records.next_clock


def hlc_of(rec: dict) -> tuple[int, int] | None:
    """The record's own `hlc` ([ms, n], two non-negative integers), or None."""
    value = rec.get("hlc")
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                          for v in value):
        return value[0], value[1]
    return None


def of_record(rec: dict, last: tuple[int, int] | None) -> tuple[int, int]:
    """A teammate's record: its `hlc` when it has one (a tombstone keeps none: its `ts`). A local
    record (`last` given): its own `hlc`, which it carries from its write on (the clock its shared copy
    keeps, so it sorts the same on every clone), when that comes after the previous local row; else
    (a record written before clocks, or by another program) advanced from the previous local row."""
    own = hlc_of(rec)
    if last is not None:
        return own if own is not None and own > last else advance(last, ts_ms(rec.get("ts")))
    return own if own is not None else (ts_ms(rec.get("ts")), 0)
