"""`python -m kgot.benchmarks.perf_scale` at its smallest: a 300-node entity on SQLite, each
command once, every figure present with a sane value (timings are not compared with anything)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kgot.benchmarks import perf_scale
from kgot.benchmarks.figures import format_figures
from kgot.graph_model import Changeset
from kgot.persistence import open_store


def test_the_entity_has_every_type_and_about_two_edges_a_node(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "kgot.db"))
    try:
        nodes, edges = perf_scale.build_entity(store, 120)
        graph = store.session(perf_scale.ENTITY).load_graph()
    finally:
        store.close()
    assert (nodes, graph.number_of_nodes(), graph.number_of_edges()) == (120, 120, edges)
    assert 1.8 * nodes <= edges <= 2 * nodes
    labels = {data["label"] for _, data in graph.nodes(data=True)}
    assert labels == {"Company", "Person", "Article", "Note"}
    relationships = {data["relationship"] for _, _, data in graph.edges(data=True)}
    assert relationships == {"works_at", "mentions", "related_to"}


def test_the_write_time_changesets_have_ten_nodes_and_land_on_existing_companies() -> None:
    changesets = perf_scale._changesets(500, 3)
    companies = {perf_scale.node_id(i) for i in range(0, 500, 10)}
    assert [len(c.added_nodes) for c in changesets] == [10, 10, 10]
    assert all(isinstance(c, Changeset) for c in changesets)
    assert {e.target for c in changesets for e in c.added_edges} <= companies
    assert perf_scale._queries(random.Random(1), 500, 8)  # queries come from real names


@pytest.mark.slow
def test_every_figure_at_300_nodes() -> None:
    figures = perf_scale.measure([300], repeats=1)
    values = {figure.name.removeprefix("SQLite 300 nodes: "): figure for figure in figures}
    assert all(figure.area == "scale" and figure.target is None for figure in figures)
    for command in perf_scale._COMMANDS.values():
        assert values[f"{command}, wall p50"].value > 0
        assert values[f"{command}, CPU of the process tree p50"].value > 0
        assert values[f"{command}, peak RSS (largest process of the tree)"].value > 20  # MB
    ask = values["kgot ask --entity (1 insert, 1 answer), wall p50"]
    ingest = values["kgot ingest --entity (one small item), wall p50"]
    assert ask.unit == ingest.unit == "s"
    for name in (
        "memory search cold p50",
        "memory search cold p95",
        "memory search warm p50 (API)",
        "memory search warm p95 (API)",
        "write-time resolution per 10-node commit p50 (Memory.prepare)",
        "disk per 10k nodes",
    ):
        assert values[name].value > 0, name
    assert values["facts upkeep found due (dry run)"].value >= 0
    assert any(name.startswith("build with ") for name in values)
    assert format_figures(figures)[0] == "scale"
