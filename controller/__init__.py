"""The KGoT reasoning loop on LangGraph.

Entry points: :func:`ask` / :func:`ask_async` answer a question; :func:`resume` /
:func:`resume_async` continue an interrupted run; :func:`build_controller_graph` gives the
compiled LangGraph for inspection.
"""

from kgot.controller.graph import build_controller_graph, recursion_limit
from kgot.controller.result import AskResult
from kgot.controller.run import ask, ask_async, is_resumable, resume, resume_async

__all__ = [
    "AskResult",
    "ask",
    "ask_async",
    "build_controller_graph",
    "is_resumable",
    "recursion_limit",
    "resume",
    "resume_async",
]
