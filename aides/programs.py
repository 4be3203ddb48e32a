"""What an aide does after ingesting: its program. One ships here, ``digest``.

``digest`` briefs the user on what changed in the entity's graph this cycle, as a KGoT
retrieve over those changes:

1. **Retrieve.** The RETRIEVE path of a run without its vote
   (:meth:`kgot.controller.ingest.Ingestor.retrieve`): the planning model writes a read query
   for what changed this cycle and what around it matters, against a view of the graph seeded
   by the changed facts; the query runs in the sandbox, a failing query goes back for a fix
   and an empty one is written anew, within the budget's query calls.
2. **Write.** The facts the cycle's ingestions inserted, changed or superseded (read back from
   the graph, the current ones with their ids), the facts the query's result names and the
   result itself are shown to the planning model (step ``digest``), which writes a short
   digest citing them as ``[node:ID]`` / ``[edge:SOURCE->TARGET]``.
3. **Check.** Each citation is looked up in the graph. A digest citing a fact the graph lacks,
   or citing none, goes back once (step ``fix_digest``) with the problem named; a citation
   still wrong after that is removed from the text and left out of the cited facts, so a
   digest never points at a fact the graph lacks.

:class:`DigestBudget` bounds the model calls (queries and fixes, the digest, its rewrites);
they join the cycle's ledger, so ``kgot aide status`` counts and prices them with the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from kgot.errors import ConfigError, ModelError, SandboxUnavailableError
from kgot.extension_points import AIDE_PROGRAMS as AIDE_PROGRAM_GROUP
from kgot.extension_points import Registry

if TYPE_CHECKING:
    import networkx as nx

    from kgot.controller import Ingestor, IngestReport

MAX_FACTS = 80  # changed facts shown to the model per digest
MAX_RELATED = 40  # facts the retrieved result names, shown besides the changed ones
MAX_VALUE_CHARS = 200
RETRIEVED_CHARS = 4_000  # of the query's result, in the digest prompt
_CITATION = re.compile(r"\[(node:[^\]\s]+|edge:[^\]\s]+->[^\]\s]+)\]")

_SYSTEM = (
    "You brief a busy reader on what is new in a knowledge graph an aide keeps for them. "
    "Write a short digest (at most 8 bullet points, one line each) of the facts below that "
    "changed this cycle, most important first; use the facts around them and the query's "
    "result for context. Cite the facts each point rests on by their ids in square brackets "
    "exactly as listed, e.g. [node:acme] or [edge:acme->zurich], and cite no other ids. Do "
    "not add anything the facts do not state. Reply with the bullet points only."
)


@dataclass(frozen=True)
class DigestBudget:
    """The model calls one digest may make: ``query_calls`` for the retrieve (its queries
    and their fixes), one for the digest, and ``rewrites`` to fix its citations."""

    query_calls: int = 4
    rewrites: int = 1

    @property
    def max_llm_calls(self) -> int:
        return self.query_calls + 1 + self.rewrites


@dataclass
class Digest:
    """What the ``digest`` program produced for one cycle.

    Attributes:
        text: the digest, its citations all naming facts of the graph.
        facts: the fact ids it cites, in order of first citation.
        shown: facts listed to the model (changed ones and those the retrieve named).
        retrieved: whether the retrieve's query found something.
        dropped: citations removed because the graph has no such fact.
        llm_calls: model calls the digest made (retrieve, writing, rewrites).
        note: why the digest rests on the changed facts alone, if it does.
    """

    text: str
    facts: list[str] = field(default_factory=list)
    shown: int = 0
    retrieved: bool = False
    dropped: list[str] = field(default_factory=list)
    llm_calls: int = 0
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.text, "facts": self.facts}


def changed_ids(reports: Sequence[IngestReport]) -> tuple[list[str], list[str]]:
    """The node ids the reports inserted, changed or superseded, and the ends of the edges
    they inserted (each list in order, without repeats)."""
    node_ids: list[str] = []
    for report in reports:
        node_ids += report.inserted_nodes + report.updated_nodes
        node_ids += [key[1] for key in report.superseded if key[0] == "node"]
    ends = [
        end
        for report in reports
        for edge in (*report.inserted_edges, *report.updated_edges)
        for end in (edge.source, edge.target)
    ]
    return list(dict.fromkeys(node_ids)), list(dict.fromkeys(ends))


def changed_facts(graph: nx.MultiDiGraph, reports: Sequence[IngestReport]) -> list[tuple[str, str]]:
    """The current facts the reports name, as ``(fact id, one line)``, at most
    :data:`MAX_FACTS`: the nodes inserted, changed or superseded, then the edges that touch
    them (an inserted edge always touches a node it was written with or landed on)."""
    nodes, ends = changed_ids(reports)
    return _facts(graph, nodes, around=set(nodes) | set(ends))[:MAX_FACTS]


def related_facts(
    graph: nx.MultiDiGraph, node_ids: Iterable[str], known: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The facts a retrieved result names that ``known`` does not list: its nodes and the
    edges between two of them, at most :data:`MAX_RELATED`."""
    named = list(dict.fromkeys(node_ids))
    listed = {fact_id for fact_id, _line in known}
    lines = _facts(graph, named, around=set(named), both_ends=True)
    return [line for line in lines if line[0] not in listed][:MAX_RELATED]


def _facts(
    graph: nx.MultiDiGraph, node_ids: Sequence[str], *, around: set[str], both_ends: bool = False
) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    for node_id in node_ids:
        if node_id not in graph:
            continue  # removed or merged away since
        data = graph.nodes[node_id]
        lines.append((f"node:{node_id}", f"{data.get('label', '?')} {_properties(data)}"))
    seen: set[str] = set()
    for source, target, data in graph.edges(data=True):
        touches = (
            source in around and target in around
            if both_ends
            else source in around or target in around
        )
        fact_id = f"edge:{source}->{target}"
        if touches and fact_id not in seen:
            seen.add(fact_id)
            relationship = data.get("relationship", "?")
            lines.append((fact_id, f"{source} -{relationship}-> {target}"))
    return lines


def _properties(data: dict[str, Any]) -> str:
    shown = {
        key: value for key, value in data.items() if key != "label" and not key.startswith("_")
    }
    text = json.dumps(shown, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


async def digest(
    ingestor: Ingestor,
    reports: Sequence[IngestReport],
    *,
    entity: str,
    titles: Sequence[str],
    budget: DigestBudget | None = None,
    retrieve: bool = True,
) -> Digest | None:
    """The cycle's digest of what ``reports`` changed (``None`` when they changed nothing: no
    model call), made in ``ingestor``'s session (module docstring).

    Args:
        ingestor: the cycle's open ingestion session (its graph, sandbox, models, ledger).
        reports: the cycle's ingestions that wrote something.
        entity: the entity's name, for the prompts.
        titles: the titles of the items read this cycle.
        budget: the model calls it may make (default :class:`DigestBudget`).
        retrieve: ``False`` skips the retrieve (the cycle's cost budget is spent): the
            digest is written from the changed facts alone.

    Raises:
        ModelError: the model failed to write the digest (a failed retrieve or rewrite only
            makes the digest rest on less).
    """
    budget = budget or DigestBudget()
    nodes, ends = changed_ids(reports)
    if not nodes and not ends:
        return None
    calls_before = len(ingestor.ledger.calls)
    retrieved_text: str | None = None
    retrieved_nodes: list[str] = []
    note = None if retrieve else "the cycle's cost budget is spent: no retrieve"
    if retrieve and budget.query_calls > 0:
        try:
            found = await ingestor.retrieve(
                _question(entity, nodes, reports), focus=titles, max_calls=budget.query_calls
            )
        except (ModelError, SandboxUnavailableError) as error:
            note = f"the retrieve failed ({type(error).__name__}: {_one_line(error)})"
        else:
            retrieved_text, retrieved_nodes = found.text, found.nodes or []
            if not found.found:
                note = f"the retrieve found nothing after {found.queries} queries"
    graph = ingestor.graph()
    facts = changed_facts(graph, reports)
    if not facts:
        return None  # everything it changed was removed or merged away since
    related = related_facts(graph, retrieved_nodes, facts)
    messages: list[BaseMessage] = [
        SystemMessage(_SYSTEM),
        HumanMessage(_listing(entity, titles, facts, related, retrieved_text)),
    ]
    text = (await ingestor.planning.text(messages, step="digest")).strip()
    for _rewrite in range(budget.rewrites):
        bad, cited = _check(text, graph)
        if not bad and cited:
            break
        messages = [*messages, AIMessage(text), HumanMessage(_problem(bad))]
        try:
            rewritten = (await ingestor.planning.text(messages, step="fix_digest")).strip()
        except ModelError:
            break  # the first digest stands, its wrong citations removed below
        text = rewritten or text
    bad, cited = _check(text, graph)
    return Digest(
        text=_without(text, bad),
        facts=cited,
        shown=len(facts) + len(related),
        retrieved=retrieved_text is not None,
        dropped=bad,
        llm_calls=len(ingestor.ledger.calls) - calls_before,
        note=note,
    )


def _question(entity: str, nodes: Sequence[str], reports: Sequence[IngestReport]) -> str:
    """What the retrieve's query is written for: the cycle's changes, by id."""
    changed = [f"node {node_id}" for node_id in nodes[:MAX_FACTS]]
    edges = [edge.fact_id for report in reports for edge in report.inserted_edges]
    changed += [f"edge {edge}" for edge in dict.fromkeys(edges[: MAX_FACTS - len(changed)])]
    return (
        f"What changed in the knowledge graph of {entity} this cycle, and what does the graph "
        "hold around it that a reader needs to see why it matters? The facts inserted, changed "
        f"or superseded this cycle: {'; '.join(changed)}. Return those facts with their values, "
        "and the nodes and relationships next to them, with their ids."
    )


def _listing(
    entity: str,
    titles: Sequence[str],
    facts: Sequence[tuple[str, str]],
    related: Sequence[tuple[str, str]],
    retrieved: str | None,
) -> str:
    read = "\n".join(f"- {title}" for title in titles[:20]) or "- (untitled items)"
    parts = [
        f"Entity: {entity}",
        f"Items read this cycle:\n{read}",
        "Facts that changed:\n" + "\n".join(f"[{fact_id}] {line}" for fact_id, line in facts),
    ]
    if related:
        listed = "\n".join(f"[{fact_id}] {line}" for fact_id, line in related)
        parts.append(f"Facts around them:\n{listed}")
    if retrieved:
        cut = retrieved if len(retrieved) <= RETRIEVED_CHARS else retrieved[:RETRIEVED_CHARS] + "…"
        parts.append(f"What a query of the graph about these changes returned:\n{cut}")
    return "\n\n".join(parts)


def _check(text: str, graph: nx.MultiDiGraph) -> tuple[list[str], list[str]]:
    """The text's citations of facts the graph lacks, and those of facts it has."""
    bad: list[str] = []
    cited: list[str] = []
    for fact_id in dict.fromkeys(_CITATION.findall(text)):
        (cited if _exists(graph, fact_id) else bad).append(fact_id)
    return bad, cited


def _exists(graph: nx.MultiDiGraph, fact_id: str) -> bool:
    kind, _, rest = fact_id.partition(":")
    if kind == "node":
        return rest in graph
    source, _, target = rest.rpartition("->")  # as the citation pattern splits it
    return bool(graph.has_edge(source, target))


def _problem(bad: Sequence[str]) -> str:
    if bad:
        listed = " ".join(f"[{fact_id}]" for fact_id in bad)
        found = f"These citations name no fact of the graph: {listed}."
    else:
        found = "The digest cites no fact."
    return (
        f"{found} Rewrite the digest, citing each point's facts by the ids listed above, "
        "exactly as written, and no other ids. Reply with the bullet points only."
    )


def _without(text: str, bad: Sequence[str]) -> str:
    """``text`` with the citations of ``bad`` removed."""
    if not bad:
        return text
    pattern = " ?\\[(?:" + "|".join(re.escape(fact_id) for fact_id in bad) + ")\\]"
    return re.sub(pattern, "", text).strip()


def _one_line(error: BaseException) -> str:
    return (" ".join(str(error).split()) or type(error).__name__)[:300]


# ---------------------------------------------------------------------------- other programs

# Programs besides ``digest`` live in packages of their own, found through the
# ``kgot.aide_programs`` extension point (kgot.extension_points): each entry point names a
# module offering ``on_create(store, aide_row)``, run when an aide is created,
# ``check_ready(store, aide_row)``, run before a worker starts and before each cycle (it raises
# ConfigError for a setting that cannot work here), and the coroutine ``run_cycle(aide,
# report, now, exceeded)``, run after upkeep instead of the digest (``exceeded(spent)`` says
# why the cycle's cost budgets allow no more model calls).
DIGEST = "digest"
_PROGRAM_HOOKS = ("on_create", "check_ready", "run_cycle")


def _program_shape(found: object) -> Any:
    missing = [name for name in _PROGRAM_HOOKS if not callable(getattr(found, name, None))]
    if missing:
        raise TypeError(
            f"expected a module with {', '.join(_PROGRAM_HOOKS)}; {found!r} lacks "
            f"{', '.join(missing)}"
        )
    return found


AIDE_PROGRAMS: Registry[Any] = Registry(AIDE_PROGRAM_GROUP, "aide program", _program_shape)


def program_names() -> list[str]:
    """The programs an aide may run: ``digest``, then the installed ones by name (none is
    imported)."""
    return [DIGEST, *(name for name in AIDE_PROGRAMS.names() if name != DIGEST)]


def _program_module(program: str) -> Any:
    """The module of ``program`` (``None`` for ``digest``).

    Raises:
        ConfigError: no installed package provides it (any more), or it cannot be loaded.
    """
    if program == DIGEST:
        return None
    module = AIDE_PROGRAMS.get(program)
    if module is None:
        raise ConfigError(
            f"the aide program {program!r} is not installed (installed: "
            f"{', '.join(program_names())}); install the package that provides it"
        )
    return module


def on_create(store: Any, aide: Any) -> None:
    """Set up what ``aide``'s program needs (the advisor's types); an aide whose set-up fails
    is deleted again."""
    module = _program_module(aide.program)
    if module is None:
        return
    from kgot.aides.aide_rows import delete_aide

    try:
        module.on_create(store, aide)
    except BaseException:
        delete_aide(store, aide)
        raise


def check_ready(store: Any, aide: Any) -> None:
    """Refuse (``ConfigError``) to run ``aide`` when its program's settings cannot work in
    this environment, before anything is recorded."""
    module = _program_module(aide.program)
    if module is not None:
        module.check_ready(store, aide)


async def run_program(aide: Any, report: Any, now: Any, exceeded: Any) -> dict[str, Any] | None:
    """Run ``aide``'s program (other than ``digest``) for this cycle; what it did."""
    module = _program_module(aide.row.program)
    if module is None:
        return None
    done = await module.run_cycle(aide, report, now, exceeded)
    return dict(done.to_json())
