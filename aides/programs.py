"""What an aide does after ingesting: its program. One ships here, ``digest``.

``digest`` briefs the user on what changed in the entity's graph this cycle: the facts the
cycle's ingestions inserted, changed or superseded are read back from the graph the cycle
wrote to (the current ones, with their ids) and shown to the planning model, which writes a
short digest citing them as ``[node:ID]`` / ``[edge:SOURCE->TARGET]``. Citations of facts
that were not shown are dropped from the list of cited facts, so a digest never points at a
fact the graph lacks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage, SystemMessage

if TYPE_CHECKING:
    import networkx as nx

    from kgot.controller.ingest import IngestReport

MAX_FACTS = 80  # facts shown to the model per digest
MAX_VALUE_CHARS = 200
_EDGE = re.compile(r"^(.+) -(.+)-> (.+)$")  # IngestReport.inserted_edges entries
_CITATION = re.compile(r"\[(node:[^\]\s]+|edge:[^\]\s]+->[^\]\s]+)\]")

_SYSTEM = (
    "You brief a busy reader on what is new in a knowledge graph an aide keeps for them. "
    "Write a short digest (at most 8 bullet points, one line each) of the facts below that "
    "changed this cycle, most important first. Cite the facts each point rests on by their ids "
    "in square brackets exactly as shown, e.g. [node:acme] or [edge:acme->zurich]. Do not add "
    "anything the facts do not state. Reply with the bullet points only."
)


@dataclass
class Digest:
    """What the ``digest`` program produced for one cycle."""

    text: str
    facts: list[str] = field(default_factory=list)  # the cited fact ids that exist
    shown: int = 0  # facts shown to the model

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.text, "facts": self.facts}


def changed_facts(graph: nx.MultiDiGraph, reports: Sequence[IngestReport]) -> list[tuple[str, str]]:
    """The current facts the reports name, as ``(fact id, one line)``, at most
    :data:`MAX_FACTS`: the nodes inserted, changed or superseded, then the edges that touch
    them (an inserted edge always touches a node it was written with or landed on)."""
    node_ids: list[str] = []
    for report in reports:
        node_ids += report.inserted_nodes + report.updated_nodes
        node_ids += [key.split("/", 1)[1] for key in report.superseded if key.startswith("node/")]
    wanted = list(dict.fromkeys(node_ids))
    ends = [
        end
        for report in reports
        for edge in report.inserted_edges
        if (match := _EDGE.match(edge))
        for end in (match.group(1), match.group(3))
    ]
    lines: list[tuple[str, str]] = []
    for node_id in wanted:
        if node_id not in graph:
            continue  # removed or merged away since
        data = graph.nodes[node_id]
        lines.append((f"node:{node_id}", f"{data.get('label', '?')} {_properties(data)}"))
    around = set(wanted) | set(ends)
    for source, target, data in graph.edges(data=True):
        if source in around or target in around:
            relationship = data.get("relationship", "?")
            lines.append((f"edge:{source}->{target}", f"{source} -{relationship}-> {target}"))
    return lines[:MAX_FACTS]


def _properties(data: dict[str, Any]) -> str:
    shown = {
        key: value for key, value in data.items() if key != "label" and not key.startswith("_")
    }
    text = json.dumps(shown, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


async def digest(
    planning: Any, facts: Sequence[tuple[str, str]], *, entity: str, titles: Sequence[str]
) -> Digest | None:
    """The cycle's digest from ``facts`` (``None`` when nothing changed: no model call)."""
    if not facts:
        return None
    listing = "\n".join(f"[{fact_id}] {line}" for fact_id, line in facts)
    read = "\n".join(f"- {title}" for title in titles[:20]) or "- (untitled items)"
    messages = [
        SystemMessage(_SYSTEM),
        HumanMessage(
            f"Entity: {entity}\n\nItems read this cycle:\n{read}\n\nFacts that changed:\n{listing}"
        ),
    ]
    text = (await planning.text(messages, step="digest")).strip()
    shown = {fact_id for fact_id, _line in facts}
    cited = [found for found in dict.fromkeys(_CITATION.findall(text)) if found in shown]
    return Digest(text=text, facts=cited, shown=len(facts))

# ---------------------------------------------------------------------------- other programs

# Programs besides ``digest`` live in packages of their own. Each module offers
# ``on_create(store, aide_row)``, run when an aide is created, and the coroutine
# ``run_cycle(aide, report, now, exceeded)``, run after upkeep instead of the digest
# (``exceeded(spent)`` says why the cycle's cost budgets allow no more model calls).
PROGRAM_MODULES = {"advisor": "kgot.aides.advisor.program"}


def _program_module(program: str) -> Any:
    import importlib

    home = PROGRAM_MODULES.get(program)
    return importlib.import_module(home) if home is not None else None


def on_create(store: Any, aide: Any) -> None:
    """Set up what ``aide``'s program needs (the advisor's types); an aide whose set-up fails
    is deleted again."""
    module = _program_module(aide.program)
    if module is None:
        return
    from kgot.aides.records import delete_aide

    try:
        module.on_create(store, aide)
    except BaseException:
        delete_aide(store, aide)
        raise


async def run_program(
    aide: Any, report: Any, now: Any, exceeded: Any
) -> dict[str, Any] | None:
    """Run ``aide``'s program (other than ``digest``) for this cycle; what it did."""
    module = _program_module(aide.row.program)
    if module is None:
        return None
    done = await module.run_cycle(aide, report, now, exceeded)
    return dict(done.to_json())
