"""The tool belt the KGoT loop uses to gather knowledge.

Entry points:

* :func:`build_tools` — the enabled tools of one run (LangChain tools with JSON-schema
  arguments), sharing that run's downloads, converted pages and workspace;
* :class:`ToolRunner` — runs calls with a deadline, an output cap and a per-run cache, and
  turns every failure into a :class:`ToolOutcome` the model can act on;
* :func:`describe_tools` — every tool, its arguments and whether it is enabled (and why).

Tools: ``web_search``, ``visit_page``, ``wikipedia``, ``inspect_file``, ``python``,
``llm_query``. See docs/tools.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgot.tools.base import (
        ErrorKind,
        ToolArgument,
        ToolContext,
        ToolFailure,
        ToolInfo,
        ToolOutcome,
    )
    from kgot.tools.registry import TOOL_NAMES, build_tools, describe_tools
    from kgot.tools.runner import ToolRunner

# Exports load on first use: a module that needs one part of the tool belt (the registry, for
# `kgot tools list`) must not pay for LangChain through this package's __init__.
_EXPORTS = {
    "ErrorKind": "kgot.tools.base",
    "ToolArgument": "kgot.tools.base",
    "ToolContext": "kgot.tools.base",
    "ToolFailure": "kgot.tools.base",
    "ToolInfo": "kgot.tools.base",
    "ToolOutcome": "kgot.tools.base",
    "TOOL_NAMES": "kgot.tools.registry",
    "build_tools": "kgot.tools.registry",
    "describe_tools": "kgot.tools.registry",
    "ToolRunner": "kgot.tools.runner",
}

__all__ = [
    "TOOL_NAMES",
    "ErrorKind",
    "ToolArgument",
    "ToolContext",
    "ToolFailure",
    "ToolInfo",
    "ToolOutcome",
    "ToolRunner",
    "build_tools",
    "describe_tools",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kgot.tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
