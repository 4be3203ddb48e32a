"""kgot: answer hard questions by growing a knowledge graph, step by step.

``kgot.ask(question, model=…, entity=…, attachments=…, …)`` runs the whole loop and returns an
:class:`AskResult`; ``await kgot.ask_async(…)`` is the same in async code, and ``kgot.resume``
/ ``resume_async`` continue an interrupted run. Every option is a typed keyword argument (see
:mod:`kgot.controller.api` and docs/python.md). The heavy machinery (LangGraph, LangChain)
loads on first use, so ``import kgot`` stays cheap.
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
