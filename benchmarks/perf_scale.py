"""Graphs that grow for years (issue 30, item 4): what each operation costs as an entity grows.

Run: ``python -m kgot.benchmarks.perf_scale`` (or ``kgot bench perf --only scale``).
``--sizes 10000,100000,1000000`` picks the entity sizes (default 10,000 and 100,000 nodes),
``--postgres URL`` the server (default ``postgresql://postgres@127.0.0.1:5432/test``, used only
when reachable; each entity gets a temporary schema, dropped afterwards), ``--no-postgres``
skips it (``--no-sqlite`` skips SQLite), ``--repeats N`` the repetitions of each command (3),
``--quick`` measures 2,000 and 10,000 nodes on SQLite only, once each, and ``--json`` prints
JSON lines. Progress, and each command's figures as it ends, go to stderr.

For each engine (SQLite in a temporary file; PostgreSQL) and size it builds one entity through
:meth:`EntitySession.commit` in batches of 10,000 nodes: companies (name, ticker, sector,
founded), people (name, born, role), articles (title, summary, published) and notes (title,
text, written), about two edges a node (``works_at``, ``mentions``, ``related_to``), each type
the entity's own. Then it reports, for that size:

* per-question overhead: ``kgot ask --entity E`` as a real process with a zero-latency scripted
  model, one INSERT round whose graph code adds a node and an edge, then the answer — its wall
  time, the CPU time of the process tree and its peak RSS (median of the repetitions; target on
  PostgreSQL: ≤ 2 s and ≤ 1 GB);
* per-item ingestion overhead: ``kgot ingest --entity E`` of one small note, scripted model (one
  graph update adding a node and an edge): wall, CPU, peak RSS (target on PostgreSQL ≤ 300 ms);
* ``kgot memory search`` cold — a fresh process per query, p50 and p95 of its wall time over
  the repetitions, and CPU (target on PostgreSQL p95 ≤ 150 ms) — and warm — the Python API,
  ``open_memory(store, entity).search(...)`` repeated in one process after a first query, p50
  and p95 (target on PostgreSQL p95 ≤ 30 ms); the first query of that process is shown apart;
* write-time resolution per 10-node commit: :meth:`Memory.prepare` on changesets of 10 new
  nodes (a third of them re-spellings of existing people and companies) and 10 edges, p50 on a
  warm memory, and the first one of a process (which builds the write-time snapshot);
* ``kgot memory upkeep --dry-run`` and ``kgot memory resolve`` (a dry run) as processes: wall,
  CPU, peak RSS;
* disk per 10,000 nodes: the SQLite file (with its WAL) after the build, or the PostgreSQL
  schema's tables with their indexes and TOAST (``pg_total_relation_size``), over nodes × 10k;
* each timing at every larger size as a multiple of its value at the smallest size (issue 30:
  within 2× of the 10k value on PostgreSQL), and the time the build took.

The CLI commands run as ``sys.executable -m kgot …`` with the settings of the environment
cleared (no ``KGOT_*``/``OPENAI_*`` variables, a private config folder). Each runs under a small
Python wrapper process that reports ``resource.getrusage(RUSAGE_CHILDREN)`` after it: CPU is
``ru_utime + ru_stime`` of the command and every descendant it waited for (the sandbox workers
too); peak RSS is ``ru_maxrss``, the largest peak of any one of those processes, not their
sum (the host process dominates it). A descendant that outlives the command is not counted.

``kgot memory search`` reads the store's search index (:mod:`kgot.memory.search_index`, built
once per entity, timed on its own after the build) and only the facts holding its words; a
question and an ingested item work on a working set of the entity (``controller/working_set.py``)
and their writes read what they name and the types they add (``memory/writes.py``); upkeep and
resolve still load the whole entity, so those figures grow with it. Figures only; nothing here
asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgot.benchmarks.figures import Figure, p95, print_figures
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import open_memory, update_resolution_keys, update_search_index
from kgot.persistence import Provenance, Store, open_store

__all__ = ["Command", "build_entity", "measure", "run"]

AREA = "scale"
SEED = 30
ENTITY = "scale"
BATCH = 10_000  # nodes per build commit, as perf_store ingests
SIZES = (10_000, 100_000)
QUICK_SIZES = (2_000, 10_000)
REPEATS = 3
WARM_QUERIES = 50
PREPARES = 10
NEW_NODES = 10  # per measured write-time commit, with as many edges
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
# Issue 30's targets, set for PostgreSQL at 1M nodes (so at every smaller size too).
QUESTION_TARGET_S = 2.0
QUESTION_RSS_TARGET_MB = 1024.0
ITEM_TARGET_S = 0.3
COLD_SEARCH_TARGET_MS = 150.0
WARM_SEARCH_TARGET_MS = 30.0
GROWTH_TARGET = 2.0

_FIRST = (
    *("Anna", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas"),
    *("Kara", "Liam", "Maya", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Sven", "Tara"),
    *("Umar", "Vera", "Wei", "Xenia", "Yusuf", "Zoe", "Amir", "Bianca", "Chen", "Dana"),
)
_LAST = (
    *("Smith", "Garcia", "Müller", "Rossi", "Tanaka", "Kowalski", "Dubois", "Silva", "Nguyen"),
    *("Okafor", "Larsen", "Novak", "Haddad", "Ivanova", "Kim", "Moreau", "Schmidt", "Costa"),
    *("Jensen", "Patel", "Andersen", "Berg", "Fischer", "Romero", "Sato", "Weber", "Yilmaz"),
)
_SYLLABLES = ("ar", "bel", "cor", "dan", "el", "fin", "gar", "hol", "ix", "jun", "kor", "lum")
_SUFFIXES = ("Inc.", "Holdings", "Group", "AG", "plc", "Systems", "Labs", "Partners")
_SECTORS = ("energy", "software", "banking", "retail", "biotech", "logistics", "mining")
_ROLES = ("analyst", "engineer", "chief executive", "chief financial officer", "director")
_TOPICS = (
    *("quarterly results", "a supply contract", "new plant", "share buyback", "lawsuit"),
    *("product launch", "merger talks", "guidance cut", "hiring freeze", "dividend"),
)
_WORDS = (
    *("margin", "revenue", "demand", "costs", "outlook", "capacity", "pricing", "customers"),
    *("regulator", "backlog", "inventory", "freight", "steel", "orders", "growth", "risk"),
)

TYPES: list[dict[str, Any]] = [
    {
        "kind": "node",
        "name": "Company",
        "description": "A listed company the entity follows.",
        "identity": ["ticker"],
        "functional": ["sector"],
        "rank_weight": 0.8,
        "properties": {
            "type": "object",
            "required": ["name", "ticker"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "ticker": {"type": "string", "minLength": 1},
                "sector": {"type": "string"},
                "founded": {"type": "string", "format": "date"},
            },
        },
    },
    {
        "kind": "node",
        "name": "Person",  # the starter type's name: shadowed by the entity's own
        "description": "A person working at a company.",
        "functional": ["born"],
        "rank_weight": 0.6,
        "properties": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "born": {"type": "string", "format": "date"},
                "role": {"type": "string"},
            },
        },
    },
    {
        "kind": "node",
        "name": "Article",
        "description": "A news article.",
        "half_life_days": 365,
        "rank_weight": 0.4,
        "properties": {
            "type": "object",
            "required": ["title"],
            "properties": {
                "title": {"type": "string", "minLength": 1},
                "summary": {"type": "string"},
                "published": {"type": "string", "format": "date"},
            },
        },
    },
    {
        "kind": "node",
        "name": "Note",
        "description": "An analyst's note.",
        "half_life_days": 180,
        "rank_weight": 0.4,
        "properties": {
            "type": "object",
            "required": ["title"],
            "properties": {
                "title": {"type": "string", "minLength": 1},
                "text": {"type": "string"},
                "written": {"type": "string", "format": "date"},
            },
        },
    },
    {
        "kind": "edge",
        "name": "works_at",
        "description": "A person works at a company.",
        "source": ["Person"],
        "target": ["Company"],
        "half_life_days": 730,
        "properties": {"type": "object", "properties": {"since": {"type": "string"}}},
    },
    {
        "kind": "edge",
        "name": "mentions",  # the starter type's name (its source is Document only)
        "description": "An article or note mentions a company or a person.",
        "source": ["Article", "Note"],
        "target": ["Company", "Person"],
        "properties": {"type": "object"},
    },
]


# --------------------------------------------------------------------------- the entity


def _kind(index: int) -> str:
    """One company in ten, three people, four articles, two notes."""
    slot = index % 10
    if slot == 0:
        return "company"
    if slot <= 3:
        return "person"
    return "article" if slot <= 7 else "note"


def node_id(index: int) -> str:
    return f"{_kind(index)}_{index}"


def _date(rng: random.Random, first_year: int, last_year: int) -> str:
    return f"{rng.randint(first_year, last_year)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _company_name(rng: random.Random) -> str:
    word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
    return f"{word} {rng.choice(_SUFFIXES)}"


def _node(rng: random.Random, index: int) -> Node:
    kind = _kind(index)
    if kind == "company":
        properties: dict[str, Any] = {
            # The index keeps names (and tickers, the identity) apart: resolution is measured
            # on an entity without thousands of accidental duplicates.
            "name": f"{_company_name(rng)} {index // 10}",
            "ticker": f"T{index // 10:X}",
            "sector": rng.choice(_SECTORS),
            "founded": _date(rng, 1900, 2020),
        }
        return Node(node_id(index), "Company", properties)
    if kind == "person":
        name = f"{rng.choice(_FIRST)} {chr(65 + rng.randrange(26))}. {rng.choice(_LAST)}"
        properties = {"name": name, "born": _date(rng, 1940, 2000), "role": rng.choice(_ROLES)}
        return Node(node_id(index), "Person", properties)
    topic = rng.choice(_TOPICS)
    text = " ".join(rng.choices(_WORDS, k=24))
    if kind == "article":
        properties = {
            "title": f"{topic.capitalize()} at company {index // 37} ({index})",
            "summary": text,
            "published": _date(rng, 2015, 2025),
        }
        return Node(node_id(index), "Article", properties)
    properties = {
        "title": f"Note {index} on {topic}",
        "text": text,
        "written": _date(rng, 2020, 2025),
    }
    return Node(node_id(index), "Note", properties)


def _earlier(rng: random.Random, index: int, kind: str) -> int | None:
    """A random node of ``kind`` before ``index`` (kinds repeat every ten nodes), if any."""
    slots = {"company": (0,), "person": (1, 2, 3), "article": (4, 5, 6, 7)}[kind]
    tens = rng.randrange(index // 10 + 1)
    candidate = 10 * tens + rng.choice(slots)
    if candidate >= index:  # in this ten, after the node: take the ten before, if there is one
        candidate -= 10
    return candidate if candidate >= 0 else None


def _edges(rng: random.Random, index: int) -> list[Edge]:
    """About two edges from node ``index`` to earlier nodes, as its kind would have them."""
    source = node_id(index)
    kind = _kind(index)
    pairs: list[tuple[int | None, str, dict[str, Any]]]
    if kind == "company":
        pairs = [
            (_earlier(rng, index, "company"), "related_to", {"description": "competitor"}),
            (_earlier(rng, index, "company"), "related_to", {"description": "supplier"}),
        ]
    elif kind == "person":
        pairs = [
            (_earlier(rng, index, "company"), "works_at", {"since": _date(rng, 2000, 2024)}),
            (_earlier(rng, index, "person"), "related_to", {"description": "colleague"}),
        ]
    elif kind == "article":
        pairs = [
            (_earlier(rng, index, "company"), "mentions", {}),
            (_earlier(rng, index, "person"), "mentions", {}),
        ]
    else:
        pairs = [
            (_earlier(rng, index, "company"), "mentions", {}),
            (_earlier(rng, index, "article"), "related_to", {"description": "comments on"}),
        ]
    edges: list[Edge] = []
    seen: set[str] = set()
    for target, relationship, properties in pairs:
        if target is None or target == index or node_id(target) in seen:
            continue  # the first nodes have too few before them; no parallel duplicates
        seen.add(node_id(target))
        edges.append(Edge(source, node_id(target), relationship, properties=properties))
    return edges


def build_entity(store: Store, nodes: int, name: str = ENTITY) -> tuple[int, int]:
    """Create entity ``name`` with :data:`TYPES` and ``nodes`` nodes (edges to earlier nodes
    only, so each batch's edges land on nodes that exist); returns (nodes, edges)."""
    store.create_entity(name, "issue 30 scale benchmark", types=TYPES, shadow=True)
    session = store.session(name)
    rng = random.Random(SEED)
    provenance = Provenance(run_id="bench-scale-build", step="import", source_ref="bench")
    edge_count = 0
    for start in range(0, nodes, BATCH):
        stop = min(nodes, start + BATCH)
        batch_nodes = tuple(_node(rng, i) for i in range(start, stop))
        batch_edges = tuple(edge for i in range(start, stop) for edge in _edges(rng, i))
        edge_count += len(batch_edges)
        session.commit(Changeset(added_nodes=batch_nodes, added_edges=batch_edges), provenance)
    return nodes, edge_count


# --------------------------------------------------------------------------- commands

# Runs the command given after the output path and writes what it and its descendants used.
# A wrapper of its own, so RUSAGE_CHILDREN holds this command's process tree only: in the
# benchmark process it would also hold every earlier command (ru_maxrss never goes down).
_WRAPPER = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump({"code": done.returncode, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
               "maxrss_kb": usage.ru_maxrss, "stdout": done.stdout.decode(errors="replace"),
               "stderr": done.stderr.decode(errors="replace")}, out)
"""


@dataclass(frozen=True)
class Command:
    """What one ``kgot`` process cost: wall and CPU seconds (its tree), peak RSS in MB."""

    wall: float
    cpu: float
    rss_mb: float
    stdout: str


class CommandError(RuntimeError):
    """A measured command failed: its figures would describe an error path."""


@dataclass(frozen=True)
class _Runner:
    """Runs ``kgot`` commands against one store with a cleared environment."""

    folder: Path
    db: str
    sandbox: str

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
        env["XDG_CONFIG_HOME"] = str(self.folder / "config")
        env["XDG_DATA_HOME"] = str(self.folder / "data")
        env["KGOT_DB"] = self.db
        if self.sandbox != "auto":
            env["KGOT_SANDBOX"] = self.sandbox
        return env

    def __call__(self, *args: str, expect: str = "") -> Command:
        """Run ``kgot *args``; its output must hold ``expect`` (the scripted answer, say),
        so a run that took an error path is never measured as if it had worked."""
        report = self.folder / f"usage-{uuid.uuid4().hex[:8]}.json"
        command = [sys.executable, "-c", _WRAPPER, str(report), sys.executable, "-m", "kgot"]
        subprocess.run(
            [*command, *args, "--db", self.db],
            env=self.environment(),
            cwd=self.folder,
            check=False,
            timeout=3600,
        )
        usage = json.loads(report.read_text(encoding="utf-8"))
        report.unlink()
        if usage["code"] != 0:
            tail = " ".join(usage["stderr"].split())[-400:]
            raise CommandError(f"kgot {args[0]} {args[1]} exited {usage['code']}: {tail}")
        if expect not in usage["stdout"]:
            shown = " ".join(usage["stdout"].split())[:200]
            raise CommandError(f"kgot {args[0]} {args[1]} printed {shown!r}, not {expect!r}")
        return Command(usage["wall"], usage["cpu"], usage["maxrss_kb"] / 1024, usage["stdout"])


def _fresh_date(number: int, day: int) -> str:
    """A date no built node has (they end in 2025) nor another repetition's: write-time
    resolution would otherwise land a new note on an old one of the same date (it merges
    notes whose only agreeing field is the date), and the insert measured would be a merge."""
    return f"{2026 + number // 12}-{number % 12 + 1:02d}-{day:02d}"


def _ask_script(number: int) -> dict[str, Any]:
    """One INSERT round (5 votes) that reads the attachment and adds a note mentioning the
    first company, then a RETRIEVE round answering from it (as examples/acme-ask.json)."""
    insert = {"decision": "INSERT", "reason": "the graph holds nothing from this call yet"}
    retrieve = {"decision": "RETRIEVE", "reason": "the note on the call is in the graph"}
    code = (
        "```python\n"
        f'G.add_node("asked_{number}", label="Note", title="Call notes {number}", '
        'text="Gross margin rose to 41.2% on lower freight costs.", '
        f'written="{_fresh_date(number, 10)}")\n'
        f'G.add_edge("asked_{number}", "{node_id(0)}", relationship="mentions")\n'
        "```"
    )
    query = f'```python\nresult = G.nodes["asked_{number}"]["text"]\n```'
    return {
        "decide": [insert] * 5 + [retrieve] * 5,
        "define_tool_calls": [
            {"$tool_calls": [{"name": "inspect_file", "args": {"path": "call.md"}}]}
        ],
        "update_graph": [code],
        "query": [query],
        "math_check": [{"needs_math": False, "reason": "a quotation"}],
        "solve": [{"answer": "Gross margin rose to 41.2%.", "reasoning": "from the note"}],
    }


def _ingest_script(number: int) -> dict[str, Any]:
    """One graph update adding a note and its edge (as examples/acme-ingest.json)."""
    code = (
        "```python\n"
        f'G.add_node("ingested_{number}", label="Note", title="Board notes {number}", '
        'text="The board named a new chief executive.", '
        f'written="{_fresh_date(number, 20)}")\n'
        f'G.add_edge("ingested_{number}", "{node_id(0)}", relationship="mentions")\n'
        "```"
    )
    return {"update_graph": [code]}


def _scripted(folder: Path, name: str, script: dict[str, Any]) -> str:
    path = folder / name
    path.write_text(json.dumps(script), encoding="utf-8")
    return f"scripted:{path}"


# --------------------------------------------------------------------------- measuring


@dataclass
class _Size:
    """The figures of one engine at one size, before they become :class:`Figure` objects."""

    engine: str
    nodes: int
    edges: int
    build_s: float
    index_s: float
    keys_s: float
    disk_mb_per_10k: float | None
    commands: dict[str, list[Command]]
    cold_search_ms: list[float]
    warm_search_ms: list[float]
    first_search_ms: float
    prepare_ms: list[float]
    first_prepare_ms: float
    upkeep_due: int


def _queries(rng: random.Random, nodes: int, count: int) -> list[str]:
    """What a user would look for: a person's name, a company's name or ticker, a topic."""
    replay = random.Random(SEED)
    names = [_node(replay, i) for i in range(min(nodes, 2_000))]  # the first nodes, rebuilt
    queries: list[str] = []
    while len(queries) < count:
        node = rng.choice(names)
        kind = len(queries) % 4
        if kind == 0 and node.label == "Person":
            queries.append(str(node.properties["name"]))
        elif kind == 1 and node.label == "Company":
            queries.append(str(node.properties["name"]).rsplit(" ", 1)[0])
        elif kind == 2 and node.label == "Company":
            queries.append(str(node.properties["ticker"]))
        elif kind == 3:
            queries.append(rng.choice(_TOPICS))
    return queries


def _changesets(nodes: int, rounds: int) -> list[Changeset]:
    """10 new nodes each (every third a re-spelling of an existing person or company) and an
    edge from each to an existing company."""
    rng = random.Random(SEED + 2)
    replay = random.Random(SEED)
    known = [_node(replay, i) for i in range(min(nodes, 2_000))]
    people = [n for n in known if n.label == "Person"]
    companies = [n for n in known if n.label == "Company"]
    changesets = []
    for number in range(rounds):
        added: list[Node] = []
        for i in range(NEW_NODES):
            ident = f"written_{number}_{i}"
            if i % 3 == 0:
                twin = rng.choice(people)
                added.append(Node(ident, "Person", {"name": str(twin.properties["name"]).upper()}))
            elif i % 3 == 1:
                twin = rng.choice(companies)
                added.append(Node(ident, "Company", dict(twin.properties)))
            else:
                added.append(Node(ident, "Person", {"name": f"New Hire {number}-{i}"}))
        edges = tuple(
            Edge(node.id, rng.choice(companies).id, "works_at")
            for node in added
            if node.label == "Person"
        )
        changesets.append(Changeset(added_nodes=tuple(added), added_edges=edges))
    return changesets


def _in_process(
    store: Store, nodes: int, queries: int, prepares: int, say: Callable[[str], None]
) -> dict[str, Any]:
    """Warm search and write-time resolution through the Python API, in this process."""
    memory = open_memory(store, ENTITY)
    rng = random.Random(SEED + 1)
    asked = _queries(rng, nodes, queries + 1)
    started = time.perf_counter()
    memory.search(asked[0])
    first_search = (time.perf_counter() - started) * 1000
    warm: list[float] = []
    for query in asked[1:]:
        started = time.perf_counter()
        memory.search(query)
        warm.append((time.perf_counter() - started) * 1000)
    writer = open_memory(store, ENTITY)  # a memory of its own: the first prepare builds
    timings: list[float] = []
    for changeset in _changesets(nodes, prepares + 1):
        started = time.perf_counter()
        writer.prepare(changeset, confidence=0.9)
        timings.append((time.perf_counter() - started) * 1000)
    say(
        f"first search {first_search:.0f} ms, warm p50 {statistics.median(warm):.1f} ms, "
        f"first prepare {timings[0]:.0f} ms, then p50 {statistics.median(timings[1:]):.1f} ms"
    )
    return {
        "first_search_ms": first_search,
        "warm_search_ms": warm,
        "first_prepare_ms": timings[0],
        "prepare_ms": timings[1:],
    }


def _measure_size(
    db: str,
    engine: str,
    nodes: int,
    *,
    folder: Path,
    repeats: int,
    sandbox: str,
    disk: Any,
    progress: bool,
) -> _Size:
    def say(what: str) -> None:
        if progress:
            sys.stderr.write(f"scale: {engine} {nodes:,} nodes: {what}\n")

    store = open_store(db)
    try:
        say("building")
        started = time.perf_counter()
        built_nodes, edges = build_entity(store, nodes)
        build_s = time.perf_counter() - started
        # The search index is built once per entity, by its first search (or here); later
        # searches only catch up with what was written since.
        say("building the search index")
        started = time.perf_counter()
        update_search_index(store.session(ENTITY))
        index_s = time.perf_counter() - started
        # So are write-time resolution's keys of each large type (the first write to each
        # would make them).
        say("building the resolution keys")
        started = time.perf_counter()
        update_resolution_keys(store.session(ENTITY))
        keys_s = time.perf_counter() - started
    finally:
        store.close()
    disk_mb = disk()
    per_10k = None if disk_mb is None else disk_mb / built_nodes * 10_000
    run = _Runner(folder, db, sandbox)
    (folder / "call.md").write_text(
        "Q3 call. CFO: gross margin rose to 41.2% on lower freight costs.\n", encoding="utf-8"
    )
    item = folder / "board.md"
    item.write_text("Board notes. The board named a new chief executive.\n", encoding="utf-8")
    commands: dict[str, list[Command]] = {}
    searches: list[float] = []
    due = 0
    queries = _queries(random.Random(SEED + 3), nodes, repeats)

    def note(key: str, command: Command) -> Command:
        # Each command's figures as soon as it ends: at 100k nodes one takes minutes.
        commands.setdefault(key, []).append(command)
        say(f"{key}: {command.wall:.2f} s wall, {command.cpu:.2f} s CPU, {command.rss_mb:.0f} MB")
        return command

    for number in range(repeats):
        say(f"commands, repetition {number + 1} of {repeats}")
        ask_model = _scripted(folder, f"ask{number}.json", _ask_script(number))
        note("ask", run("ask", "--entity", ENTITY, "--model", ask_model, "-a", "call.md",
                        "What did the CFO say about margins?", expect="41.2%"))  # fmt: skip
        ingest_model = _scripted(folder, f"ingest{number}.json", _ingest_script(number))
        note("ingest", run("ingest", "--entity", ENTITY, "--model", ingest_model, str(item),
                           expect="1 node and 1 edge inserted"))  # fmt: skip
        search = note("search", run("memory", "search", "--entity", ENTITY, queries[number]))
        searches.append(search.wall * 1000)
        upkeep = note("upkeep", run("memory", "upkeep", "--entity", ENTITY, "--dry-run", "--json"))
        # What the pass found due (expire, prune, promote, merge): the issue asks for upkeep's
        # cost per due fact, and today it is the graph's size, not this, that sets the cost.
        due = sum(value for value in json.loads(upkeep.stdout).values() if isinstance(value, int))
        note("resolve", run("memory", "resolve", "--entity", ENTITY))
    say("warm search and write-time resolution")
    store = open_store(db)
    try:
        measured = _in_process(
            store, nodes, WARM_QUERIES if repeats > 1 else 20, PREPARES if repeats > 1 else 5, say
        )
    finally:
        store.close()
    return _Size(
        engine=engine,
        nodes=built_nodes,
        edges=edges,
        build_s=build_s,
        index_s=index_s,
        keys_s=keys_s,
        disk_mb_per_10k=per_10k,
        commands=commands,
        cold_search_ms=searches,
        upkeep_due=due,
        **measured,
    )


# --------------------------------------------------------------------------- figures

_COMMANDS = {
    "ask": "kgot ask --entity (1 insert, 1 answer)",
    "ingest": "kgot ingest --entity (one small item)",
    "search": "kgot memory search (a fresh process)",
    "upkeep": "kgot memory upkeep --dry-run",
    "resolve": "kgot memory resolve (dry run)",
}


def _figures(size: _Size, *, targets: bool) -> list[Figure]:
    """The figures of one size; ``targets``: issue 30's targets beside them (PostgreSQL)."""
    label = f"{size.engine} {size.nodes:,} nodes"

    def target(value: float) -> float | None:
        return value if targets else None

    figures = [
        Figure(
            AREA,
            f"{label}: build with {size.edges:,} edges (commits of {BATCH:,})",
            size.build_s,
            "s",
        ),
        Figure(
            AREA,
            f"{label}: search index build (once per entity; later commits are caught up)",
            size.index_s,
            "s",
        ),
        Figure(
            AREA,
            f"{label}: resolution keys build (once per large type; later commits are caught up)",
            size.keys_s,
            "s",
        ),
    ]
    wall_targets = {"ask": QUESTION_TARGET_S, "ingest": ITEM_TARGET_S}
    for key, what in _COMMANDS.items():
        runs = size.commands[key]
        figures += [
            Figure(
                AREA,
                f"{label}: {what}, wall p50",
                statistics.median(c.wall for c in runs),
                "s",
                target(wall_targets[key]) if key in wall_targets else None,
            ),
            Figure(
                AREA,
                f"{label}: {what}, CPU of the process tree p50",
                statistics.median(c.cpu for c in runs),
                "s",
            ),
            Figure(
                AREA,
                f"{label}: {what}, peak RSS (largest process of the tree)",
                max(c.rss_mb for c in runs),
                "MB",
                target(QUESTION_RSS_TARGET_MB) if key == "ask" else None,
            ),
        ]
    figures += [
        Figure(
            AREA, f"{label}: memory search cold p50", statistics.median(size.cold_search_ms), "ms"
        ),
        Figure(
            AREA,
            f"{label}: memory search cold p95",
            p95(size.cold_search_ms),
            "ms",
            target(COLD_SEARCH_TARGET_MS),
        ),
        Figure(
            AREA,
            f"{label}: memory search, first query in a process (API)",
            size.first_search_ms,
            "ms",
        ),
        Figure(
            AREA,
            f"{label}: memory search warm p50 (API)",
            statistics.median(size.warm_search_ms),
            "ms",
        ),
        Figure(
            AREA,
            f"{label}: memory search warm p95 (API)",
            p95(size.warm_search_ms),
            "ms",
            target(WARM_SEARCH_TARGET_MS),
        ),
        Figure(
            AREA,
            f"{label}: write-time resolution per 10-node commit p50 (Memory.prepare)",
            statistics.median(size.prepare_ms),
            "ms",
        ),
        Figure(
            AREA,
            f"{label}: write-time resolution, first commit of a process (builds the snapshot)",
            size.first_prepare_ms,
            "ms",
        ),
    ]
    upkeep_s = statistics.median(c.wall for c in size.commands["upkeep"])
    figures += [
        Figure(AREA, f"{label}: facts upkeep found due (dry run)", size.upkeep_due, "facts"),
        Figure(
            AREA,
            f"{label}: upkeep wall per due fact",
            upkeep_s * 1000 / max(size.upkeep_due, 1),
            "ms",
        ),
    ]
    if size.disk_mb_per_10k is not None:
        figures.append(Figure(AREA, f"{label}: disk per 10k nodes", size.disk_mb_per_10k, "MB"))
    return figures


def _growth(smallest: _Size, size: _Size, *, targets: bool) -> list[Figure]:
    """Each timing at ``size`` over its value at ``smallest`` (issue 30: within 2× of 10k)."""

    def ratio(now: float, then: float) -> float:
        return now / then if then > 0 else float("inf")

    pairs = {
        f"{_COMMANDS[key]} wall": (
            statistics.median(c.wall for c in size.commands[key]),
            statistics.median(c.wall for c in smallest.commands[key]),
        )
        for key in _COMMANDS
    }
    pairs["memory search warm p95"] = (p95(size.warm_search_ms), p95(smallest.warm_search_ms))
    pairs["write-time resolution p50"] = (
        statistics.median(size.prepare_ms),
        statistics.median(smallest.prepare_ms),
    )
    within = targets and smallest.nodes == 10_000
    return [
        Figure(
            AREA,
            f"{size.engine}: {what} at {size.nodes:,} nodes / at {smallest.nodes:,}",
            ratio(now, then),
            "×",
            GROWTH_TARGET if within else None,
        )
        for what, (now, then) in pairs.items()
    ]


# --------------------------------------------------------------------------- engines


def _sqlite(nodes: int, repeats: int, sandbox: str, progress: bool) -> _Size:
    with tempfile.TemporaryDirectory(prefix="kgot-perf-scale-") as temporary:
        folder = Path(temporary)
        path = folder / "kgot.db"

        def disk() -> float:
            files = [path, path.with_name(path.name + "-wal")]
            return sum(f.stat().st_size for f in files if f.exists()) / 2**20

        return _measure_size(
            str(path), "SQLite", nodes, folder=folder, repeats=repeats, sandbox=sandbox,
            disk=disk, progress=progress,
        )  # fmt: skip


def _postgres_reachable(base: str) -> bool:
    import psycopg

    try:
        psycopg.connect(base, connect_timeout=3).close()
    except psycopg.Error as error:
        sys.stderr.write(f"scale: PostgreSQL skipped: {str(error).strip().splitlines()[0]}\n")
        return False
    return True


@contextmanager
def _postgres_schema(base: str) -> Iterator[tuple[str, str]]:
    """A schema of its own for one entity (its URL and name), dropped afterwards."""
    import psycopg

    schema = f"kgot_scale_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in base else "?"
    try:
        yield f"{base}{separator}schema={schema}", schema
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _postgres(base: str, nodes: int, repeats: int, sandbox: str, progress: bool) -> _Size:
    import psycopg

    with (
        tempfile.TemporaryDirectory(prefix="kgot-perf-scale-") as temporary,
        _postgres_schema(base) as (url, schema),
    ):

        def disk() -> float:
            # Tables with their indexes and TOAST: the schema holds this entity only.
            with psycopg.connect(base) as connection:
                row = connection.execute(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relkind = 'r'",
                    (schema,),
                ).fetchone()
            return float(row[0] if row else 0) / 2**20

        return _measure_size(
            url, "PostgreSQL", nodes, folder=Path(temporary), repeats=repeats, sandbox=sandbox,
            disk=disk, progress=progress,
        )  # fmt: skip


def measure(
    sizes: Sequence[int],
    *,
    repeats: int = REPEATS,
    postgres: str | None = None,
    sandbox: str = "auto",
    progress: bool = False,
    report: Callable[[list[Figure]], object] | None = None,
    sqlite: bool = True,
) -> list[Figure]:
    """Every figure of the module docstring for each size, on SQLite and, given ``postgres``
    (a server URL, used when reachable), on PostgreSQL with issue 30's targets; ``report`` is
    called with each size's figures as soon as they are measured (a run at 100k nodes and more
    takes long enough that a stopped one should leave what it measured)."""

    def measured_now(batch: list[Figure]) -> None:
        figures.extend(batch)
        if report is not None:
            report(batch)

    figures: list[Figure] = []
    engines: list[tuple[str, bool]] = [("SQLite", False)] if sqlite else []
    if postgres is not None and _postgres_reachable(postgres):
        engines.append(("PostgreSQL", True))
    for engine, targets in engines:
        measured: list[_Size] = []
        for nodes in sorted(sizes):
            if engine == "SQLite":
                size = _sqlite(nodes, repeats, sandbox, progress)
            else:
                assert postgres is not None
                size = _postgres(postgres, nodes, repeats, sandbox, progress)
            measured.append(size)
            measured_now(_figures(size, targets=targets))
        for size in measured[1:]:
            measured_now(_growth(measured[0], size, targets=targets))
    return figures


def run(quick: bool = False, sandbox: str = "auto") -> list[Figure]:
    """10,000 and 100,000 nodes on SQLite and, when reachable, the default PostgreSQL server
    (``KGOT_BENCH_POSTGRES`` overrides it); ``quick``: 2,000 and 10,000 nodes on SQLite, once."""
    if quick:
        return measure(QUICK_SIZES, repeats=1, sandbox=sandbox)
    postgres = os.environ.get("KGOT_BENCH_POSTGRES", DEFAULT_POSTGRES)
    return measure(SIZES, postgres=postgres, sandbox=sandbox)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgot.benchmarks.perf_scale")
    parser.add_argument("--quick", action="store_true", help="2,000 and 10,000 nodes, SQLite")
    parser.add_argument("--json", action="store_true", help="JSON lines")
    parser.add_argument("--sizes", help="nodes per entity, comma-separated (10000,100000)")
    parser.add_argument("--repeats", type=int, help=f"runs of each command ({REPEATS})")
    parser.add_argument("--postgres", help=f"server URL (default {DEFAULT_POSTGRES})")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--sandbox", default="auto", help="sandbox kind for the commands")
    args = parser.parse_args(argv)
    sizes: Sequence[int] = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = tuple(int(part.replace("_", "")) for part in args.sizes.split(","))
    repeats = args.repeats or (1 if args.quick else REPEATS)
    postgres = None
    if not args.quick and not args.no_postgres:
        postgres = args.postgres or os.environ.get("KGOT_BENCH_POSTGRES", DEFAULT_POSTGRES)
    started, cpu = time.perf_counter(), time.process_time()

    def show(figures: list[Figure]) -> None:
        print_figures(figures, as_json=args.json)
        sys.stdout.flush()

    measure(
        sizes,
        repeats=repeats,
        postgres=postgres,
        sandbox=args.sandbox,
        progress=True,
        report=show,
        sqlite=not args.no_sqlite,
    )
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total_cpu = time.process_time() - cpu + children.ru_utime + children.ru_stime
    sys.stderr.write(
        f"scale: whole run {time.perf_counter() - started:.0f} s wall, {total_cpu:.0f} s CPU "
        "(this process and every command)\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
