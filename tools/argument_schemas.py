"""Tool arguments in words: JSON-schema types for messages and for ``kgot tools list``.

Kept free of LangChain so listing the tools stays fast.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from kgot.tools.base import ToolArgument


def type_name(prop: dict[str, Any]) -> str:
    """A JSON-schema property's type in a few words: ``string``, ``integer | null``, enums."""
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "type" in prop:
        return str(prop["type"])
    options = prop.get("anyOf") or prop.get("oneOf") or []
    names = [type_name(option) for option in options if option.get("type") != "null"]
    return " | ".join(names) or "any"


def signature(json_schema: dict[str, Any]) -> str:
    """``url (string, required), page (integer, default 1), …`` from an object schema."""
    required = set(json_schema.get("required", []))
    parts = []
    for name, prop in (json_schema.get("properties") or {}).items():
        detail = "required" if name in required else f"default {json.dumps(prop.get('default'))}"
        parts.append(f"{name} ({type_name(prop)}, {detail})")
    return ", ".join(parts) or "no arguments"


def arguments(schema: type[BaseModel]) -> tuple[ToolArgument, ...]:
    """The arguments of a Pydantic argument model, for ``kgot tools list``."""
    json_schema = schema.model_json_schema()
    required = set(json_schema.get("required", []))
    return tuple(
        ToolArgument(
            name=name,
            type=type_name(prop),
            required=name in required,
            description=str(prop.get("description", "")),
            default=prop.get("default"),
        )
        for name, prop in (json_schema.get("properties") or {}).items()
    )


def explain_validation(tool: str, error: ValidationError, expected: str) -> str:
    """Bad arguments in one line: what is wrong with which argument, and what is expected."""
    problems = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"]) or "arguments"
        message = "unknown argument" if item["type"] == "extra_forbidden" else item["msg"]
        problems.append(f"`{where}`: {message}")
    return f"invalid arguments for {tool} — {'; '.join(problems)}. Expected: {expected}"
