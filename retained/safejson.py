"""JSON from outside, read within bounds: a nesting depth and a size, and one error type.

Python's `json` parses nested containers by recursion, so one line of a few thousand `[` raises
RecursionError, which is no ValueError: every `except ValueError` around a `json.loads` lets it
through, and a log line, an MCP request or an import file of that shape took the whole command or
server down. `loads` refuses such input before the parser sees it, and every way JSON can be bad (not
UTF-8, not JSON, too deep, too big, a number too long to convert) comes out as one exception,
`JSONError`, a `json.JSONDecodeError`: code that already catches ValueError and reads `.msg` keeps
working unchanged.

The depth bound also protects whoever walks the value afterwards (canonical serialisation, redaction,
validation): MAX_DEPTH is far below the interpreter's recursion limit. Standard library only: the
hook path imports this.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate

TYPE_CHECKING = False  # typing's, without importing typing: +3.3 ms on the warm prompt hook (-X importtime, measured)
if TYPE_CHECKING:
    from typing import Any

#: Deeper than any record, request or config file anyone writes on purpose (they nest a handful of
#: levels), and far enough below the interpreter's recursion limit (1,000) that recursive code
#: handling a value after it was read still has room.
MAX_DEPTH = 256
#: The default size bound, for callers that have no tighter one of their own.
MAX_BYTES = 64 * 1024 * 1024

# A complete JSON string literal, unrolled so that the engine does not backtrack on long strings.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JSONError(json.JSONDecodeError):
    """JSON that cannot be taken: `msg` says why in a few words (`reason` is the same text)."""

    def __init__(self, msg: str, doc: str = "", pos: int = 0) -> None:
        super().__init__(msg, doc, pos)
        self.reason = msg

    def __str__(self) -> str:  # a refused whole has no position worth naming
        return super().__str__() if self.doc else self.msg


def loads(data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES,
          errors: str = "strict") -> Any:
    """Parse one JSON document, or raise JSONError. Bytes must be UTF-8 (as JSON on a wire or in a
    file of retained's is); a BOM or UTF-16 is "not UTF-8", not guessed at. `errors="surrogatepass"`
    takes lone surrogates as `json.loads` of bytes does (retained's own sockets carry them)."""
    if len(data) > max_bytes:
        raise JSONError(f"larger than {max_bytes:,} bytes")
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8", errors)
        except UnicodeDecodeError as e:
            raise JSONError(f"not UTF-8 (byte {e.start})", "", e.start) from None
    else:
        text = data
    if _may_be_deeper(text, max_depth) and text_depth(text) > max_depth:
        raise JSONError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:  # a stack already deep when we were called: still too deep for it
        raise JSONError(f"nested deeper than this reader can follow (the limit is {max_depth})") from None
    except json.JSONDecodeError as e:
        raise JSONError(e.msg, e.doc, e.pos) from None
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        raise JSONError(str(e).split(";")[0]) from None


def _may_be_deeper(text: str, max_depth: int) -> bool:
    """Cheap (two C-level counts): fewer brackets than the bound cannot nest deeper than it."""
    return text.count("[") + text.count("{") > max_depth


def text_depth(text: str) -> int:
    """How deep the containers of a JSON text nest, brackets inside strings aside; linear time."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def depth(value: Any, limit: int | None = None) -> int:
    """How deep a parsed value nests (a scalar is 0, `[]` is 1); stops counting past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, (list, tuple)):
            continue
        d += 1
        deepest = max(deepest, d)
        if limit is not None and deepest > limit:
            return deepest
        stack.extend((c, d) for c in v if isinstance(c, (dict, list, tuple)))
    return deepest


def check_depth(value: Any, max_depth: int = MAX_DEPTH, what: str = "value") -> None:
    """Raise JSONError when a value built elsewhere (an MCP argument, a --field) nests too deep to be
    written: the log's reader would refuse its line."""
    if depth(value, max_depth) > max_depth:
        raise JSONError(f"{what} is nested deeper than {max_depth} levels")


def dumps(value: Any, **kw: Any) -> str:
    """`json.dumps(value, **kw)` that is always strict JSON: a float that is not finite (NaN, Infinity,
    which Python's json reads and writes but JSON has not) is written as null. A value without one costs
    a single dumps; one with one (a record a program appended, a vector from another process) is walked."""
    try:
        return json.dumps(value, allow_nan=False, **kw)
    except ValueError:
        return json.dumps(finite(value), allow_nan=False, **kw)


def finite(value: Any) -> Any:
    """`value` with every float that is not finite made None (containers copied, all else as it is)."""
    if isinstance(value, float):
        return value if value - value == 0 else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
