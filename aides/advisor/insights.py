"""The insight pass: "is there a briefing-worthy insight?" asked of the graph, and insights
written back into it; and the re-check of old insights before they are used.

**The pass.** KGoT's RETRIEVE step asks "can I answer the question from the graph?". Here the
question is another (:func:`insight_question`): around the symbols the advisor's users follow
(the symbols alone: no user, position or profile), is there something an investor should know
today that the current insights do not say yet? The RETRIEVE path runs with it (the program
calls :meth:`kgot.controller.ingest.Ingestor.retrieve`: a read query written by the model and
run in the sandbox); then the planning model gets an evidence pack of those symbols
(:mod:`kgot.aides.advisor.evidence`, with the nodes the query named) and the query's result,
and answers in a structured form (step ``advisor_insight``): ``worthy`` and, if so, up to
:data:`MAX_INSIGHTS` insights, each with
its type, summary, action (signals only), strength, the nodes it is ``about``, the events and
news it is ``derived_from`` and its ``basis``: the claims from the evidence that, if they
changed, would make it wrong.

The answer is data, never code: kgot checks each insight (ids must be in the pack, evidence
must be a MarketEvent or News node, the properties must pass the ``Insight`` type, each basis
claim must be corroborated by the graph now, and at least one must be, so that the insight can
be re-checked later) and writes the ones that pass as ``Insight``
nodes with ``about`` and ``derived_from`` edges through the entity's memory (the write-time
hook, the type check, provenance ``advisor:insight``, trust ``inferred``). The pass runs once
per graph version (its commit's result key names the version).

**The re-check.** Before alerts and briefings use them, the current insights are checked
again with the memory's claim check (:func:`kgot.memory.verify.verify_claim`): each basis claim
against the graph as it is now. An insight whose basis a newer fact contradicts (a central bank
held rates, then raised them; a reported deal was denied) is closed as ``contradicted``
(provenance ``advisor:recheck``), with its edges: it is not repeated blindly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from kgot.graph_model import Changeset, Edge, Node

if TYPE_CHECKING:
    import networkx as nx

    from kgot.aides.advisor.evidence import EvidencePack
    from kgot.persistence import EntitySession, TypeCatalog

INSIGHT_STEP = "advisor_insight"
WRITE_STEP = "advisor:insight"
RECHECK_STEP = "advisor:recheck"
MAX_INSIGHTS = 5
INSIGHT_CONFIDENCE = 0.6  # what the model concludes itself ([memory.trust] model's default)
EVIDENCE_LABELS = ("MarketEvent", "News")
_SYSTEM = (
    "You watch a market knowledge graph for investors. The question is not whether you can "
    "answer something, but: is there a briefing-worthy insight in the evidence below, "
    "something an investor holding or watching these assets should know now that the current "
    "insights do not already say? If not, answer worthy=false. If so, give each insight: "
    "type (signal, observation or pattern), a one-sentence summary, action (buy, sell or hold; "
    "only for signals), strength from 0 to 1, `about`: the ids of the nodes it is about, "
    "`derived_from`: the ids of the MarketEvent or News nodes it is drawn from, and `basis`: "
    "the claims from the evidence it rests on, each {subject, property, value} or {subject, "
    "relation, object} with node ids as subject and object. Use only ids shown in the evidence "
    "(node ids without the `node:` prefix are fine)."
)


class BasisClaim(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subject: str
    property: str | None = None
    value: Any = None
    relation: str | None = None
    object: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class ProposedInsight(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["signal", "observation", "pattern"]
    summary: str = Field(min_length=1, max_length=600)
    action: Literal["buy", "sell", "hold"] | None = None
    strength: float = Field(ge=0.0, le=1.0)
    about: list[str] = Field(min_length=1, max_length=10)
    derived_from: list[str] = Field(default_factory=list, max_length=10)
    basis: list[BasisClaim] = Field(default_factory=list, max_length=10)


class InsightAnswer(BaseModel):
    """The model's answer to the insight question."""

    model_config = ConfigDict(extra="ignore")

    worthy: bool
    reason: str = ""
    insights: list[ProposedInsight] = Field(default_factory=list, max_length=MAX_INSIGHTS)


@dataclass
class InsightPass:
    """What one pass did."""

    asked: bool = False
    worthy: bool = False
    reason: str = ""
    written: list[str] = field(default_factory=list)  # insight node ids
    rejected: list[str] = field(default_factory=list)  # why proposals were left out
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "worthy": self.worthy,
            "reason": self.reason,
            "written": self.written,
            "rejected": self.rejected,
            "version": self.version,
        }


def insight_question(symbols: Sequence[str]) -> str:
    """The RETRIEVE question of the insight pass (symbols only, never who follows them)."""
    return (
        f"Is there a briefing-worthy insight for investors following {', '.join(symbols)}? "
        "Find the recent market events, news and current insights about these assets, their "
        "companies, sectors and asset classes, and the institutions that affect them, with "
        "their ids, dates, directions and magnitudes."
    )


def insight_messages(
    pack: EvidencePack, current: Sequence[str], now: datetime, retrieved: str | None = None
) -> list[SystemMessage | HumanMessage]:
    followed = ", ".join([*pack.symbols.get("holding", ()), *pack.symbols.get("watch", ())])
    known = "\n".join(current) or "(none)"
    found = (
        f"\n\nWhat a query of the graph for this question returned:\n{retrieved}"
        if (retrieved)
        else ""
    )
    return [
        SystemMessage(_SYSTEM),
        HumanMessage(
            f"Assets followed: {followed or '(none)'}\nNow: {now.isoformat(timespec='seconds')}"
            f"\n\nCurrent insights:\n{known}\n\nEvidence:\n"
            + pack.render(titles={"holding": "Facts", "watch": "Facts"})
            + found
        ),
    ]


def current_insights(graph: nx.MultiDiGraph) -> list[str]:
    """The ids of the graph's current Insight nodes."""
    return [n for n, data in graph.nodes(data=True) if data.get("label") == "Insight"]


async def run_pass(
    planning: Any,
    session: EntitySession,
    graph: nx.MultiDiGraph,
    pack: EvidencePack,
    *,
    now: datetime,
    run_id: str,
    result_key: str,
    retrieved: str | None = None,
) -> InsightPass:
    """Ask the insight question about ``pack`` (and ``retrieved``, what the pass's read query
    found) and write the insights that pass the checks."""
    from kgot.aides.advisor.evidence import MarketIndex

    done = InsightPass(asked=True)
    index = MarketIndex(graph, session.type_catalog(), now=now)
    current = [index.line(("node", n)) for n in current_insights(graph) if n in graph][:30]
    answer = await planning.structured(
        insight_messages(pack, current, now, retrieved), InsightAnswer, step=INSIGHT_STEP
    )
    done.worthy = answer.worthy
    done.reason = answer.reason
    if not answer.worthy or not answer.insights:
        return done
    catalog = session.type_catalog()
    shown = {item.key[1] for item in pack.items if item.key is not None and item.key[0] == "node"}
    nodes: list[Node] = []
    edges: list[Edge] = []
    for number, proposal in enumerate(answer.insights, 1):
        made = _checked(
            proposal,
            number,
            graph=graph,
            shown=shown,
            catalog=catalog,
            session=session,
            now=now,
            rejected=done.rejected,
        )
        if made is not None:
            nodes.append(made[0])
            edges.extend(made[1])
    if not nodes:
        return done
    version = _commit(session, nodes, edges, run_id, result_key)
    done.written = [node.id for node in nodes]
    done.version = version
    return done


def _commit(
    session: EntitySession, nodes: list[Node], edges: list[Edge], run_id: str, result_key: str
) -> int:
    """Commit through the entity's memory (the write-time hook) on this session."""
    from kgot.memory import Memory
    from kgot.persistence import Provenance

    outcome = Memory(session).commit(
        Changeset(added_nodes=tuple(nodes), added_edges=tuple(edges)),
        Provenance(
            run_id=run_id,
            step=WRITE_STEP,
            source_kind="inferred",
            confidence=INSIGHT_CONFIDENCE,
            result_key=result_key,
        ),
    )
    return outcome.version if outcome.version is not None else session.version


def _checked(
    proposal: ProposedInsight,
    number: int,
    *,
    graph: nx.MultiDiGraph,
    shown: set[str],
    catalog: TypeCatalog,
    session: EntitySession,
    now: datetime,
    rejected: list[str],
) -> tuple[Node, list[Edge]] | None:
    """The insight's node and edges, or ``None`` (the reason appended to ``rejected``)."""
    from kgot.memory import verify_claim

    about = [_node_id(i) for i in proposal.about]
    evidence = [_node_id(i) for i in proposal.derived_from]
    outside = [i for i in [*about, *evidence] if i not in shown or i not in graph]
    if outside:
        rejected.append(f"insight {number}: names {', '.join(outside)}, not in the evidence")
        return None
    wrong = [i for i in evidence if graph.nodes[i].get("label") not in EVIDENCE_LABELS]
    if wrong:
        rejected.append(
            f"insight {number}: derived_from {', '.join(wrong)} is not a MarketEvent or News"
        )
        return None
    basis = []
    for claim in proposal.basis:
        data = claim.as_dict()
        data["subject"] = _node_id(str(data["subject"]))
        if "object" in data:
            data["object"] = _node_id(str(data["object"]))
        try:
            verdict = verify_claim(session, now=now, **data)
        except Exception as error:  # a malformed claim (half of one): left out
            rejected.append(f"insight {number}: basis {data} left out ({error})")
            continue
        if verdict.verdict == "corroborated":
            basis.append(data)
        else:
            rejected.append(f"insight {number}: basis {data} left out ({verdict.verdict} now)")
    if not basis:
        # An insight with no basis could never be re-checked: it would be repeated blindly.
        rejected.append(
            f"insight {number}: no basis claim the graph corroborates, so it could not be "
            "checked again later"
        )
        return None
    generated = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    properties: dict[str, Any] = {
        "type": proposal.type,
        "summary": proposal.summary.strip(),
        "strength": round(float(proposal.strength), 3),
        "generated_at": generated,
    }
    if proposal.type == "signal" and proposal.action is not None:
        properties["action"] = proposal.action
    properties["basis"] = basis
    insight_type = catalog.get("node", "Insight")
    if insight_type is None:
        rejected.append("the entity has no Insight type (create the aide with --program advisor)")
        return None
    problems = insight_type.property_problems(properties)
    if problems:
        rejected.append(
            f"insight {number}: " + "; ".join(f"{path}: {message}" for path, message, _ in problems)
        )
        return None
    digest = hashlib.sha256(
        f"{properties['summary']}|{'|'.join(sorted(about))}|{generated}".encode()
    ).hexdigest()[:12]
    node_id = f"insight_{digest}"
    edges = [Edge(node_id, target, "about", "about", {}) for target in dict.fromkeys(about)]
    edges += [
        Edge(node_id, source, "derived_from", "derived_from", {})
        for source in dict.fromkeys(evidence)
    ]
    return Node(node_id, "Insight", properties), edges


def _node_id(text: str) -> str:
    text = text.strip().strip("[]")
    return text[5:] if text.startswith("node:") else text


@dataclass
class Recheck:
    """What the re-check of current insights found."""

    checked: int = 0
    closed: dict[str, str] = field(default_factory=dict)  # insight id -> why

    def to_json(self) -> dict[str, Any]:
        return {"checked": self.checked, "closed": dict(self.closed)}


def recheck(
    session: EntitySession,
    graph: nx.MultiDiGraph,
    *,
    now: datetime,
    run_id: str,
) -> Recheck:
    """Check every current insight's basis against the graph now; close (as
    ``contradicted``) the insights a newer fact contradicts."""
    from kgot.memory import verify_claim
    from kgot.persistence import Provenance

    done = Recheck()
    for node_id in current_insights(graph):
        basis = graph.nodes[node_id].get("basis")
        if not isinstance(basis, list) or not basis:
            continue
        done.checked += 1
        for claim in basis:
            if not isinstance(claim, Mapping) or not claim.get("subject"):
                continue
            try:
                verdict = verify_claim(session, now=now, **dict(claim))
            except Exception:
                continue
            if verdict.verdict in ("contradicted", "mixed"):
                against = ", ".join(verdict.contradicting) or "a newer fact"
                done.closed[node_id] = f"{_claim_text(claim)} is {verdict.verdict} by {against}"
                break
    if done.closed:
        session.close_facts(
            [("node", node_id) for node_id in done.closed],
            "contradicted",
            Provenance(run_id=run_id, step=RECHECK_STEP, source_kind="inferred"),
        )
    return done


def _claim_text(claim: Mapping[str, Any]) -> str:
    if claim.get("property") is not None:
        return f"{claim['subject']}.{claim['property']} = {claim.get('value')!r}"
    return f"{claim['subject']} -{claim.get('relation')}-> {claim.get('object')}"
