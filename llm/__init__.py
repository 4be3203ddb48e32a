"""The LLM layer: chat models per role, structured output, retries, usage and cost.

Entry points: :func:`build_llm_clients` (both roles from the settings) and :class:`LLMClient`
(``text``, ``structured``, ``tool_calls``). Every request lands in a :class:`UsageLedger`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgot.llm.client import LLMClient, Roles, build_llm_clients
    from kgot.llm.models import build_chat_model
    from kgot.llm.prices import PriceTable
    from kgot.llm.retry import RetryPolicy
    from kgot.llm.scripted import ScriptedChatModel
    from kgot.llm.usage import LLMCall, UsageLedger, UsageTotals

# Name -> module. Loaded on first use: commands that never talk to a model must not wait for
# LangChain (about 0.7 s).
_EXPORTS = {
    "LLMCall": "kgot.llm.usage",
    "LLMClient": "kgot.llm.client",
    "PriceTable": "kgot.llm.prices",
    "RetryPolicy": "kgot.llm.retry",
    "Roles": "kgot.llm.client",
    "ScriptedChatModel": "kgot.llm.scripted",
    "UsageLedger": "kgot.llm.usage",
    "UsageTotals": "kgot.llm.usage",
    "build_chat_model": "kgot.llm.models",
    "build_llm_clients": "kgot.llm.client",
}
__all__ = [
    "LLMCall",
    "LLMClient",
    "PriceTable",
    "RetryPolicy",
    "Roles",
    "ScriptedChatModel",
    "UsageLedger",
    "UsageTotals",
    "build_chat_model",
    "build_llm_clients",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kgot.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
