"""Plain tool calls answered without the MCP SDK, the way the SDK would answer them.

Importing the SDK takes most of a second, and a host's first `tools/call` (often a write) would
wait for it; once it is up, its path (reader and tool threads, pydantic both ways) costs a write
more than the write itself. `stdio_guard.EarlyReplies` hands a plain call here, before the SDK is
up and after, whenever no request handed to the SDK is still unanswered; this runs retained's
own tool body (`Tools`, through `server.run_tool`, the code the SDK calls) and shapes the result as
the SDK does (`server.py`'s `RetainedServer.call_tool`): the text of retained/replies.py, the
structured content as pydantic validates it against the result's TypedDict (declared keys in
declared order, others dropped, an int where a float is declared made a float), a failure as
`"Error executing tool <name>: <why>"` with `isError`.

Only a call whose arguments are plainly what the tool takes is answered here (`accepts`): each key a
parameter, every required one there, each value of exactly the parameter's JSON type, numbers within
their bounds, and nothing the SDK would first re-read as JSON (a string like "null" or "[1]" for a
parameter that is not a plain string). Anything else, including what pydantic would coerce (the string
"5" for an integer), is left to the SDK, which answers it as it always does.

Nothing here imports the SDK or pydantic.
"""

from __future__ import annotations

import json
import logging
import math
import types
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Literal, Union, get_args, get_origin, is_typeddict

from .index import Index
from .replies import reply_text
from .server import ToolFailed, run_tool
from .stdio_guard import nothing_after_reply
from .store import Store
from .tools import TOOLS, Parameter, Tools, parameters

log = logging.getLogger("retained.server")

_INT_RANGE = 2**63  # an integer argument outside SQLite's range is left to the SDK
_MAX_DEPTH = 32  # free-form `fields` nested deeper are left to the SDK


class EarlyCalls:
    """retained's tools bound to one store and project, answering plain calls without the SDK."""

    def __init__(self, tools: Tools, store: Store, project: str | None) -> None:
        self._tools = tools
        self._store = store
        self._project = project
        self._params: dict[str, list[Parameter]] = {t.name: parameters(getattr(Tools, t.name)) for t in TOOLS}

    def accepts(self, name: str, arguments: Any) -> bool:
        """Whether `arguments` are plainly what tool `name` takes (so the SDK would pass them on as they are)."""
        params = self._params.get(name)
        if params is None or not isinstance(arguments, dict):
            return False
        by_name = {p.name: p for p in params}
        if set(arguments) - set(by_name) or any(p.required and p.name not in arguments for p in params):
            return False
        return all(_plain(value, by_name[key]) for key, value in arguments.items())

    def answering(self) -> AbstractContextManager[Callable[[], None]]:
        """Around a call and the writing of its reply: the index takes in what the call appended on this
        thread once the reply is out (the yielded function), not on the background thread meanwhile."""
        index = getattr(self._store, "index", None)
        if not isinstance(index, Index):  # the stand-in for a store that could not be opened: nothing to take in
            return nothing_after_reply()
        return index.catching_up_here()

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The `tools/call` result the SDK sends for this call (handshake era), after running it here."""
        try:
            result = run_tool(getattr(self._tools, name), arguments, self._store)
        except ToolFailed as e:
            log.info("Tool %r failed: %r", name, str(e))
            return _failed(f"Error executing tool {name}: {e}")
        except Exception as e:  # a crash: its text stays here, as the SDK keeps it on the server
            log.error("tool %s raised an unexpected exception: %s", name, type(e).__name__)
            return _failed(f"Error executing tool {name}")
        try:
            structured = _structured(result, getattr(Tools, name).__annotations__["return"])
        except _Unshapable as e:
            log.error("tool %s returned what its result type does not hold: %s", name, e)
            return _failed(f"Error executing tool {name}")
        text = reply_text(name, structured, self._project)
        return {"content": [{"text": text, "type": "text"}], "isError": False, "structuredContent": structured}


def _failed(text: str) -> dict[str, Any]:
    return {"content": [{"text": text, "type": "text"}], "isError": True}


# -- arguments: exactly the JSON type a parameter declares ----------------------------------------------
def _plain(value: Any, param: Parameter) -> bool:
    kind = param.type
    if isinstance(value, str) and kind is not str and _json_reparsed(value):
        return False  # the SDK would parse it as JSON first (its pre_parse_json) and decide on that
    if not _of_type(value, kind):
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        lo, hi = param.param.ge, param.param.le
        return (lo is None or value >= lo) and (hi is None or value <= hi)
    return True


def _json_reparsed(text: str) -> bool:
    """Whether the SDK would put the JSON value of `text` in its place: an object, a list, true, false or null
    (a string, number or nothing JSON is left as the string)."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return not isinstance(parsed, (str, int, float))


def _of_type(value: Any, kind: Any) -> bool:
    """`value` as JSON gives it is exactly of `kind` (str, int, bool, list[str], dict[str, Any], X | None)."""
    origin, args = get_origin(kind), get_args(kind)
    if origin is Union or origin is types.UnionType:
        return any(_of_type(value, a) for a in args)
    if kind is type(None):
        return value is None
    if kind is str:
        return type(value) is str
    if kind is bool:
        return type(value) is bool
    if kind is int:
        return type(value) is int and -_INT_RANGE <= value < _INT_RANGE
    if origin is list:
        return type(value) is list and all(_of_type(v, args[0]) for v in value)
    if origin is dict:
        return type(value) is dict and args[0] is str and args[1] is Any and _shallow(value, _MAX_DEPTH)
    return False


def _shallow(value: Any, room: int) -> bool:
    """Nested no deeper than `room` levels: deeper free-form data is the SDK's to take or refuse."""
    if isinstance(value, dict):
        return room > 0 and all(_shallow(v, room - 1) for v in value.values())
    if isinstance(value, list):
        return room > 0 and all(_shallow(v, room - 1) for v in value)
    return True


# -- results: as pydantic validates and dumps them against the declared TypedDict ------------------------
class _Unshapable(Exception):
    pass


def _structured(value: Any, kind: Any) -> Any:
    """`value` as the SDK's structuredContent holds it (pydantic's validation against `kind`, dumped as JSON)."""
    if kind is Any:
        return _jsonable(value)
    if is_typeddict(kind):
        if not isinstance(value, dict):
            raise _Unshapable(f"{kind.__name__}: not a dict")
        shaped = {}
        for key, sub in kind.__annotations__.items():  # declared order; undeclared keys are dropped
            if key in value:
                shaped[key] = _structured(value[key], sub)
            elif key in kind.__required_keys__:
                raise _Unshapable(f"{kind.__name__}: no {key}")
        return shaped
    origin, args = get_origin(kind), get_args(kind)
    if origin is Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        others = [a for a in args if a is not type(None)]
        if len(others) == 1:
            return _structured(value, others[0])
        raise _Unshapable(f"a union of {len(others)} types")
    if origin is Literal:
        if isinstance(value, str) and value in args:
            return value
        raise _Unshapable(f"{value!r} is none of {args}")
    if origin is list and isinstance(value, (list, tuple)):
        return [_structured(v, args[0]) for v in value]
    if origin is dict and isinstance(value, dict) and all(type(k) is str for k in value):
        return {k: _structured(v, args[1]) for k, v in value.items()}
    if kind is str and type(value) is str:
        return value
    if kind is bool and type(value) is bool:
        return value
    if kind is int and type(value) is int:
        return value
    if kind is float and type(value) in (int, float):
        return float(value)
    raise _Unshapable(f"{type(value).__name__} where {kind} is declared")


def _jsonable(value: Any) -> Any:
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict) and all(type(k) is str for k in value):
        return {k: _jsonable(v) for k, v in value.items()}
    raise _Unshapable(f"a {type(value).__name__} in a free-form field")
