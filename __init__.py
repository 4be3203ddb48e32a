"""kgot: answer hard questions by growing a knowledge graph, step by step.

``kgot.ask(question, …)`` runs the whole loop; see :mod:`kgot.controller`. The heavy
machinery (LangGraph, LangChain) loads on first use, so ``import kgot`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kgot.version import __version__

__all__ = ["AskResult", "__version__", "ask", "ask_async", "resume", "resume_async"]

if TYPE_CHECKING:
    from kgot.controller import AskResult, ask, ask_async, resume, resume_async


def __getattr__(name: str) -> Any:
    if name in {"AskResult", "ask", "ask_async", "resume", "resume_async"}:
        from kgot import controller

        return getattr(controller, name)
    raise AttributeError(f"module 'kgot' has no attribute {name!r}")
