"""The persistent store at scale: bulk ingest, loading an entity, committing a changeset.

Run: ``python -m kgot.benchmarks.perf_store`` (``--quick`` for 10k nodes / 20k edges, ``--json``
for JSON lines, ``--postgres URL`` to pick the server). For SQLite (a temporary file) and, when
reachable, PostgreSQL (a temporary schema, dropped afterwards) it:

* ingests an entity of 100,000 typed nodes and 200,000 typed edges through
  :meth:`EntitySession.commit` in changesets of 10,000 nodes / 20,000 edges (validated like any
  write);
* loads it into a NetworkX ``MultiDiGraph`` with :meth:`EntitySession.load_graph` (target on
  SQLite: ≤ 5 s);
* commits 100-change changesets (40 new nodes, 30 changed nodes, 30 new edges), each validated
  and written atomically with history (target on SQLite: ≤ 50 ms at the median).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from kgot.benchmarks.figures import Figure, p95, print_figures
from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import EntitySession, Provenance, open_store

AREA = "store"
SEED = 5
INGEST_CHUNK = 10_000
COMMITS = 25
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
_WORDS = [
    *("river", "stone", "market", "energy", "ocean", "vector", "matrix", "theory", "network"),
    *("atlas", "climate", "genome", "crystal", "orbit", "fusion", "carbon", "memory"),
    *("language", "vision", "circuit", "harbour", "forest", "glacier", "volcano", "enzyme"),
]
_RELATIONS = ("related_to", "part_of", "instance_of")


def _node(rng: random.Random, index: int) -> Node:
    if index % 3 == 0:
        return Node(
            f"p{index}",
            "Person",
            {
                "name": f"Person {index}",
                "born": f"19{rng.randint(10, 99)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
                "description": " ".join(rng.choices(_WORDS, k=6)),
            },
        )
    return Node(
        f"c{index}",
        "Concept",
        {"name": f"{rng.choice(_WORDS)} {index}", "definition": " ".join(rng.choices(_WORDS, k=8))},
    )


def _node_id(index: int) -> str:
    return f"p{index}" if index % 3 == 0 else f"c{index}"


def _edges(
    rng: random.Random, count: int, nodes: int, taken: set[tuple[str, str, str]]
) -> list[Edge]:
    edges: list[Edge] = []
    while len(edges) < count:
        source, target = _node_id(rng.randrange(nodes)), _node_id(rng.randrange(nodes))
        relation = rng.choice(_RELATIONS)
        if relation == "instance_of" and not target.startswith("c"):
            relation = "related_to"  # instance_of points to a Concept
        ident = (source, target, relation)
        if source == target or ident in taken:
            continue
        taken.add(ident)
        props = {"description": rng.choice(_WORDS)} if relation == "related_to" else {}
        edges.append(Edge(source, target, relation, relation, props))
    return edges


def _ingest(session: EntitySession, nodes: int, edges: int) -> float:
    rng = random.Random(SEED)
    taken: set[tuple[str, str, str]] = set()
    provenance = Provenance(run_id="bench-ingest", step="import")
    started = time.perf_counter()
    edges_per_chunk = max(1, edges * INGEST_CHUNK // nodes)
    for start in range(0, nodes, INGEST_CHUNK):
        stop = min(nodes, start + INGEST_CHUNK)
        chunk_nodes = tuple(_node(rng, i) for i in range(start, stop))
        # Edges only between nodes that exist by the end of this chunk.
        chunk_edges = tuple(_edges(rng, edges_per_chunk, stop, taken))
        session.commit(Changeset(added_nodes=chunk_nodes, added_edges=chunk_edges), provenance)
    return time.perf_counter() - started


def _commit_timings(session: EntitySession, nodes: int, rounds: int) -> list[float]:
    rng = random.Random(SEED + 1)
    graph = session.load_graph()
    taken = {(s, t, k) for s, t, k in graph.edges(keys=True)}
    timings = []
    for round_number in range(rounds):
        base = nodes + round_number * 40
        added = tuple(_node(rng, base + i) for i in range(40))
        changed = []
        for index in rng.sample(range(nodes), 30):
            node_id = _node_id(index)
            props = {k: v for k, v in graph.nodes[node_id].items() if k != "label"}
            props["description" if node_id.startswith("p") else "definition"] = (
                f"revised in round {round_number}"
            )
            changed.append(Node(node_id, graph.nodes[node_id]["label"], props))
            graph.nodes[node_id].update(props)
        new_edges = tuple(_edges(rng, 30, nodes, taken))
        changeset = Changeset(
            added_nodes=added, changed_nodes=tuple(changed), added_edges=new_edges
        )
        started = time.perf_counter()
        session.commit(changeset, Provenance(run_id="bench", step="update_graph"))
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def _measure(url: str, label: str, nodes: int, edges: int, *, targets: bool) -> list[Figure]:
    store = open_store(url)
    try:
        store.create_entity("bench")
        session = store.session("bench")
        ingest_s = _ingest(session, nodes, edges)
        loads = []
        for _ in range(3):
            started = time.perf_counter()
            graph = store.session("bench").load_graph()
            loads.append(time.perf_counter() - started)
        assert graph.number_of_nodes() == nodes and graph.number_of_edges() == edges
        commits = _commit_timings(store.session("bench"), nodes, COMMITS)
    finally:
        store.close()
    size = f"{nodes // 1000}k nodes / {edges // 1000}k edges"
    return [
        Figure(AREA, f"{label}: ingest {size} (validated commits)", ingest_s, "s"),
        Figure(
            AREA,
            f"{label}: load {size} into NetworkX (median of 3)",
            statistics.median(loads),
            "s",
            target=5.0 if targets else None,
        ),
        Figure(
            AREA,
            f"{label}: commit 100 changes p50",
            statistics.median(commits),
            "ms",
            target=50.0 if targets else None,
        ),
        Figure(AREA, f"{label}: commit 100 changes p95", p95(commits), "ms"),
    ]


def _postgres_schema_url(base: str) -> tuple[str, str] | None:
    import psycopg

    try:
        psycopg.connect(base, connect_timeout=3).close()
    except psycopg.Error as error:
        sys.stderr.write(f"PostgreSQL skipped: {str(error).strip().splitlines()[0]}\n")
        return None
    schema = f"kgot_bench_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}schema={schema}", schema


def run(quick: bool = False, *, postgres: str | None = None) -> list[Figure]:
    """Measure the store on SQLite and (when reachable) PostgreSQL."""
    nodes, edges = (10_000, 20_000) if quick else (100_000, 200_000)
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="kgot-bench-store-") as folder:
        figures += _measure(str(Path(folder) / "kgot.db"), "SQLite", nodes, edges, targets=True)
    base = postgres or os.environ.get("KGOT_BENCH_POSTGRES", DEFAULT_POSTGRES)
    found = _postgres_schema_url(base)
    if found is not None:
        url, schema = found
        try:
            figures += _measure(url, "PostgreSQL", nodes, edges, targets=False)
        finally:
            import psycopg

            with psycopg.connect(base, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgot.benchmarks.perf_store")
    parser.add_argument("--quick", action="store_true", help="10k nodes / 20k edges")
    parser.add_argument("--json", action="store_true", help="JSON lines")
    parser.add_argument("--postgres", help=f"server URL (default {DEFAULT_POSTGRES})")
    args = parser.parse_args(argv)
    print_figures(run(quick=args.quick, postgres=args.postgres), as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
