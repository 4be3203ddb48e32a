"""The LLM layer: chat models per role, structured output, retries, usage and cost.

Entry points: :func:`build_llm_clients` (both roles from the settings) and :class:`LLMClient`
(``text``, ``structured``, ``tool_calls``). Every request lands in a :class:`UsageLedger`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.llm.client import (
        LLMClient,
        Roles,
        build_llm_clients,
        describe_endpoint,
        describe_model,
    )
    from kgot.llm.http import ensure_reachable
    from kgot.llm.models import (
        PLACEHOLDER_API_KEY,
        build_chat_model,
        endpoint_url,
        require_models,
        served_model_name,
    )
    from kgot.llm.prices import PriceTable
    from kgot.llm.retry import RetryPolicy
    from kgot.llm.scripted import NoScriptedReplyError, ScriptedCall, ScriptedChatModel
    from kgot.llm.structured import repair_messages
    from kgot.llm.usage import LLMCall, UsageLedger, UsageTotals, empty_step_figures

# Name -> module. Loaded on first use: commands that never talk to a model must not wait for
# LangChain (about 0.7 s).
_EXPORTS = {
    "LLMCall": "kgot.llm.usage",
    "LLMClient": "kgot.llm.client",
    "NoScriptedReplyError": "kgot.llm.scripted",
    "PLACEHOLDER_API_KEY": "kgot.llm.models",
    "PriceTable": "kgot.llm.prices",
    "RetryPolicy": "kgot.llm.retry",
    "Roles": "kgot.llm.client",
    "ScriptedCall": "kgot.llm.scripted",
    "ScriptedChatModel": "kgot.llm.scripted",
    "UsageLedger": "kgot.llm.usage",
    "UsageTotals": "kgot.llm.usage",
    "build_chat_model": "kgot.llm.models",
    "build_llm_clients": "kgot.llm.client",
    "describe_endpoint": "kgot.llm.client",
    "describe_model": "kgot.llm.client",
    "empty_step_figures": "kgot.llm.usage",
    "endpoint_url": "kgot.llm.models",
    "ensure_reachable": "kgot.llm.http",
    "repair_messages": "kgot.llm.structured",
    "require_models": "kgot.llm.models",
    "served_model_name": "kgot.llm.models",
}
__all__ = [
    "PLACEHOLDER_API_KEY",
    "LLMCall",
    "LLMClient",
    "NoScriptedReplyError",
    "PriceTable",
    "RetryPolicy",
    "Roles",
    "ScriptedCall",
    "ScriptedChatModel",
    "UsageLedger",
    "UsageTotals",
    "build_chat_model",
    "build_llm_clients",
    "describe_endpoint",
    "describe_model",
    "empty_step_figures",
    "endpoint_url",
    "ensure_reachable",
    "repair_messages",
    "require_models",
    "served_model_name",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
