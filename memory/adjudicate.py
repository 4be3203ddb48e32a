"""A model's judgement at the margin of entity resolution (issue 29, item 8; off by default).

The rules and the field model decide what they can; the pairs they cannot (the suggestions)
go to a person, or, when the user asks for it (``kgot memory resolve --adjudicate``), to the
configured model first, within a budget of calls and dollars. The model sees the two nodes'
properties and the evidence the rules weighed, and answers ``same``, ``different`` or
``unsure``. ``same`` merges the pair (the commit's provenance names the model and its
reason: step ``memory:adjudicate``), ``different`` rejects the suggestion (it is not filed
again), ``unsure`` leaves it for a person. The suggestion keeps the verdict either way
(``decision``: the model, its verdict and reason, the run). Never more calls than the budget;
never a decision on a pair the model was not asked about.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from kgot.errors import ConfigError

if TYPE_CHECKING:
    from kgot.llm import LLMClient
    from kgot.memory.api import Memory

__all__ = [
    "ADJUDICATE_STEP",
    "Adjudication",
    "AdjudicationReport",
    "MergeVerdict",
    "aadjudicate",
    "adjudicate",
    "pairs_of",
]

ADJUDICATE_STEP = "memory:adjudicate"
_PROPERTIES_CHARS = 1_500  # one node's properties in the prompt, at most
_REASON_CHARS = 300  # the model's reason as kept in the queue and the provenance


class MergeVerdict(BaseModel):
    """The model's answer about one suggested pair."""

    verdict: Literal["same", "different", "unsure"] = Field(
        description="same: one real thing; different: two; unsure: the records do not settle it."
    )
    reason: str = Field(description="One sentence: which facts decide it.")


@dataclass(frozen=True)
class Adjudication:
    """One suggestion the model was asked about, and what was done with its answer."""

    suggestion_id: int | None  # None: not queued (a dry run)
    nodes: tuple[str, str]
    verdict: str
    reason: str
    done: str  # "merged", "rejected", "left open" or "not applied" (a dry run)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.suggestion_id,
            "nodes": list(self.nodes),
            "verdict": self.verdict,
            "reason": self.reason,
            "done": self.done,
        }


@dataclass(frozen=True)
class AdjudicationReport:
    """What the model decided within its budget; ``left`` suggestions it was not asked about
    (``stopped_by`` names the cap that stopped it)."""

    decisions: tuple[Adjudication, ...]
    calls: int
    cost_usd: float | None
    left: int
    stopped_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "decisions": [d.to_json() for d in self.decisions],
            "calls": self.calls,
            "cost_usd": self.cost_usd,
            "left": self.left,
            "stopped_by": self.stopped_by,
        }


@dataclass(frozen=True)
class _Pair:
    suggestion_id: int | None
    nodes: tuple[str, str]
    type: str
    reason: str


def adjudicate(memory: Memory, client: LLMClient, **options: Any) -> AdjudicationReport:
    """:func:`aadjudicate` (same options) for code that is not in an event loop (the CLI)."""
    return asyncio.run(aadjudicate(memory, client, **options))


async def aadjudicate(
    memory: Memory,
    client: LLMClient,
    *,
    pairs: Sequence[tuple[int | None, tuple[str, str], str, str]] | None = None,
    apply: bool = True,
    max_calls: int = 20,
    max_cost_usd: float | None = None,
) -> AdjudicationReport:
    """Ask ``client`` about merge suggestions, best score first (module docstring).

    Args:
        memory: the entity's memory.
        client: the model (one structured call per pair, step ``memory:adjudicate``).
        pairs: ``(suggestion id or None, nodes, type, reason)`` to ask about; default: the
            entity's open merge suggestions.
        apply: act on the answers (merge, reject); ``False`` only reports them.
        max_calls: the most model calls.
        max_cost_usd: stop once the calls made cost this much (checked between calls).

    Raises:
        ConfigError: a budget below 1 call or not above $0, or a cost cap with a model whose
            price kgot does not know (nothing was asked).
    """
    if max_calls < 1:
        raise ConfigError(f"--max-calls must be 1 or more, not {max_calls}")
    if max_cost_usd is not None:
        if not max_cost_usd > 0:
            raise ConfigError(f"--max-cost must be above 0, not {max_cost_usd}")
        if client.prices.price_for(client.model_name) is None:
            raise ConfigError(
                f"the adjudication cost cap needs the price of {client.model_name}, which kgot "
                f'does not know; set [llm.prices."{client.model_name}"] input and output (USD '
                "per million tokens), or adjudicate with --max-calls only"
            )
    todo = [_Pair(*pair) for pair in pairs] if pairs is not None else _open_pairs(memory)
    graph = await asyncio.to_thread(memory.session.load_graph)
    run_id = f"adjudicate-{uuid.uuid4()}"
    calls_before = len(client.ledger.calls)
    decisions: list[Adjudication] = []
    stopped_by: str | None = None
    for number, pair in enumerate(todo):
        spent = _spent(client, calls_before)
        if number >= max_calls:
            stopped_by = f"max_calls {max_calls}"
        elif max_cost_usd is not None and spent is not None and spent >= max_cost_usd:
            stopped_by = f"max_cost_usd {max_cost_usd:g} (spent ${spent:.4f})"
        if stopped_by is not None:
            break
        if not all(node_id in graph for node_id in pair.nodes):
            continue  # merged or removed since the suggestion was made
        answer = await client.structured(_messages(graph, pair), MergeVerdict, step=ADJUDICATE_STEP)
        done = "not applied"
        if apply:
            done = await asyncio.to_thread(_act, memory, pair, answer, client, run_id)
        decisions.append(
            Adjudication(pair.suggestion_id, pair.nodes, answer.verdict, answer.reason, done)
        )
    calls = len(client.ledger.calls) - calls_before
    return AdjudicationReport(
        tuple(decisions),
        calls,
        _spent(client, calls_before),
        len(todo) - len(decisions) if stopped_by is not None else 0,
        stopped_by,
    )


def _open_pairs(memory: Memory) -> list[_Pair]:
    rows = [row for row in memory.suggestions("open") if row.kind == "merge"]
    rows.sort(key=lambda row: (-row.score, row.id))
    pairs = []
    for row in rows:
        nodes = [str(n) for n in row.payload.get("nodes", ())]
        if len(nodes) == 2:
            pair = (nodes[0], nodes[1])
            pairs.append(
                _Pair(
                    row.id,
                    pair,
                    str(row.payload.get("type", "")),
                    str(row.payload.get("reason", "")),
                )
            )
    return pairs


def _spent(client: LLMClient, calls_before: int) -> float | None:
    total: float | None = 0.0
    for call in client.ledger.calls[calls_before:]:
        if call.cost_usd is None:
            return None
        total = (total or 0.0) + call.cost_usd
    return total


def _messages(graph: Any, pair: _Pair) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    def shown(node_id: str) -> str:
        data = {k: v for k, v in graph.nodes[node_id].items() if not k.startswith("_")}
        text = json.dumps({"id": node_id, **data}, ensure_ascii=False, default=str, sort_keys=True)
        return text if len(text) <= _PROPERTIES_CHARS else text[:_PROPERTIES_CHARS] + " …"

    return [
        SystemMessage(
            "You decide whether two records of a knowledge graph describe the same real-world "
            "thing. Answer 'same' only when the records' facts make it clear, 'different' when "
            "a fact shows two things (another birth date, another company's legal form or "
            "country), and 'unsure' when the records do not settle it. Never guess."
        ),
        HumanMessage(
            f"Type: {pair.type}\nRecord A: {shown(pair.nodes[0])}\nRecord B: "
            f"{shown(pair.nodes[1])}\nWhat the matching rules found: {pair.reason or 'similar'}"
        ),
    ]


def _act(memory: Memory, pair: _Pair, answer: MergeVerdict, client: LLMClient, run_id: str) -> str:
    """Carry out the answer on the queue; what was done."""
    if answer.verdict == "unsure" or pair.suggestion_id is None:
        return "left open" if pair.suggestion_id is not None else "not queued"
    # The verdict is kept with the suggestion either way: a rejected pair is never filed
    # again, so its reason is the only account of why two records stayed apart.
    decision = {
        "by": f"model:{client.model_name}",
        "verdict": answer.verdict,
        "reason": answer.reason[:_REASON_CHARS],
        "run_id": run_id,
    }
    if answer.verdict == "different":
        memory.reject(pair.suggestion_id, decision=decision)
        return "rejected"
    from kgot.persistence import Provenance

    memory.accept(
        pair.suggestion_id,
        provenance=Provenance(
            run_id=run_id,
            step=ADJUDICATE_STEP,
            tool_call=f"{client.model_name}: same ({answer.reason[:_REASON_CHARS]})",
        ),
        decision=decision,
    )
    return "merged"


def pairs_of(
    suggestions: Sequence[Any], ids: Sequence[int | None]
) -> list[tuple[int | None, tuple[str, str], str, str]]:
    """A resolution's suggestions (with their queue ids) as :func:`adjudicate` takes them."""
    return [
        (suggestion_id, (s.nodes[0], s.nodes[1]), s.type, s.reason)
        for s, suggestion_id in zip(suggestions, ids, strict=True)
    ]
