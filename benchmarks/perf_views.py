"""Graph views at scale: prompt tokens, render time and recall of planted facts.

Run: ``python -m kgot.benchmarks.perf_views`` (about 3 minutes). Options: ``--quick`` (1k and
10k nodes only), ``--backend networkx|rdf`` (default both), ``--questions
named,partial,focus`` (default all three), ``--json`` (JSON lines).

For graphs of 1k, 10k and 100k nodes it builds a synthetic world (people, organisations,
cities, countries, papers, events, with hub cities and name-sharing distractors) and plants
24 one- and two-hop questions, each asked three ways: naming its subject in full, naming part
of it (a surname, an event without its topic word), or naming nothing and leaving the name to
a focus text (a search result). It renders a view per question with the default budget of
8,000 tokens and reports, per size and backend:

* the largest view in tokens (target: never above the budget);
* recall — the share of planted fact lines present in the view, per kind of question
  (target ≥ 0.95 at 10k nodes);
* render time p50/p95 once the index is built (target ≤ 200 ms at 100k nodes);
* opening the backend (copy and check), and the view index: for large graphs built in the
  background from the moment of opening (and what a render right after opening waits), for
  small ones on the first render.

Then, at 2,000 nodes, the host-side cost of one graph update (check + apply + the next job's
input + the next view; the sandbox run is not included; the controller's per-iteration budget
is 5 ms); reading the largest world back from node-link JSON; what the SPARQL guard costs; and
query and update round trips through the default sandbox per backend.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import networkx as nx

from kgot.benchmarks.figures import Figure, print_figures
from kgot.config import SandboxSettings
from kgot.graph_backends import (
    BACKGROUND_INDEX_NODES,
    LineFormat,
    NetworkXBackend,
    PropertyGraphBackend,
    RdfBackend,
    ViewRequest,
    check_sparql,
    read_graph,
    write_graph,
)
from kgot.graph_model import Changeset, Edge, Node
from kgot.sandbox import Sandbox, SubprocessSandbox, open_sandbox

BUDGET = 8_000
SIZES_FULL = (1_000, 10_000, 100_000)
SIZES_QUICK = (1_000, 10_000)
QUESTIONS_PER_SIZE = 24
SEED = 20_240_229

_SYLLABLE_TEXT = """ka ri to mi sa len dor vel an is ur ob eth ya ko mar lin tes ra vo
    ne fi hal gor bre sun pel dra cor wyn thal em os ivo ber qua zel"""
_SYLLABLES = _SYLLABLE_TEXT.split()
_WORD_TEXT = """quantum lattice neural graph river stone protein signal market energy ocean
    solar vector matrix theory model network atlas climate genome crystal orbit fusion carbon
    memory language vision robot circuit fluid wave sensor bridge harbour forest desert glacier
    volcano metal polymer enzyme cell virus antibody vaccine drug trial policy"""
_WORDS = _WORD_TEXT.split()
_OCCUPATIONS = ("engineer", "chemist", "painter", "teacher", "surgeon", "pilot", "writer")
_INDUSTRIES = ("software", "shipping", "mining", "textiles", "banking", "aerospace")
_CONTINENTS = ("Europe", "Asia", "Africa", "Oceania", "Americas")


QUESTION_KINDS = ("named", "partial", "focus")
BACKEND_NAMES = ("networkx", "rdf")


@dataclass(frozen=True)
class Question:
    """One planted question as a prompt would ask it: the question, the focus texts (recent
    tool results) and the facts a view must show to answer it."""

    text: str
    facts: list[tuple[str, object]]  # ("n", node id) or ("e", (source, target, key))
    focus: tuple[str, ...] = ()


@dataclass(frozen=True)
class Planted:
    """The facts one question needs, and how each kind of question asks for them.

    * ``named``: the question names the subject in full ("… does Ada Lovelace live?");
    * ``partial``: only part of the name (the surname; an event without its topic word);
    * ``focus``: the question only says "the person in the search result" and the name comes
      through a focus text, as when a tool result just mentioned it.
    """

    facts: list[tuple[str, object]]
    named: str
    partial: str
    vague: str  # the question of the focus kind
    focus_text: str

    def ask(self, kind: str) -> Question:
        if kind == "named":
            return Question(self.named, self.facts)
        if kind == "partial":
            return Question(self.partial, self.facts)
        return Question(self.vague, self.facts, (self.focus_text,))


class World:
    """A synthetic knowledge graph with planted questions."""

    def __init__(self, size: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.graph = nx.MultiDiGraph()
        self.names: set[str] = set()
        self._build(size)

    def _name(self, parts: int) -> str:
        while True:
            words = [
                "".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(2, 4)))
                for _ in range(parts)
            ]
            name = " ".join(w.capitalize() for w in words)
            if name not in self.names:
                self.names.add(name)
                return name

    def _add(self, node_id: str, label: str, **props: object) -> str:
        self.graph.add_node(node_id, label=label, **props)
        return node_id

    def _link(self, source: str, target: str, relationship: str, **props: object) -> None:
        keyed = self.graph.get_edge_data(source, target) or {}
        key, number = relationship, 2
        while key in keyed:
            key, number = f"{relationship}~{number}", number + 1
        self.graph.add_edge(source, target, key=key, relationship=relationship, **props)

    def _build(self, size: int) -> None:
        rng = self.rng
        countries = [
            self._add(
                f"country_{i}", "Country", name=self._name(1), continent=rng.choice(_CONTINENTS)
            )
            for i in range(max(5, size // 200))
        ]
        cities = []
        for i in range(max(10, size // 40)):
            city = self._add(
                f"city_{i}", "City", name=self._name(1), population=rng.randint(10**4, 10**7)
            )
            self._link(city, rng.choice(countries), "LOCATED_IN")
            cities.append(city)
        # A few hub cities take most residents: views must not drown in their edges.
        city_weights = [50 if i < 3 else 1 for i in range(len(cities))]
        orgs = []
        for i in range(max(10, size // 20)):
            org = self._add(
                f"org_{i}",
                "Organization",
                name=self._name(2) + " Ltd",
                founded=rng.randint(1800, 2020),
                industry=rng.choice(_INDUSTRIES),
            )
            self._link(org, rng.choices(cities, city_weights)[0], "HEADQUARTERED_IN")
            orgs.append(org)
        events = []
        for i in range(max(10, size // 25)):
            event = self._add(
                f"event_{i}",
                "Event",
                name=f"{self._name(1)} {rng.choice(_WORDS).title()} Forum",
                date=f"{rng.randint(1990, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            )
            self._link(event, rng.choice(cities), "HELD_IN")
            events.append(event)
        people: list[str] = []
        papers: list[str] = []
        first_names = [self._name(1) for _ in range(max(20, size // 60))]
        while self.graph.number_of_nodes() < size:
            if rng.random() < 0.6:
                first = rng.choice(first_names)
                person = self._add(
                    f"person_{len(people)}",
                    "Person",
                    name=f"{first} {self._name(1)}",
                    born=rng.randint(1920, 2005),
                    occupation=rng.choice(_OCCUPATIONS),
                )
                self._link(person, rng.choice(orgs), "WORKS_AT", since=rng.randint(1990, 2024))
                self._link(person, rng.choices(cities, city_weights)[0], "LIVES_IN")
                if people:
                    self._link(person, rng.choice(people), "KNOWS")
                if rng.random() < 0.3:
                    self._link(person, rng.choice(events), "ATTENDED")
                people.append(person)
            else:
                paper = self._add(
                    f"paper_{len(papers)}",
                    "Paper",
                    title=" ".join(rng.choice(_WORDS) for _ in range(4)).capitalize(),
                    year=rng.randint(1990, 2024),
                )
                if people:
                    self._link(rng.choice(people), paper, "AUTHORED")
                if papers:
                    self._link(paper, rng.choice(papers), "CITES")
                papers.append(paper)
        self.people, self.papers, self.events = people, papers, events

    def questions(self, count: int) -> list[Planted]:
        makers = (
            self._employer_question,
            self._country_question,
            self._papers_question,
            self._event_question,
        )
        return [makers[i % len(makers)]() for i in range(count)]

    def _node(self, node_id: str) -> dict:
        return self.graph.nodes[node_id]

    def _out(self, node_id: str, relationship: str) -> list[tuple[str, str, str]]:
        return [
            (s, t, k)
            for s, t, k, d in self.graph.out_edges(node_id, keys=True, data=True)
            if d["relationship"] == relationship
        ]

    def _person_question(
        self, person: str, facts: list[tuple[str, object]], template: str
    ) -> Planted:
        """A question about ``person``; ``template`` has ``{who}`` where the person goes."""
        attrs = self._node(person)
        name = attrs["name"]
        return Planted(
            facts,
            named=template.format(who=name),
            partial=template.format(who=name.split()[-1]),  # the surname: first names repeat
            vague=template.format(who="the person in the search result"),
            focus_text=(
                f"Search result: {name}, {attrs['occupation']}, born {attrs['born']}. "
                "Profile page with career history and publications."
            ),
        )

    def _employer_question(self) -> Planted:
        person = self.rng.choice(self.people)
        works = self._out(person, "WORKS_AT")[0]
        hq = self._out(works[1], "HEADQUARTERED_IN")[0]
        return self._person_question(
            person,
            [("n", person), ("e", works), ("n", works[1]), ("e", hq), ("n", hq[1])],
            "Which organisation does {who} work for, and in which city is it headquartered?",
        )

    def _country_question(self) -> Planted:
        person = self.rng.choice(self.people)
        lives = self._out(person, "LIVES_IN")[0]
        located = self._out(lives[1], "LOCATED_IN")[0]
        return self._person_question(
            person,
            [("n", person), ("e", lives), ("n", lives[1]), ("e", located), ("n", located[1])],
            "In which country does {who} live?",
        )

    def _papers_question(self) -> Planted:
        while True:
            person = self.rng.choice(self.people)
            authored = self._out(person, "AUTHORED")
            if authored:
                break
        facts: list[tuple[str, object]] = [("n", person)]
        for edge in authored:
            facts += [("e", edge), ("n", edge[1])]
        return self._person_question(
            person, facts, "Which papers did {who} author, and in which years were they published?"
        )

    def _event_question(self) -> Planted:
        while True:
            event = self.rng.choice(self.events)
            attendees = list(self.graph.in_edges(event, keys=True))
            if 0 < len(attendees) <= 6:
                break
        held = self._out(event, "HELD_IN")[0]
        facts: list[tuple[str, object]] = [("n", event), ("e", held), ("n", held[1])]
        facts += [("e", edge) for edge in attendees]
        attrs = self._node(event)
        name = attrs["name"]  # "<Place> <Topic> Forum"
        template = "Who attended {what}, and in which city was it held?"
        return Planted(
            facts,
            named=template.format(what=f"the {name}"),
            partial=template.format(what=f"the {name.split()[0]} forum"),
            vague=template.format(what="the event in the search result"),
            focus_text=f"Search result: the {name} took place on {attrs['date']}.",
        )


def _fact_line(graph: nx.MultiDiGraph, lines: LineFormat, fact: tuple[str, object]) -> str:
    kind, item = fact
    if kind == "n":
        node_id = str(item)
        return lines.node_line(node_id, graph.nodes[node_id])
    source, target, key = cast(tuple[str, str, str], item)
    return lines.edge_line(source, target, key, graph.edges[source, target, key])


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def open_view_backend(name: str, sandbox: Sandbox, graph: nx.MultiDiGraph) -> PropertyGraphBackend:
    """A backend as ``open_backend`` makes it, typed for the benchmark's look at its views."""
    if name == "networkx":
        return NetworkXBackend(sandbox, graph)
    return RdfBackend(sandbox, graph)


def measure_views(
    world: World,
    sandbox: Sandbox,
    *,
    backend_name: str = "networkx",
    kinds: Sequence[str] = QUESTION_KINDS,
) -> list[Figure]:
    """Tokens, recall per kind of question, render times and the view index's cost for one
    world and backend."""
    size = world.graph.number_of_nodes()
    label = f"{size // 1000}k nodes, {backend_name}"
    planted = world.questions(QUESTIONS_PER_SIZE)
    started = time.perf_counter()
    backend = open_view_backend(backend_name, sandbox, world.graph)
    figures = [Figure("views", f"open (copy + check), {label}", _ms_since(started), "ms")]
    view_index = backend._view
    lines = view_index.lines
    first = ViewRequest(planted[0].named, BUDGET)
    if size >= BACKGROUND_INDEX_NODES:
        # The index builds in the background from the moment of opening; a prompt rendered at
        # once waits for what is left of it.
        started = time.perf_counter()
        backend.render(first)
        figures.append(
            Figure("views", f"first render straight after open, {label}", _ms_since(started), "ms")
        )
        backend = open_view_backend(backend_name, sandbox, world.graph)
        view_index = backend._view
        started = time.perf_counter()
        view_index.wait_for_index()
        figures.append(
            Figure(
                "views", f"view index, built in the background, {label}", _ms_since(started), "ms"
            )
        )
    else:  # small graphs are indexed on their first partial render
        started = time.perf_counter()
        backend.render(first)
        figures.append(
            Figure(
                "views", f"first render (builds the view index), {label}", _ms_since(started), "ms"
            )
        )
    times: list[float] = []
    tokens: list[int] = []
    for kind in kinds:
        found = wanted = 0
        for item in planted:
            question = item.ask(kind)
            started = time.perf_counter()
            view = backend.render(ViewRequest(question.text, BUDGET, question.focus))
            times.append(_ms_since(started))
            tokens.append(view.tokens)
            text_lines = set(view.text.splitlines())
            for fact in question.facts:
                wanted += 1
                found += _fact_line(world.graph, lines, fact) in text_lines
        recall_target = 0.95 if size == 10_000 else None
        figures.append(
            Figure(
                "views",
                f"recall of planted facts, {kind} questions, {label}",
                found / wanted,
                "ratio",
                recall_target,
                "min",
            )
        )
    render_target = 200.0 if size == 100_000 else None
    return [
        Figure(
            "views",
            f"max prompt tokens, {label} (budget {BUDGET:,})",
            max(tokens),
            "tokens",
            BUDGET,
            "max",
        ),
        *figures,
        Figure("views", f"render p50, {label}", statistics.median(times), "ms", render_target),
        Figure("views", f"render p95, {label}", _percentile(times, 0.95), "ms", render_target),
    ]


def measure_update_overhead(
    sandbox: Sandbox, backend_name: str = "networkx", rounds: int = 60
) -> list[Figure]:
    """Host cost of one insert iteration at 2,000 nodes, without the sandbox run: check and
    apply a changeset, bring the next job's input up to date, render the next view."""
    world = World(2_000, SEED)
    backend = open_view_backend(backend_name, sandbox, world.graph)
    question = world.questions(1)[0].named
    backend.render(ViewRequest(question, BUDGET))
    backend._serializer.job_files()  # the first job input is built once per opened graph
    people = world.people
    costs = []
    for round_number in range(rounds):
        person = people[round_number % len(people)]
        changeset = Changeset(
            added_nodes=(
                Node(f"new_{round_number}", "Paper", {"title": "Fresh result", "year": 2024}),
            ),
            changed_nodes=(
                Node(person, "Person", {**_props(world.graph, person), "checked": True}),
            ),
            added_edges=(Edge(person, f"new_{round_number}", "AUTHORED"),),
        )
        started = time.perf_counter()
        backend.apply(changeset)
        backend._serializer.job_files()
        backend.render(ViewRequest(question, BUDGET, focus=("Fresh result by " + person,)))
        costs.append(_ms_since(started))
    return [
        Figure(
            "views",
            f"host cost per graph update + render, 2k nodes, {backend_name} (p50)",
            statistics.median(costs),
            "ms",
            5.0,
        ),
    ]


def measure_file_read(world: World) -> list[Figure]:
    """Reading the world back from node-link JSON: parse, build once, check in place."""
    size = world.graph.number_of_nodes()
    with tempfile.TemporaryDirectory(prefix="kgot-perf-views-") as scratch:
        path = Path(scratch) / "world.json"
        write_graph(world.graph, path)
        megabytes = path.stat().st_size / 1e6
        started = time.perf_counter()
        read_graph(path)
        elapsed = _ms_since(started)
    return [
        Figure(
            "views",
            f"read node-link JSON, {size // 1000}k nodes ({megabytes:.0f} MB)",
            elapsed,
            "ms",
        )
    ]


def measure_guard(rounds: int = 20) -> list[Figure]:
    """What the SPARQL guard costs a job on top of Oxigraph, for a text without and a text
    with a keyword of a forbidden construct (only those are parsed, with rdflib)."""
    plain = (
        "SELECT ?person ?name WHERE { ?person a type:Person ; prop:name ?name ; "
        "rel:LIVES_IN ?city . ?city prop:name ?place FILTER(CONTAINS(?place, 'Wyn')) } "
        "ORDER BY ?name LIMIT 20"
    )
    keyword = plain.replace("prop:name ?name", "prop:from ?name")
    probe = (
        "import time; started = time.perf_counter(); "
        "from rdflib.plugins.sparql import parser; "
        "print((time.perf_counter() - started) * 1000)"
    )
    imports = [
        float(subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True).stdout)
        for _ in range(3)
    ]
    figures = [
        Figure(
            "views",
            "SPARQL guard: importing rdflib's parser (once per job that parses)",
            statistics.median(imports),
            "ms",
        )
    ]
    for name, text in (("no keyword, not parsed", plain), ("with a keyword, parsed", keyword)):
        check_sparql(text, "query")  # warm
        costs = []
        for _ in range(rounds):
            started = time.perf_counter()
            assert check_sparql(text, "query").finding is None
            costs.append(_ms_since(started))
        figures.append(
            Figure(
                "views",
                f"SPARQL guard: {len(text)}-character query, {name}",
                statistics.median(costs),
                "ms",
            )
        )
    return figures


def measure_jobs(backends: Sequence[str], rounds: int = 8, sandbox: str = "auto") -> list[Figure]:
    """Read and write round trips through the ``sandbox`` kind at 2,000 nodes (wall clock,
    warm pool): what one query or graph update costs a run, model time excluded."""
    from kgot.errors import SandboxUnavailableError
    from kgot.graph_backends import open_backend

    try:
        box = open_sandbox(SandboxSettings(kind=sandbox))  # type: ignore[arg-type]
    except SandboxUnavailableError:
        return []  # no isolating sandbox here: nothing representative to measure
    world = World(2_000, SEED)
    jobs = {
        "networkx": {
            "query": "result = G.number_of_nodes()",
            "update": "G.add_node('extra_{i}', label='Note')",
        },
        "rdf": {
            "query": "SELECT (COUNT(*) AS ?n) WHERE { ?s a ?t }",
            # A keyword of a forbidden construct (here a property name) makes the guard parse.
            "query parsed by the guard": "SELECT (COUNT(*) AS ?n) WHERE { ?s prop:from ?t }",
            "update": "INSERT DATA {{ node:extra_{i} a type:Note }}",
        },
    }
    figures = []
    try:
        for name in backends:
            backend = open_backend(name, box, world.graph)
            texts = jobs[name]
            backend.query(texts["query"])  # warm the pool and the job input
            timings: dict[str, list[float]] = {kind: [] for kind in texts}
            for i in range(rounds):
                for kind, text in texts.items():
                    started = time.perf_counter()
                    if kind == "update":
                        changeset = backend.propose(text.format(i=i))
                        timings[kind].append(_ms_since(started))
                        backend.apply(changeset)
                    else:
                        backend.query(text)
                        timings[kind].append(_ms_since(started))
            figures += [
                Figure(
                    "views",
                    f"{name} {kind} round trip, 2k nodes (p50)",
                    statistics.median(values),
                    "ms",
                )
                for kind, values in timings.items()
            ]
    finally:
        box.close()
    return figures


def _props(graph: nx.MultiDiGraph, node_id: str) -> dict:
    return {k: v for k, v in graph.nodes[node_id].items() if k != "label"}


def run(
    quick: bool = False,
    *,
    backends: Sequence[str] = BACKEND_NAMES,
    kinds: Sequence[str] = QUESTION_KINDS,
    sandbox: str = "auto",
) -> list[Figure]:
    """Measure views on 1k/10k (quick) or 1k/10k/100k-node graphs, for ``backends`` and the
    ``kinds`` of questions, then update costs, file reading, the guard and jobs in the
    ``sandbox`` kind."""
    render_sandbox = job_free_sandbox()
    figures: list[Figure] = []
    try:
        _warm_up(render_sandbox)
        for size in SIZES_QUICK if quick else SIZES_FULL:
            world = World(size, SEED + size)
            for name in backends:
                figures += measure_views(world, render_sandbox, backend_name=name, kinds=kinds)
            if size == max(SIZES_QUICK if quick else SIZES_FULL):
                figures += measure_file_read(world)
        for name in backends:
            figures += measure_update_overhead(render_sandbox, name)
    finally:
        render_sandbox.close()
    if "rdf" in backends:
        figures += measure_guard()
    figures += measure_jobs(backends, rounds=4 if quick else 12, sandbox=sandbox)
    return figures


def job_free_sandbox() -> Sandbox:
    """The sandbox the view backends are opened with here: renders and host-side updates run
    no job, so the plain subprocess kind stands in. It is built directly, not through
    open_sandbox(), which would warn that it isolates nothing and advise installing
    bubblewrap: no code runs in it, and the jobs measured use the ``sandbox`` kind asked for."""
    return SubprocessSandbox(SandboxSettings(kind="subprocess"))


def _warm_up(sandbox: Sandbox) -> None:
    """Pay the once-per-process costs (the tokenizer, the line formats) before measuring."""
    world = World(200, SEED)
    for name in BACKEND_NAMES:
        open_view_backend(name, sandbox, world.graph).render(ViewRequest("warm-up", 500))


def _choices(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        chosen = [part.strip() for part in text.split(",") if part.strip()]
        unknown = [part for part in chosen if part not in allowed]
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(
                f"choose from {', '.join(allowed)} (comma-separated), not {text!r}"
            )
        return chosen

    return parse


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m kgot.benchmarks.perf_views", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="1k and 10k nodes only")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    parser.add_argument(
        "--backend",
        type=_choices(BACKEND_NAMES),
        default=list(BACKEND_NAMES),
        metavar="NAMES",
        help="networkx, rdf or both, comma-separated (default: both)",
    )
    parser.add_argument(
        "--questions",
        type=_choices(QUESTION_KINDS),
        default=list(QUESTION_KINDS),
        metavar="KINDS",
        help="named, partial and/or focus, comma-separated (default: all three)",
    )
    options = parser.parse_args(argv)
    figures = run(quick=options.quick, backends=options.backend, kinds=options.questions)
    print_figures(figures, as_json=options.json)


if __name__ == "__main__":
    main()
