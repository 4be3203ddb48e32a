"""Graph views: relevance, the token budget, what is left out, and following changes."""

from __future__ import annotations

import networkx as nx
import pyoxigraph as ox
import pytest

from kgot.graph_backends import ViewRequest
from kgot.graph_backends.jobs.rdf_model import PREFIXES
from kgot.graph_backends.networkx_backend import NetworkXBackend
from kgot.graph_backends.rdf_backend import RdfBackend
from kgot.graph_backends.view_lines import PythonLines, TurtleLines
from kgot.graph_backends.views import newline_additive, terms
from kgot.graph_model import Changeset, Edge, Node
from kgot.graph_model.token_estimate import count_tokens


def hub_world(people: int = 3_000) -> nx.MultiDiGraph:
    """Many people in one hub city; one person with a two-hop fact chain."""
    graph = nx.MultiDiGraph()
    graph.add_node("metropolis", label="City", name="Metropolis")
    graph.add_node("ruritania", label="Country", name="Ruritania")
    graph.add_edge("metropolis", "ruritania", key="LOCATED_IN", relationship="LOCATED_IN")
    for i in range(people):
        graph.add_node(f"p{i}", label="Person", name=f"Citizen {i}")
        graph.add_edge(f"p{i}", "metropolis", key="LIVES_IN", relationship="LIVES_IN")
    graph.add_node("ada", label="Person", name="Ada Lovelace")
    graph.add_node("analytical", label="Organization", name="Analytical Engines Ltd")
    graph.add_node("london", label="City", name="London")
    graph.add_edge("ada", "analytical", key="WORKS_AT", relationship="WORKS_AT")
    graph.add_edge("analytical", "london", key="HEADQUARTERED_IN", relationship="HEADQUARTERED_IN")
    graph.add_edge("ada", "metropolis", key="LIVES_IN", relationship="LIVES_IN")
    return graph


@pytest.fixture
def hub_backend(sandbox) -> NetworkXBackend:
    return NetworkXBackend(sandbox, hub_world())


def test_terms_normalise_case_accents_plurals_and_stop_words():
    assert terms("Which Papers did Zoë write in 1843?") == ["paper", "zoe", "write", "1843"]
    assert terms("the of and") == []


def test_seed_and_its_neighbourhood_come_first_even_next_to_a_hub(hub_backend):
    view = hub_backend.render(
        ViewRequest("Where is the employer of Ada Lovelace headquartered?", 400)
    )
    assert view.tokens <= 400
    lines = PythonLines()
    graph = hub_backend.to_networkx()
    for expected in (
        lines.node_line("ada", graph.nodes["ada"]),
        lines.edge_line(
            "ada", "analytical", "WORKS_AT", graph.edges["ada", "analytical", "WORKS_AT"]
        ),
        lines.node_line("analytical", graph.nodes["analytical"]),
        lines.edge_line(
            "analytical",
            "london",
            "HEADQUARTERED_IN",
            graph.edges["analytical", "london", "HEADQUARTERED_IN"],
        ),
    ):
        assert expected in view.text.splitlines()
    # The hub's thousands of residents are counted, not listed.
    assert view.omitted_nodes_by_label["Person"] > 2_900
    assert view.omitted_edges_by_relationship["LIVES_IN"] > 2_900


@pytest.mark.slow
def test_focus_texts_pull_in_what_a_tool_result_mentions(hub_backend):
    question = "Where is the employer of Ada Lovelace headquartered?"
    focus = "Search result: Citizen 1234 met Citizen 77 in Metropolis."
    view = hub_backend.render(ViewRequest(question, 600, focus=(focus,)))
    assert '"p1234" Person name="Citizen 1234"' in view.text
    assert '"p77" Person name="Citizen 77"' in view.text
    assert '"ada" Person name="Ada Lovelace"' in view.text  # the question still counts


@pytest.mark.slow
@pytest.mark.parametrize("budget", [1, 5, 20, 60, 200, 1_000, 5_000, 50_000])
def test_never_above_the_budget(hub_backend, budget):
    view = hub_backend.render(ViewRequest("Ada Lovelace Metropolis Citizen 5", budget))
    assert view.tokens <= budget
    assert count_tokens(view.text) == view.tokens
    assert view.nodes_shown + sum(view.omitted_nodes_by_label.values()) == view.nodes_total
    assert view.edges_shown + sum(view.omitted_edges_by_relationship.values()) == view.edges_total


def test_without_any_match_the_most_recent_changes_are_shown(hub_backend):
    hub_backend.apply(Changeset(added_nodes=(Node("fresh", "Note", {"text": "just added"}),)))
    view = hub_backend.render(ViewRequest("zzz qqq", 300))
    assert '"fresh" Note text="just added"' in view.text
    assert view.tokens <= 300


def test_views_follow_changes(hub_backend):
    question = "What does Grace Hopper invent?"
    before = hub_backend.render(ViewRequest(question, 500))
    assert "Grace Hopper" not in before.text
    hub_backend.apply(
        Changeset(
            added_nodes=(
                Node("grace", "Person", {"name": "Grace Hopper"}),
                Node("cobol", "Language", {"name": "COBOL"}),
            ),
            added_edges=(Edge("grace", "cobol", "INVENTED"),),
        )
    )
    after = hub_backend.render(ViewRequest(question, 500))
    assert '"grace" Person name="Grace Hopper"' in after.text
    assert '"grace" -INVENTED-> "cobol"' in after.text
    hub_backend.apply(
        Changeset(changed_nodes=(Node("grace", "Person", {"name": "Rear Admiral Grace Hopper"}),))
    )
    changed = hub_backend.render(ViewRequest(question, 500))
    assert 'name="Rear Admiral Grace Hopper"' in changed.text
    hub_backend.apply(
        Changeset(removed_nodes=("grace",), removed_edges=(("grace", "cobol", "INVENTED"),))
    )
    gone = hub_backend.render(ViewRequest(question, 500))
    assert "Grace Hopper" not in gone.text
    assert gone.nodes_total == before.nodes_total + 1


def test_long_values_are_cut_in_views_only(sandbox):
    graph = nx.MultiDiGraph()
    graph.add_node("doc", label="Document", text="x" * 5_000, tags=list(range(40)))
    backend = NetworkXBackend(sandbox, graph)
    view = backend.render(ViewRequest("doc", 2_000))
    assert "…(+4800 chars)" in view.text
    assert "…(+30 more)" in view.text
    assert backend.to_networkx().nodes["doc"]["text"] == "x" * 5_000


def test_complete_views_say_so(sandbox):
    graph = nx.MultiDiGraph()
    graph.add_node("a", label="Thing")
    view = NetworkXBackend(sandbox, graph).render(ViewRequest("anything", 100))
    assert view.complete and view.text.startswith("Graph: 1 node, 0 edges (all shown).")
    empty = NetworkXBackend(sandbox).render(ViewRequest("anything", 100))
    assert empty.text == "The graph is empty." and empty.nodes_total == 0


def test_turtle_views_are_valid_turtle(sandbox):
    graph = nx.MultiDiGraph()
    graph.add_node("ada lovelace", label="Person", name='Ada "the" Countess', born="1815-12-10")
    graph.add_node("note.g", label="Document", pages=65, ratio=0.5, draft=False, tags=["a"])
    graph.add_edge("ada lovelace", "note.g", key="WROTE", relationship="WROTE", year=1843)
    graph.add_edge("ada lovelace", "note.g", key="second", relationship="WROTE")
    view = RdfBackend(sandbox, graph).render(ViewRequest("Ada", 2_000))
    body = [line for line in view.text.splitlines() if line.startswith(("node:", "edge:"))]
    assert len(body) == 4
    prologue = "".join(f"@prefix {p}: <{iri}> .\n" for p, iri in PREFIXES.items())
    triples = list(ox.parse(prologue + "\n".join(body), format=ox.RdfFormat.TURTLE))
    assert len(triples) > 8


def test_line_formats_quote_ids_so_they_can_be_copied():
    python = PythonLines().node_line('say "hi"', {"label": "Quote"})
    assert python.startswith('"say \\"hi\\"" Quote')
    turtle = TurtleLines().node_line("say hi", {"label": "Quote"})
    assert turtle.startswith("node:say%20hi a type:Quote")


def test_the_offline_tokenizer_adds_up_across_lines():
    assert newline_additive()


def test_repeated_requests_reuse_the_view_until_the_graph_changes(hub_backend):
    request = ViewRequest("Ada Lovelace", 300)
    first = hub_backend.render(request)
    assert hub_backend.render(request) is first
    hub_backend.apply(Changeset(added_nodes=(Node("x", "Thing", {}),)))
    assert hub_backend.render(request) is not first


@pytest.mark.slow
@pytest.mark.parametrize("backend_name", ["networkx", "rdf"])
def test_planted_facts_are_found_in_a_thousand_node_world(sandbox, backend_name):
    """The benchmark's world at 1k nodes, its questions asked with the full name, part of it,
    or only a focus text naming the subject: a regression guard on view quality, not speed."""
    from kgot.benchmarks.perf_views import BUDGET, QUESTION_KINDS, SEED, World, measure_views

    world = World(1_000, SEED + 1_000)
    figures = {f.name: f for f in measure_views(world, sandbox, backend_name=backend_name)}
    label = f"1k nodes, {backend_name}"
    for kind in QUESTION_KINDS:
        assert figures[f"recall of planted facts, {kind} questions, {label}"].value >= 0.95
    assert figures[f"max prompt tokens, {label} (budget {BUDGET:,})"].value <= BUDGET


def test_odd_property_names_are_quoted_so_they_cannot_forge_lines():
    line = PythonLines().node_line(
        "a", {"label": "X", "first name": "A", 'x\n"b" -KNOWS-> "c" y': 1, "plain_name": 2}
    )
    assert "\n" not in line
    assert line == '"a" X "first name"="A" "x\\n\\"b\\" -KNOWS-> \\"c\\" y"=1 plain_name=2'


def test_large_graphs_are_indexed_in_the_background_while_changes_arrive(sandbox):
    graph = hub_world(people=6_000)  # above the background threshold
    backend = NetworkXBackend(sandbox, graph)
    # Changes while the index may still be building: they index what they touch themselves.
    backend.apply(
        Changeset(
            added_nodes=(Node("zed", "Person", {"name": "Zebediah Quux"}),),
            changed_nodes=(Node("p5", "Person", {"name": "Renamed Wobbegong"}),),
            removed_nodes=("p7",),
            removed_edges=(("p7", "metropolis", "LIVES_IN"),),
        )
    )
    assert backend._view.wait_for_index(timeout=60)
    assert backend._view._indexed  # built by then, though nothing was rendered yet
    assert "Zebediah Quux" in backend.render(ViewRequest("Who is Zebediah Quux?", 500)).text
    assert "Wobbegong" in backend.render(ViewRequest("Who is Wobbegong?", 500)).text
    postings = backend._view._postings
    assert "p7" not in set().union(*postings.values())
    assert "p5" not in postings.get("citizen", set()) and "p5" in postings["wobbegong"]
    assert set(backend._view._terms) == set(backend.to_networkx())  # each node, once


@pytest.mark.slow
def test_loading_another_graph_abandons_a_running_index_build(sandbox):
    backend = NetworkXBackend(sandbox, hub_world(people=6_000))
    backend.load(hub_world(people=10))
    assert backend._view.wait_for_index(timeout=60)
    view = backend.render(ViewRequest("Citizen 3", 8_000))
    assert view.complete and "Citizen 9" in view.text and "Citizen 11" not in view.text


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_the_recent_tail_kept_across_changes_matches_one_built_afresh(seed):
    """Views reuse the recent nodes' lines from one graph version to the next; after any mix
    of changes they must equal views whose recent part is rebuilt from scratch."""
    import random

    from kgot.graph_backends.graph_state import GraphState
    from kgot.graph_backends.views import ViewIndex, _RecentTail

    rng = random.Random(seed)
    kept, fresh = ViewIndex(PythonLines()), ViewIndex(PythonLines())
    states = [GraphState([kept]), GraphState([fresh])]
    start = nx.MultiDiGraph()
    for i in range(300):
        start.add_node(f"n{i}", label="Thing", name=f"thing {i}")
    for i in range(300):
        target = f"n{rng.randrange(300)}"
        start.add_edge(f"n{i}", target, key="LINKS", relationship="LINKS")
    for state in states:
        state.load(start)
    requests = [ViewRequest("zzz", 400), ViewRequest("thing 7", 900), ViewRequest("qqq", 2_500)]
    for step in range(40):
        graph = states[0].graph
        ids = list(graph.nodes)
        edges = list(graph.edges(keys=True))
        kind = rng.choice(["add", "link", "change", "unlink", "relink", "remove"])
        fresh_id = f"new{step}"
        if kind == "add":
            change = Changeset(added_nodes=(Node(fresh_id, "Note", {"text": f"note {step}"}),))
        elif kind == "link":
            source, target = rng.sample(ids, 2)
            change = Changeset(added_edges=(Edge(source, target, "MENTIONS", f"m{step}"),))
        elif kind == "change":
            node_id = rng.choice(ids)
            change = Changeset(changed_nodes=(Node(node_id, "Thing", {"name": f"renamed {step}"}),))
        elif kind == "unlink" and edges:
            change = Changeset(removed_edges=(rng.choice(edges),))
        elif kind == "relink" and edges:
            source, target, key = rng.choice(edges)
            relationship = graph.edges[source, target, key]["relationship"]
            change = Changeset(
                changed_edges=(Edge(source, target, relationship, key, {"weight": step}),)
            )
        else:
            node_id = rng.choice(ids)
            incident = [*graph.out_edges(node_id, keys=True), *graph.in_edges(node_id, keys=True)]
            change = Changeset(removed_nodes=(node_id,), removed_edges=tuple(incident))
        for state in states:
            state.apply(change)
        for request in rng.sample(requests, 2):
            fresh._tail = _RecentTail()  # rebuilt from the recency order alone
            fresh._rendered.clear()
            expected = fresh.render(states[1].graph, request, states[1].stats())
            got = kept.render(states[0].graph, request, states[0].stats())
            assert got.text == expected.text, (step, kind, request)
