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

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.tools.access import make_workspace_dir, workspace_has_files
    from kgot.tools.base import (
        ErrorKind,
        ToolArgument,
        ToolContext,
        ToolFailure,
        ToolInfo,
        ToolOutcome,
    )
    from kgot.tools.memory_tools import build_memory_tools
    from kgot.tools.registry import (
        TOOL_NAMES,
        argument_problem,
        build_tools,
        configuration_reason,
        describe_tools,
    )
    from kgot.tools.runner import ToolRunner
    from kgot.tools.text import strip_markup
    from kgot.tools.type_tools import build_type_tools
    from kgot.tools.web_search import providers_for
    from kgot.tools.workspace_owner import remove_stale_workspaces

# Exports load on first use: a module that needs one part of the tool belt (the registry, for
# `kgot tools list`) must not pay for LangChain through this package's __init__.
_EXPORTS = {
    "ErrorKind": "kgot.tools.base",
    "TOOL_NAMES": "kgot.tools.registry",
    "ToolArgument": "kgot.tools.base",
    "ToolContext": "kgot.tools.base",
    "ToolFailure": "kgot.tools.base",
    "ToolInfo": "kgot.tools.base",
    "ToolOutcome": "kgot.tools.base",
    "ToolRunner": "kgot.tools.runner",
    "argument_problem": "kgot.tools.registry",
    "build_memory_tools": "kgot.tools.memory_tools",
    "build_tools": "kgot.tools.registry",
    "build_type_tools": "kgot.tools.type_tools",
    "configuration_reason": "kgot.tools.registry",
    "describe_tools": "kgot.tools.registry",
    "make_workspace_dir": "kgot.tools.access",
    "providers_for": "kgot.tools.web_search",
    "remove_stale_workspaces": "kgot.tools.workspace_owner",
    "strip_markup": "kgot.tools.text",
    "workspace_has_files": "kgot.tools.access",
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
    "argument_problem",
    "build_memory_tools",
    "build_tools",
    "build_type_tools",
    "configuration_reason",
    "describe_tools",
    "make_workspace_dir",
    "providers_for",
    "remove_stale_workspaces",
    "strip_markup",
    "workspace_has_files",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
