"""Memory upkeep at scale (issue 15): resolution quality, resolve, search, write-time resolution.

Run: ``python -m kgot.benchmarks.perf_memory`` (``--quick`` for 2,000 nodes, ``--json`` for JSON
lines). It prints:

* resolution precision and recall on the labelled set of :mod:`kgot.memory.evaluation`
  (targets: precision ≥ 0.97, recall ≥ 0.85);
* ``memory resolve`` (a dry run of :meth:`Memory.resolve`: graph load, blocking, matching) over
  an entity of 10,000 organisation nodes on a real SQLite store (target ≤ 3 s);
* ``memory search`` over the same entity with 10,000 edges as well: the first query of a
  session (the search index in the store is built before, once, and timed apart), then p50
  and p95 of warm queries — full names, single words, prefixes, misspellings and phrases
  (target p95 ≤ 50 ms). The process's CPU time is shown too: on a busy machine the wall-clock
  figures grow with the other processes' load, the CPU time hardly does;
* what write-time resolution adds to a commit at 10,000 nodes: :func:`prepare_changeset` on a
  warm snapshot (target ≤ 5 ms), beside :meth:`Memory.commit` and a plain
  :meth:`EntitySession.commit` of like changesets (10 new nodes, some of them duplicates of
  existing ones, and 10 new edges) to another entity of the same size.

Figures only; nothing here asserts a timing.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kgot.benchmarks.figures import Figure, p95, perf_main
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import evaluate_resolution, open_memory, synthetic_nodes, update_search_index
from kgot.persistence import EntitySession, Provenance, Store, open_store

AREA = "memory"
SEED = 15
LABEL = "Organization"  # a starter type: takes aliases, evergreen
RELATIONSHIP = "related_to"
NEW_NODES = 10  # per measured commit, with as many edges


def commit_population(session: EntitySession, nodes: Sequence[Node], edges: int, seed: int) -> None:
    """Commit ``nodes`` and ``edges`` random edges between them (``seed`` picks them) in one
    commit."""
    rng = random.Random(seed)
    taken: set[tuple[int, int]] = set()
    links: list[Edge] = []
    while len(links) < edges:
        source, target = rng.randrange(len(nodes)), rng.randrange(len(nodes))
        if source == target or (source, target) in taken:
            continue
        taken.add((source, target))
        links.append(Edge(nodes[source].id, nodes[target].id, RELATIONSHIP))
    session.commit(
        Changeset(added_nodes=tuple(nodes), added_edges=tuple(links)),
        Provenance(run_id="bench-ingest", step="import", source_ref="bench"),
    )


def user_queries(nodes: Sequence[Node], count: int, seed: int) -> list[str]:
    """Queries a user would type: whole names, one word, a prefix, a typo, two names' words."""
    rng = random.Random(seed)
    queries: list[str] = []
    while len(queries) < count:
        name = str(rng.choice(nodes).properties["name"])
        words = name.split()
        kind = len(queries) % 5
        if kind == 0:
            queries.append(name)
        elif kind == 1:
            queries.append(rng.choice(words))
        elif kind == 2:
            queries.append(max(words, key=len)[:4])
        elif kind == 3:
            word = max(words, key=len)
            cut = rng.randrange(1, len(word)) if len(word) > 1 else 0
            queries.append(word[:cut] + word[cut + 1 :] if cut else word)  # a letter dropped
        else:
            other = str(rng.choice(nodes).properties["name"]).split()[0]
            queries.append(f"{words[0]} and {other}")
    return queries


def _resolution_quality() -> list[Figure]:
    report = evaluate_resolution()
    return [
        Figure(AREA, "resolution precision (labelled set)", report.precision, "ratio", 0.97, "min"),
        Figure(AREA, "resolution recall (labelled set)", report.recall, "ratio", 0.85, "min"),
    ]


def _resolve(store: Store, entity: str, size: str) -> Figure:
    memory = open_memory(store, entity)
    started = time.perf_counter()
    memory.resolve()
    seconds = time.perf_counter() - started
    return Figure(AREA, f"SQLite: memory resolve over {size} nodes (dry run)", seconds, "s", 3.0)


def _search(store: Store, entity: str, nodes: Sequence[Node], queries: int) -> list[Figure]:
    size = f"{len(nodes):,}"
    started = time.perf_counter()
    update_search_index(store.session(entity))  # once per entity; later commits catch up
    built = (time.perf_counter() - started) * 1000
    firsts: list[float] = []
    first_cpu: list[float] = []  # the process's CPU time: what a busy machine does not inflate
    for round_number in range(3):  # a new session each time
        memory = open_memory(store, entity)
        started, cpu = time.perf_counter(), time.process_time()
        memory.search(str(nodes[round_number].properties["name"]))
        firsts.append((time.perf_counter() - started) * 1000)
        first_cpu.append((time.process_time() - cpu) * 1000)
    warm: list[float] = []
    warm_cpu: list[float] = []
    for query in user_queries(nodes, queries, SEED + 1):
        started, cpu = time.perf_counter(), time.process_time()
        memory.search(query)
        warm.append((time.perf_counter() - started) * 1000)
        warm_cpu.append((time.process_time() - cpu) * 1000)
    label = f"SQLite: memory search at {size} nodes / {size} edges"
    return [
        Figure(
            AREA,
            f"{label}, first query of a session (median of 3)",
            statistics.median(firsts),
            "ms",
        ),
        Figure(
            AREA,
            f"{label}, first query of a session, CPU time (median of 3)",
            statistics.median(first_cpu),
            "ms",
        ),
        Figure(AREA, f"{label}, search index build (once per entity)", built, "ms"),
        Figure(AREA, f"{label}, warm p50", statistics.median(warm), "ms"),
        Figure(AREA, f"{label}, warm p95", p95(warm), "ms", 50.0),
        Figure(AREA, f"{label}, warm p95, CPU time", p95(warm_cpu), "ms"),
    ]


def _changesets(nodes: Sequence[Node], rounds: int, tag: str) -> list[Changeset]:
    """Each: 10 new nodes (every third one a re-spelling of an existing node, so the hook
    has something to land) and 10 edges from them to existing nodes."""
    rng = random.Random(SEED + 2)
    changesets = []
    for round_number in range(rounds):
        added: list[Node] = []
        for i in range(NEW_NODES):
            node_id = f"{tag}{round_number}_{i}"
            if i % 3 == 0:
                name = str(rng.choice(nodes).properties["name"]).upper()
            else:
                name = f"Novel {tag} {round_number} {i} Holdings"
            added.append(Node(node_id, LABEL, {"name": name}))
        edges = tuple(Edge(n.id, rng.choice(nodes).id, RELATIONSHIP) for n in added)
        changesets.append(Changeset(added_nodes=tuple(added), added_edges=edges))
    return changesets


def _write_time(store: Store, nodes: Sequence[Node], rounds: int) -> list[Figure]:
    size = f"{len(nodes):,}"
    provenance = Provenance(run_id="bench", step="update_graph", source_ref="bench")
    hooked = open_memory(store, "hooked")
    hooked.commit(_changesets(nodes, 1, "warmup")[0], provenance)  # loads the snapshot once
    prepare: list[float] = []
    prepare_cpu: list[float] = []
    through_hook: list[float] = []
    for changeset in _changesets(nodes, rounds, "h"):
        started, cpu = time.perf_counter(), time.process_time()
        hooked.prepare(changeset, confidence=provenance.confidence)
        prepare.append((time.perf_counter() - started) * 1000)
        prepare_cpu.append((time.process_time() - cpu) * 1000)
        started = time.perf_counter()
        hooked.commit(changeset, provenance)
        through_hook.append((time.perf_counter() - started) * 1000)
    plain_session = store.session("plain")
    plain: list[float] = []
    for changeset in _changesets(nodes, rounds, "p"):
        started = time.perf_counter()
        plain_session.commit(changeset, provenance)
        plain.append((time.perf_counter() - started) * 1000)
    label = f"SQLite: commit of 10 nodes + 10 edges at {size} nodes"
    return [
        Figure(
            AREA,
            f"write-time resolution per commit at {size} nodes, p50 (prepare_changeset)",
            statistics.median(prepare),
            "ms",
            5.0,
        ),
        Figure(
            AREA,
            f"write-time resolution per commit at {size} nodes, p50, CPU time",
            statistics.median(prepare_cpu),
            "ms",
        ),
        Figure(
            AREA,
            f"write-time resolution per added node at {size} nodes, p50",
            statistics.median(prepare) / NEW_NODES,
            "ms",
        ),
        Figure(AREA, f"{label} through Memory.commit, p50", statistics.median(through_hook), "ms"),
        Figure(AREA, f"{label}, plain session.commit, p50", statistics.median(plain), "ms"),
    ]


def measure(nodes: int = 10_000, *, queries: int = 300, commits: int = 30) -> list[Figure]:
    """Every figure of the module docstring, at ``nodes`` nodes (SQLite, a temporary file)."""
    figures = _resolution_quality()
    population = synthetic_nodes(nodes, seed=SEED, label=LABEL)
    with tempfile.TemporaryDirectory(prefix="kgot-bench-memory-") as folder:
        store = open_store(str(Path(folder) / "kgot.db"))
        try:
            for entity in ("bench", "hooked", "plain"):
                store.create_entity(entity)
            commit_population(store.session("bench"), population, nodes, SEED)
            figures.append(_resolve(store, "bench", f"{nodes:,}"))
            figures += _search(store, "bench", population, queries)
            commit_population(store.session("hooked"), population, nodes, SEED)
            commit_population(store.session("plain"), population, nodes, SEED)
            figures += _write_time(store, population, commits)
        finally:
            store.close()
    return figures


def run(quick: bool = False) -> list[Figure]:
    """The figures at 10,000 nodes (``quick``: 2,000 nodes, fewer queries and commits)."""
    if quick:
        return measure(2_000, queries=100, commits=10)
    return measure()


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(
        run, prog="python -m kgot.benchmarks.perf_memory", quick_help="2,000 nodes", argv=argv
    )


if __name__ == "__main__":
    sys.exit(main())
