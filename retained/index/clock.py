"""The order rows take across logs: a clock per row, `(ord_ms, ord_n)`, compared before the row key.

A teammate's record carries its hybrid logical clock (`hlc`, retained/team/hlc.py). A record of the
local log gets one the same way, advanced along the log from each record's `ts`: strictly increasing
in log order, so newest-first over the local log alone is still log order, and across logs it sorts
by when each record was written (or, for a record that saw another, after it). Pure; no SQL.
"""

from __future__ import annotations

from .. import records


def ts_ms(ts: object) -> int:
    """Milliseconds since the epoch of an RFC 3339 `ts`; 0 when it does not parse."""
    return max(0, records.ts_ms(ts) or 0)


def advance(last: tuple[int, int], wall_ms: int) -> tuple[int, int]:
    """The next local row's clock after `last`, for a record written at `wall_ms`."""
    if wall_ms > last[0]:
        return wall_ms, 0
    return last[0], last[1] + 1


def of_record(rec: dict, last: tuple[int, int] | None) -> tuple[int, int]:
    """A teammate's record: its `hlc` when it has one (a tombstone keeps none: its `ts`); a local
    record (`last` given): advanced from the previous local row."""
    if last is not None:
        return advance(last, ts_ms(rec.get("ts")))
    value = rec.get("hlc")
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                          for v in value):
        return value[0], value[1]
    return ts_ms(rec.get("ts")), 0
