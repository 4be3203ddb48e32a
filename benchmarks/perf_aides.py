"""The aide runtime's own cost (issue 16), with a zero-latency scripted model.

Run: ``python -m kgot.benchmarks.perf_aides`` (``--quick`` for 1,000 nodes and 10 items,
``--json`` for JSON lines). On a real SQLite store, an entity of 10,000 nodes and a folder of
new notes, it prints:

* the cost per ingested item of one cycle: poll, claim, graph code in the sandbox (the
  cycle's own worker holds the entity's graph), the memory's rewrite, the type check, the
  commit, marking the item done and the digest (its retrieve query in the sandbox and its fact
  read), divided by the items (target ≤ 50 ms); the model's own time (what the scripted model
  spent, about nothing) is left out;
* the first item's extra cost: the cycle's set-up (sandbox start, the entity's graph loaded
  into the backend), measured as a one-item cycle;
* an idle cycle: nothing new in the folder (poll, no model call);
* the memory's upkeep pass over the entity, which cycles run at most once an hour
  (``UPKEEP_EVERY``), not per item;
* a waiting worker's CPU between cycles (``kgot aide run --every`` sleeps on an event).

Figures only; nothing here asserts a timing.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kgot.aides import create_aide
from kgot.benchmarks.figures import Figure, perf_main
from kgot.config import load_settings
from kgot.graph_model import Changeset, Node
from kgot.llm import ScriptedChatModel
from kgot.persistence import Provenance, open_store

AREA = "aides"


def _code(call: Any) -> str:
    """Graph code for the note the write prompt shows: one new organisation."""
    shown = call.prompt.split("Tool result:")[-1]
    match = re.search(r"Company (\d+)", shown)
    number = match.group(1) if match else "0"
    return (
        f'```python\nG.add_node("co{number}", label="Organization", name="Company {number}")\n```'
    )


def _notes(folder: Path, first: int, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    settled = time.time() - 60  # sources skip files written in the last seconds
    for number in range(first, first + count):
        note = folder / f"note{number:05}.txt"
        note.write_text(f"Company {number} was founded in 1999 in Zurich.", encoding="utf-8")
        os.utime(note, (settled, settled))


def measure(nodes: int = 10_000, items: int = 40) -> list[Figure]:
    """The figures for an entity of ``nodes`` nodes and a cycle of ``items`` new notes."""
    model = ScriptedChatModel(
        script={
            "update_graph": [_code],
            "query": ["```python\nresult = sorted(n for n in G.nodes if n.startswith('co'))\n```"],
            "digest": ["- new [node:co1]"],
            "fix_digest": ["- new [node:co1]"],
        }
    )
    models = {"planning": model, "execution": model}
    with tempfile.TemporaryDirectory(prefix="kgot-perf-aides-") as scratch:
        root = Path(scratch)
        settings = load_settings({"store.db": str(root / "kgot.db"), "llm.model": "scripted"})
        with open_store(str(root / "kgot.db")) as store:
            store.create_entity("market")
            session = store.session("market")
            session.load_graph()
            seed = tuple(Node(f"p{i}", "Place", {"name": f"Place {i}"}) for i in range(nodes))
            session.commit(Changeset(added_nodes=seed), Provenance(run_id="seed", step="perf"))
            aide = create_aide(store, "perf", "market", settings=settings, models=models)
            inbox = root / "inbox"
            _notes(inbox, 0, 1)
            aide.add_source("dir", str(inbox))

            one = aide.run_cycle()  # set-up cost (sandbox, graph load) plus one item
            _notes(inbox, 1, items)
            model_before = _model_seconds(model)
            started = time.perf_counter()
            full = aide.run_cycle()
            elapsed = time.perf_counter() - started
            model_time = _model_seconds(model) - model_before
            idle_started = time.perf_counter()
            aide.run_cycle()
            idle = time.perf_counter() - idle_started
            upkeep_started = time.perf_counter()
            aide._upkeep(datetime.now(UTC))
            upkeep = time.perf_counter() - upkeep_started
        per_item = (elapsed - model_time) / max(1, full.ingested)
    return [
        Figure(AREA, f"cost per ingested item at {nodes:,} nodes", per_item * 1000, "ms", 50),
        Figure(AREA, "first cycle of one item (set-up included)", one.duration_s * 1000, "ms"),
        Figure(AREA, f"idle cycle ({items + 1} files, nothing new)", idle * 1000, "ms"),
        Figure(AREA, f"upkeep pass at {nodes:,} nodes (at most hourly)", upkeep * 1000, "ms"),
        Figure(AREA, "waiting worker CPU per second", _waiting_cpu() * 1000, "ms"),
    ]


def _model_seconds(model: ScriptedChatModel) -> float:
    return float(getattr(model, "latency_s", 0.0)) * len(model.calls)


def _waiting_cpu(seconds: float = 1.0) -> float:
    """Process CPU time spent while a worker waits for its next cycle (an Event wait)."""
    stop = threading.Event()
    before = time.process_time()
    stop.wait(seconds)
    return (time.process_time() - before) / seconds


def run(quick: bool = False) -> list[Figure]:
    """The figures at 10,000 nodes (``quick``: 1,000 nodes and 10 items)."""
    return measure(1_000, items=10) if quick else measure()


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(
        run,
        prog="python -m kgot.benchmarks.perf_aides",
        quick_help="1,000 nodes, 10 items",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
