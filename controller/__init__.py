"""The KGoT reasoning loop on LangGraph.

Entry points: :func:`ask` / :func:`ask_async` answer a question; :func:`resume` /
:func:`resume_async` continue an interrupted run (typed keyword arguments:
:mod:`kgot.controller.api`, docs/python.md); :func:`build_controller_graph` gives the
compiled LangGraph for inspection; :func:`clean_up_after_dead_runs` records runs whose process
was killed as interrupted and removes what they left in the temporary directory.
"""

from kgot.controller.api import ask, ask_async, resume, resume_async
from kgot.controller.graph import build_controller_graph, recursion_limit
from kgot.controller.result import AskResult
from kgot.controller.run import clean_up_after_dead_runs, is_resumable
from kgot.controller.signals import RunTerminated

__all__ = [
    "AskResult",
    "RunTerminated",
    "ask",
    "ask_async",
    "build_controller_graph",
    "clean_up_after_dead_runs",
    "is_resumable",
    "recursion_limit",
    "resume",
    "resume_async",
]
