"""Sandbox speed: cold start vs warm job latency, with and without mounted files.

Run: ``python -m kgot.benchmarks.perf_sandbox [--quick] [--json] [--sandbox KIND]``.

* cold: a one-shot sandbox per job (``pool_size=0``: new bubblewrap, new interpreter, nothing
  pre-imported; the job imports networkx itself);
* warm start: how long a new pre-importing worker takes to become ready (paid in the background);
* warm: jobs on a ready worker (a supervisor and the job forked from the zygote, run, collect,
  clean up), measured end to end from ``Sandbox.run`` call to result. Target: p50 ≤ 20 ms;
* warm with a mount: the python tool's case, a job reading an attached file at
  ``/mnt/inputs`` (served by the warm worker kept for that mount set; the first such job starts
  it, and is reported on its own);
* warm RDF query: a job that imports pyoxigraph, as the RDF backend's jobs do (pre-imported);
* pool close: stopping two warm workers, which every ``kgot ask`` waits for before it exits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from kgot.benchmarks.figures import Figure, print_figures
from kgot.config import SandboxSettings
from kgot.sandbox import Job, Sandbox, open_sandbox

GRAPH_UPDATE = """
import json
import networkx as nx
G = nx.node_link_graph(json.load(open("in/graph.json")), edges="edges")
G.add_node("n9", label="City", name="Zurich")
G.add_edge("n1", "n9", relationship="lives_in")
json.dump(nx.node_link_data(G, edges="edges"), open("out/graph.json", "w"))
"""
# Mounts are under /mnt/inputs, except in the subprocess kind (no mount namespace), which
# names their folder in $KGOT_INPUTS.
MOUNTED_READ = """
import csv, os
inputs = os.environ.get("KGOT_INPUTS", "/mnt/inputs")
rows = list(csv.DictReader(open(os.path.join(inputs, "people.csv"))))
print(sum(int(row["age"]) for row in rows))
"""
RDF_QUERY = """
import pyoxigraph as ox
store = ox.Store()
store.add(ox.Quad(ox.NamedNode("http://x/a"), ox.NamedNode("http://x/p"), ox.Literal("1")))
print(len(list(store.query("SELECT ?s WHERE { ?s ?p ?o }"))))
"""
WARM_TARGET_MS = 20.0


def _graph(nodes: int = 10) -> bytes:
    return json.dumps(
        {
            "directed": True,
            "multigraph": True,
            "graph": {},
            "nodes": [
                {"id": f"n{i}", "label": "Thing", "name": f"thing {i}"} for i in range(nodes)
            ],
            "edges": [
                {"source": f"n{i}", "target": f"n{i + 1}", "key": 0, "relationship": "next"}
                for i in range(nodes - 1)
            ],
        }
    ).encode()


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _timed(box: Sandbox, job: Job) -> float:
    started = time.perf_counter()
    result = box.run(job)
    elapsed = (time.perf_counter() - started) * 1000
    if not result.ok:
        raise RuntimeError(f"benchmark job failed: {result.error or result.stderr}")
    return elapsed


def _time_jobs(kind: str, pool_size: int, count: int, job: Job) -> tuple[float, list[float]]:
    """The first job's time (it may start a worker), then ``count`` more."""
    box = open_sandbox(SandboxSettings(kind=kind, pool_size=pool_size))  # type: ignore[arg-type]
    try:
        if pool_size:
            box.warm_up(wait=True)
        first = _timed(box, job)
        return first, [_timed(box, job) for _ in range(count)]
    finally:
        box.close()


def _warm_start_ms(kind: str) -> float:
    box = open_sandbox(SandboxSettings(kind=kind, pool_size=1))  # type: ignore[arg-type]
    try:
        started = time.perf_counter()
        box.warm_up(wait=True)
        return (time.perf_counter() - started) * 1000
    finally:
        box.close()


def _close_ms(kind: str, workers: int = 2) -> float:
    box = open_sandbox(SandboxSettings(kind=kind, pool_size=workers))  # type: ignore[arg-type]
    try:
        box.warm_up(wait=True)
        box.run(Job("print(1)"))
    finally:
        started = time.perf_counter()
        box.close()
    return (time.perf_counter() - started) * 1000


def run(quick: bool = False, sandbox: str = "auto") -> list[Figure]:
    """Measure cold and warm latency in the ``sandbox`` kind; fewer repetitions with ``quick``."""
    kind = sandbox
    update = Job(GRAPH_UPDATE, files={"graph.json": _graph()})
    _, cold = _time_jobs(kind, pool_size=0, count=3 if quick else 10, job=update)
    _, warm = _time_jobs(kind, pool_size=1, count=30 if quick else 200, job=update)
    with tempfile.TemporaryDirectory(prefix="kgot-bench-") as folder:
        attachment = Path(folder) / "people.csv"
        attachment.write_text("name,age\nAda,36\nAlan,41\n")
        Path(folder).chmod(0o755)  # the sandbox's unprivileged uid reads the attachment
        mounted_job = Job(MOUNTED_READ, mounts=(attachment,))
        first_mounted, mounted = _time_jobs(kind, 1, 10 if quick else 50, mounted_job)
        _, cold_mounted = _time_jobs(kind, 0, 3 if quick else 10, mounted_job)
    _, rdf = _time_jobs(kind, pool_size=1, count=10 if quick else 50, job=Job(RDF_QUERY))
    return [
        Figure(
            "sandbox", "cold job p50 (new sandbox, imports networkx)", _percentile(cold, 0.5), "ms"
        ),
        Figure("sandbox", "cold job p95", _percentile(cold, 0.95), "ms"),
        Figure("sandbox", "warm worker start (pre-imports)", _warm_start_ms(kind), "ms"),
        Figure(
            "sandbox",
            "warm graph update p50",
            statistics.median(warm),
            "ms",
            target=WARM_TARGET_MS,
        ),
        Figure("sandbox", "warm graph update p95", _percentile(warm, 0.95), "ms"),
        Figure("sandbox", "job with a mount, one-shot p50", _percentile(cold_mounted, 0.5), "ms"),
        Figure("sandbox", "job with a new mount set (starts its worker)", first_mounted, "ms"),
        Figure("sandbox", "job with a mount, warm p50", statistics.median(mounted), "ms"),
        Figure("sandbox", "warm RDF job (pyoxigraph) p50", statistics.median(rdf), "ms"),
        Figure("sandbox", "pool close, 2 warm workers", _close_ms(kind), "ms"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    parser.add_argument("--sandbox", default="auto", help="sandbox kind (default: auto)")
    args = parser.parse_args()
    print_figures(run(quick=args.quick, sandbox=args.sandbox), as_json=args.json)


if __name__ == "__main__":
    main()
