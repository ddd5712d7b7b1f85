"""The MCP server: retained's tools (retained/tools.py) registered with the SDK, bound to a store and a project.

`build_server` is all of it: each tool's method becomes an SDK tool whose schemas the SDK generates,
cut to what an agent reads (`compact_schema`); a failure becomes a one-line tool error worded for a
model (`for_model`, `argument_error`), and a result's text is compact lines (retained/replies.py).
With `stdio_guard`, the only module that imports `mcp` (retained/transport.py imports this module once
the opening replies are out: the SDK's import takes about half a second); how the server runs over
stdio (the guard, the early replies, SIGTERM, warm-up) is `retained/transport.py`.

handshake.json's key covers the definitions in retained/tools.py, not the code here: after a change
to how a schema is made or cut, capture it again (tests/test_server.py fails until then).
"""

import inspect
import json
import re
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin, is_typeddict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError
from typing_extensions import NotRequired, TypedDict

from . import __version__
from .errors import RetainedError
from .instructions import GUIDANCE as GUIDANCE
from .instructions import INSTRUCTIONS_MAX_CHARS as INSTRUCTIONS_MAX_CHARS
from .instructions import compute_instructions as compute_instructions
from .replies import reply_text
from .store import Store
from .tools import HERE, SERVER_NAME, TOOLS, ServedStore, Tools, here_phrase, parameters, unknown_arguments

# -- errors a model can act on: one line, naming tools and arguments, never CLI flags -----------------
# What core messages say for the command line, and what a model over MCP can do instead.
_FOR_MODEL = (
    ("run `retained verify`", "run memory_verify"),
    ("`retained verify`", "memory_verify"),
    ("run `retained reindex`", "the search index needs rebuilding: tell the user"),
    ("`retained reindex`", "a rebuild of the search index (tell the user)"),
    ("copy the id from `search` or `list`", "copy the id from memory_search or memory_list"),
    ("find it with search or list", "find it with memory_search or memory_list"),
    ("copy the id from search, list or a receipt", "copy the id from memory_search, memory_list or a receipt"),
    ("write the memory as a new record, without supersedes", "memory_write it as a new record, without supersedes"),
    ("write a new record instead", "memory_write a new record instead"),
    ("to correct it, write with supersedes", "to correct it, memory_write with supersedes"),
    ("or pass --dir for a store of your own", "or use a store of their own"),
    ("pass --dir or set RETAINED_DIR to a writable place", "the user must point retained at a writable directory"),
    ("pass --dir pointing at a directory", "the user must point retained at a directory"),
    ("or point --dir at the directory that holds it", "or point retained at the directory that holds it"),
    ("run as the store's owner", "the store's owner can write to it"),
    ("(see `retained scopes`)", "(memory_list with scopes=true lists them)"),
    ("`retained scopes`", "memory_list with scopes=true"),
    ("use memory_forget (or `retained forget`)", "use memory_forget"),
    ("`retained reindex` embeds them all now", "a reindex by the user embeds them all now"),
    ("pass --meaning to load it here (about half a second)", "the next search may use it"),
    ("write a record first, or pass the right --dir", "write a record first, or the user must point retained at the store"),
    ("to bring records back, use undo on their ids", "only a person can bring retracted records back"),
    ("undo that one", "only a person can bring it back"),
)


def _no_cli(text: str) -> str:
    """What no mapping above rewrote: a `retained …` command is the user's to run, not the model's."""
    return re.sub(r"`retained ([a-z-]+)[^`]*`", r"the user's retained \1 command", text)


def for_model(text: str | None) -> str | None:
    """A hint or warning worded for the command line, reworded for a model calling tools."""
    if not text:
        return text
    for cli, tool in _FOR_MODEL:
        text = text.replace(cli, tool)
    return _no_cli(text)


_JSON_TYPES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
               "array": "a list", "object": "a JSON object", "null": "null"}


def _expects(schema: dict[str, Any]) -> str:
    """What a JSON schema asks for, in words: 'an integer from 1 to 100', 'a list of strings'."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        words = [_expects(o) for o in options if isinstance(o, dict) and o.get("type") != "null"]
        nullable = any(isinstance(o, dict) and o.get("type") == "null" for o in options)
        return " or ".join(words) + (" (or leave it out)" if nullable else "")
    kind = schema.get("type")
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    text = _JSON_TYPES.get(kind, "a value of the documented type") if isinstance(kind, str) else "a value"
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if kind in ("integer", "number") and lo is not None and hi is not None:
        text += f" from {lo} to {hi}"
    elif kind in ("integer", "number") and lo is not None:
        text += f" of at least {lo}"
    elif kind in ("integer", "number") and hi is not None:
        text += f" of at most {hi}"
    items = schema.get("items")
    if kind == "array" and isinstance(items, dict) and isinstance(items.get("type"), str):
        text += " of " + {"string": "strings", "integer": "integers", "number": "numbers"}.get(items["type"], "values")
    return text


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def argument_error(tool: str, errors: Sequence[Mapping[str, Any]], schema: dict[str, Any] | None) -> str:
    """The SDK's pydantic dump for bad tool arguments, as one line naming each argument and what it expects."""
    props = (schema or {}).get("properties", {})
    parts: list[str] = []
    for err in errors:
        loc = [p for p in err.get("loc", ()) if p != "__root__"]
        if not loc:
            parts.append("the arguments must be a JSON object")
            continue
        name = str(loc[0])
        prop = props.get(name, {}) if isinstance(props.get(name), dict) else {}
        where = name + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])
        if len(loc) > 1 and isinstance(loc[1], int) and isinstance(prop.get("items"), dict):
            prop = prop["items"]
        elif len(loc) > 1 and isinstance(prop.get("anyOf"), list):  # the item of a nullable list
            inner = next((o for o in prop["anyOf"] if isinstance(o, dict) and o.get("type") == "array"), {})
            prop = inner.get("items", prop) if isinstance(loc[1], int) else prop
        if err.get("type") == "missing":
            parts.append(f"argument {where} is required: {_expects(prop)}")
            continue
        got = json.dumps(err.get("input"), ensure_ascii=False, default=str)
        got = got if len(got) <= 40 else got[:39] + "…"
        parts.append(f"argument {where} must be {_expects(prop)} (got {got}, {_json_kind(err.get('input'))})")
    return f"Error executing tool {tool}: " + "; ".join(dict.fromkeys(parts))


class RetainedServer(MCPServer):
    """MCPServer with argument errors in one line instead of pydantic's dump with its URL."""

    reply_project: str | None = None  # the current project, named in reply text only when it differs
    input_schemas: dict[str, dict[str, Any]]  # each tool's inputSchema as published, set by build_server

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = (self.input_schemas.get(name) or {}).get("properties")
        if isinstance(arguments, dict) and isinstance(known, dict) and set(arguments) - set(known):
            raise ToolError(unknown_arguments(name, sorted(set(arguments) - set(known)), list(known)))
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                schema = self.input_schemas.get(name)
                raise ToolError(argument_error(name, e.__cause__.errors(), schema)) from None
            raise
        # The model reads the text: compact lines instead of the SDK's indented JSON (issue 10);
        # structuredContent keeps every field.
        if isinstance(result, CallToolResult) and not result.is_error and isinstance(result.structured_content, dict):
            text = reply_text(name, result.structured_content, self.reply_project)
            result = result.model_copy(update={"content": [TextContent(type="text", text=text)]})
        return result


def build_server(store: ServedStore, project: str | None, instructions: str | None = None,
                 session_id: str | None = None) -> RetainedServer:
    """The MCPServer with retained's tools, bound to one store and one project."""
    if isinstance(store, Store):  # every tool reads through a catch-up: a write's reply need not wait for one
        store.index.catch_up_in_background()
    bound = Tools(store, project, session_id)
    here = here_phrase(project)
    registered = []
    for spec in TOOLS:
        tool = Tool.from_function(_sdk_function(spec.name, getattr(bound, spec.name), here, store),
                                  name=spec.name, title=spec.title, description=spec.description,
                                  annotations=ToolAnnotations(**spec.annotations), meta=spec.meta)
        compact_schema(tool.parameters)
        if tool.output_schema:
            compact_schema(tool.output_schema, depth=0)
        registered.append(tool)
    server = RetainedServer(SERVER_NAME, version=__version__, instructions=instructions or GUIDANCE, tools=registered)
    server.reply_project = project
    server.input_schemas = {tool.name: tool.parameters for tool in registered}
    _advertise_tools_only(server)
    return server


def _advertise_tools_only(server: MCPServer) -> None:
    """initialize advertises tools only: retained serves no prompts and no resources (the SDK offers
    both whenever their handlers exist, and they always do). A client that asks anyway still gets an
    empty list. Leans on `MCPServer._lowlevel_server`, as retained/transport.py does."""
    low = server._lowlevel_server
    sdk_capabilities = low.get_capabilities

    def get_capabilities(*args: Any, **kwargs: Any) -> Any:
        return sdk_capabilities(*args, **kwargs).model_copy(update={"prompts": None, "resources": None})

    low.get_capabilities = get_capabilities  # type: ignore[method-assign]  # this instance's, over the SDK's method


def _sdk_function(name: str, method: Callable[..., Any], here: str, store: ServedStore) -> Callable[..., Any]:
    """A `Tools` method as the SDK reads a tool: each `Param` a pydantic `Field`, each failure a ToolError."""
    def tool(**arguments: Any) -> Any:  # the SDK runs it on a worker thread: SIGTERM's handler, on the main
        # thread, can then wait for a write under way to finish (Store.wait_idle) instead of for itself
        try:
            result = method(**arguments)
        except RetainedError as e:
            hint = e.tool_hint or for_model(e.hint)
            raise ToolError(e.message + (f" (hint: {hint})" if hint else "")) from None
        except OSError as e:
            raise ToolError(f"the store could not be read or written: {e.strerror or e} "
                            f"(hint: the user must check the store directory {store.directory})") from None
        if isinstance(result, dict) and isinstance(result.get("warnings"), list):
            result["warnings"] = [for_model(w) if isinstance(w, str) else w for w in result["warnings"]]
        return result

    hints: dict[str, Any] = {}
    signature = []
    for p in parameters(method):
        field = Field(description=p.param.description.replace(HERE, here), ge=p.param.ge, le=p.param.le)
        hints[p.name] = Annotated[p.type, field]
        default = inspect.Parameter.empty if p.required else p.default
        signature.append(inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                           annotation=hints[p.name]))
    hints["return"] = _for_pydantic(method.__annotations__["return"])
    tool.__name__ = tool.__qualname__ = name
    tool.__annotations__ = hints
    tool.__signature__ = inspect.Signature(signature, return_annotation=hints["return"])  # type: ignore[attr-defined]
    return tool


def _for_pydantic(kind: Any) -> Any:
    """`kind` with each `typing.TypedDict` in it rebuilt as a `typing_extensions` one, below Python 3.12.

    pydantic refuses a `typing.TypedDict` there (it needs `__orig_bases__`), and the SDK rebuilds only
    the outermost; retained/results.py keeps to `typing` so that the CLI and the early replies need
    nothing more. typing_extensions is declared for those versions (and pydantic has loaded it by
    then). Delete with 3.11.
    """
    if sys.version_info >= (3, 12):
        return kind

    done: dict[Any, Any] = {}

    def rebuild(kind: Any) -> Any:
        if is_typeddict(kind):
            if kind not in done:
                keys = {k: rebuild(v) for k, v in kind.__annotations__.items()}
                items = {k: v if k in kind.__required_keys__ else NotRequired[v] for k, v in keys.items()}
                done[kind] = TypedDict(kind.__name__, items)  # type: ignore[operator]
                done[kind].__module__ = kind.__module__
            return done[kind]
        origin, args = get_origin(kind), get_args(kind)
        rebuilt = tuple(rebuild(a) for a in args)
        if origin is Literal or rebuilt == args:
            return kind
        if origin is Union or origin is types.UnionType:
            return Union[rebuilt]  # noqa: UP007 - a union of a tuple made at run time has no `|` spelling
        return origin[rebuilt]

    return rebuild(kind)


def compact_schema(schema: Any, depth: int | None = None) -> Any:
    """Cut a generated JSON schema to what an agent reads, in place: no `title`s (they repeat the
    property names), and for output schemas (`depth` given) a nested list or object as any value, so
    that tools/list stays small (issue 10: under 3,000 tokens). Results are still whole in the reply."""
    if isinstance(schema, list):
        for item in schema:
            compact_schema(item, depth)
        return schema
    if not isinstance(schema, dict):
        return schema
    schema.pop("title", None)
    options = schema.get("anyOf")
    if depth and isinstance(options, list) and {"type": "null"} in options:
        schema.clear()  # a nullable result field: any value (the reply itself carries the detail)
        return schema
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        # Optional: `X or null` with default null says no more than X outside `required`.
        (kept,) = [o for o in options if o != {"type": "null"}]
        schema.pop("anyOf")
        if schema.get("default", 0) is None:
            schema.pop("default")
        schema.update({k: v for k, v in kept.items() if k not in schema})
    if schema.get("default", 0) is False:  # a flag: off unless passed says nothing more
        schema.pop("default")
    if depth is not None:
        for key in ("$defs", "additionalProperties", "required", "default"):
            schema.pop(key, None)
        if "$ref" in schema:
            schema.pop("$ref")
            schema["type"] = "object"
        if depth >= 1:  # a result field: named, any value (the reply carries it; tools/list stays small)
            for key in ("properties", "items", "anyOf", "type", "enum"):
                schema.pop(key, None)
    for key, value in list(schema.items()):
        if key == "properties" and isinstance(value, dict):
            for prop in value.values():
                compact_schema(prop, None if depth is None else depth + 1)
        elif isinstance(value, (dict, list)) and key != "properties":
            compact_schema(value, depth)
    return schema

