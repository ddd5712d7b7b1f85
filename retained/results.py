"""What retained's operations return, typed once: the tools' structuredContent, the CLI's --json.

These are the shapes `Store` returns and the MCP tools publish as their outputSchema; the command
line and the web page read the same keys. Only `typing`, so importing this costs nothing on any
path (the hook's, the early replies'): no `mcp`, no pydantic, no `typing_extensions`.

Kept to what Python 3.10 understands: a key that may be absent is declared in a `total=False`
class (`NotRequired` needs 3.11). pydantic reads a `typing.TypedDict` only from Python 3.12 on, so
`retained/server.py` rebuilds these for the SDK on older versions.

No class here has a docstring: pydantic would publish it as a `description` in tools/list.
"""

from typing import Any, Literal, TypedDict


# What a write proves before it is acknowledged: durable is true only when all four hold.
class Checks(TypedDict):
    append: bool
    fsync: bool
    readback_match: bool
    chain: bool


# The receipt of memory_write, memory_checkpoint and `retained write`.
class WriteReceipt(TypedDict):
    id: str
    seq: int
    sha256: str
    durable: bool
    checks: Checks
    warnings: list[str]
    deduplicated: bool


class _HitFields(TypedDict):
    id: str
    seq: int
    ts: str
    kind: str
    scope: str
    text: str


# One record as search and list show it; the optional keys appear only when they say something.
class Hit(_HitFields, total=False):
    score: float
    supersedes: str
    superseded_by: str
    text_truncated: bool
    text_chars: int
    writer: str
    author: str
    conflict: dict[str, Any]


class SearchHit(Hit):
    match: Literal["words", "meaning", "both"]


class SearchResult(TypedDict):
    hits: list[SearchHit]
    total_matched: int
    total_exact: bool
    returned: int
    truncated: bool
    match: Literal["all", "any"]
    semantic: str
    warnings: list[str]


class _GetFields(TypedDict):
    records: list[dict[str, Any]]
    missing: list[str]
    damaged: list[str]
    corrupt_lines: int
    chain_ok: bool
    warnings: list[str]


# Whole records by id; `total` and `truncated` only when no ids were given (the newest records).
class GetResult(_GetFields, total=False):
    total: int
    truncated: bool


class _ListFields(TypedDict):
    records: list[Hit]
    total: int
    returned: int
    truncated: bool
    next_cursor: str | None
    warnings: list[str]


# `scopes` only when the scopes were asked for instead of records.
class ListResult(_ListFields, total=False):
    scopes: list[dict[str, Any]]


# Where the chain first fails to verify.
class Break(TypedDict):
    seq: int | None
    line: int
    reason: str


class VerifyResult(TypedDict):
    records: int
    chain_ok: bool
    corrupt_lines: list[dict[str, Any]]
    corrupt_count: int
    chain_breaks: list[dict[str, Any]]
    torn_tail: dict[str, int] | None
    missing_from_index: int
    index_only: int
    coverage: float
    intact: bool
    first_break: Break | None
    last_seq: int
    quarantine: dict[str, Any]
    team_logs: list[dict[str, Any]]  # each teammate's log the index reads: writer, records, intact, ...
    warnings: list[str]


# The receipt of a retraction (memory_forget, `retained forget`) or of `forget --undo`.
class ForgetReceipt(WriteReceipt):
    action: str
    targets: list[str]
    reason: str | None


# The receipt of `retained forget --purge` (a person's command; no tool purges).
class PurgeReceipt(WriteReceipt):
    action: str
    purged: list[dict[str, Any]]
    reason: str | None
