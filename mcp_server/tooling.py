"""How kgot's tools are put on the SDK's server: strict input schemas, readable argument
errors, and tool lists cut to what the caller's grant may call.

The SDK derives a tool's input schema from its function and ignores arguments it does not
know. Agents misspell arguments (``node_id`` for ``id``) and would never learn that their
filter was dropped, so every kgot tool refuses unknown arguments (``additionalProperties:
false``) and says which ones it takes. The SDK reports a bad argument with pydantic's own dump
(its input repeated, documentation URLs); :class:`KgotServer` answers with one line per
problem instead, naming the argument and what fits, never echoing the value. A tool's
description is its docstring without the source indentation, every parameter has a
description (checked when the tool is registered), and a client only sees the tools its token's
scopes allow (:func:`scoped_tool_list`).
"""

# No `from __future__ import annotations`: the SDK reads handler annotations at registration.

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import ToolAnnotations
from pydantic import ConfigDict, ValidationError

__all__ = [
    "ASK",
    "FORGET",
    "READ",
    "WRITE",
    "KgotServer",
    "ToolSet",
    "argument_problems",
    "scoped_tool_list",
]

# Facts are never deleted: a changed value closes the old row, which history still shows, so
# no tool that adds or changes facts is destructive. `forget` is: it takes a fact out of what
# every read sees (history keeps it), which a client should confirm with its user first;
# forgetting a fact again changes nothing more. Only `ask` reaches beyond the graph (web
# search, pages, files).
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
FORGET = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
ASK = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)

_MAX_LISTED = 8  # argument problems named in one error; the rest are counted


@dataclass
class ToolSet:
    """The tools of one server, built before the server is: each with its scope."""

    tools: list[Tool] = field(default_factory=list)
    scopes: dict[str, str] = field(default_factory=dict)

    def add(
        self,
        fn: Callable[..., Any],
        *,
        scope: str,
        title: str,
        annotations: ToolAnnotations,
        name: str | None = None,
    ) -> None:
        """Register ``fn`` as a tool that needs ``scope``.

        Raises:
            ValueError: a parameter without a description (a schema agents cannot read).
        """
        tool = Tool.from_function(fn, name=name, title=title, annotations=annotations)
        strict = _strict(tool.fn_metadata.arg_model)
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)
        tool.description = _prose(tool.description)
        undescribed = [
            key
            for key, schema in tool.parameters.get("properties", {}).items()
            if not schema.get("description")
        ]
        if undescribed:
            raise ValueError(f"tool {tool.name}: describe the parameters {', '.join(undescribed)}")
        self.tools.append(tool)
        self.scopes[tool.name] = scope

    def tool(
        self, *, scope: str, title: str, annotations: ToolAnnotations
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """:meth:`add` as a decorator."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add(fn, scope=scope, title=title, annotations=annotations)
            return fn

        return register


def _prose(docstring: str) -> str:
    """A docstring as a client shows it: the source's indentation and line wraps gone,
    paragraphs kept."""
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)


def _strict(model: type[ArgModelBase]) -> type[ArgModelBase]:
    """The SDK's argument model of a tool, refusing arguments it does not declare."""
    namespace = {
        "model_config": ConfigDict(arbitrary_types_allowed=True, extra="forbid"),
        "__module__": model.__module__,
        "__qualname__": model.__qualname__,
    }
    return type(model.__name__, (model,), namespace)


class KgotServer(MCPServer):
    """The SDK's server with kgot's argument errors (module docstring)."""

    def __init__(self, name: str, *, tools: Sequence[Tool], **options: Any) -> None:
        super().__init__(name, tools=list(tools), **options)
        self._arguments = {tool.name: list(tool.parameters.get("properties", {})) for tool in tools}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = argument_problems(cause, self._arguments.get(name, ()))
            # `from cause`: the SDK logs the names of the fields that failed
            raise ToolError(f"Error executing tool {name}: {problems}") from cause


def argument_problems(error: ValidationError, known: Sequence[str] = ()) -> str:
    """One line naming each problem of a call's arguments and what would fit, without the
    values given (a client's 5 MB id is not sent back)."""
    problems: list[str] = []
    for item in error.errors(include_url=False, include_input=False, include_context=True):
        where = _path(item["loc"])
        problems.append(f"{where}: {_problem(item, known if len(item['loc']) == 1 else ())}")
    unique = list(dict.fromkeys(problems))
    shown = unique[:_MAX_LISTED]
    more = f"; and {len(unique) - _MAX_LISTED} more" if len(unique) > _MAX_LISTED else ""
    noun = "problem" if len(unique) == 1 else "problems"
    return (
        f"{len(unique)} {noun} with the arguments: {'; '.join(shown)}{more} "
        "(the tool's input schema lists what it takes)"
    )


def _path(loc: Sequence[str | int]) -> str:
    """``nodes[0].label`` from pydantic's location, without the union members it names."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in {"str", "int", "float", "bool", "none", "list[str]", "dict[str,any]"}:
            continue  # a member of a union (`str | None`), not a place in the arguments
        else:
            text += f".{part}" if text else str(part)
    return text or "arguments"


def _problem(item: Mapping[str, Any], known: Sequence[str]) -> str:
    kind = item["type"]
    context = item.get("ctx") or {}
    if kind == "missing":
        return "missing (required)"
    if kind == "extra_forbidden":
        listed = ", ".join(known) if known else "the schema's keys"
        return f"not an argument this tool takes; it takes {listed}"
    if kind == "string_too_long":
        return f"too long: at most {context.get('max_length')} characters"
    if kind == "too_long":
        return f"too many items: at most {context.get('max_length')}"
    if kind == "string_too_short":
        return "must not be empty"
    return str(item.get("msg") or kind).removeprefix("Value error, ")


def scoped_tool_list(
    scopes: Mapping[str, str], allowed: Callable[[Any], frozenset[str] | None]
) -> Callable[..., Any]:
    """Server middleware that lists only the tools the caller's scopes allow.

    ``scopes`` maps each tool to the scope it needs; ``allowed`` takes the request (``None``
    over stdio) and gives the caller's scopes, or ``None`` when it cannot tell (the tools are
    then listed as they are, and each call is still checked). A call of an unlisted tool gets
    the same scope error as before; hiding them only keeps a read-only agent from planning
    writes it cannot make.
    """

    async def middleware(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        result = await call_next(ctx)
        if ctx.method != "tools/list":
            return result
        granted = allowed(ctx.request)
        if granted is None:
            return result

        # The SDK hands middleware the result as its wire dict (``tools``: dicts by name)
        if not isinstance(result, Mapping):
            return result
        shown = [
            tool
            for tool in result.get("tools", [])
            if tool.get("name") not in scopes or scopes[tool["name"]] in granted
        ]
        return {**result, "tools": shown}

    return middleware
