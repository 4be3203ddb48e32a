"""Import caps on graph files are checked while the file is parsed, not once it is in memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import networkx as nx
import pytest

from kgot.errors import GraphFileError
from kgot.graph_backends import read_graph, write_graph

NODES = 60_000  # far over the cap below, and megabytes once built into a graph


def _chain(count: int) -> nx.MultiDiGraph:
    graph = nx.MultiDiGraph()
    graph.add_nodes_from((f"n{i}", {"label": "Thing", "name": f"thing {i}"}) for i in range(count))
    graph.add_edges_from(
        (f"n{i}", f"n{i + 1}", "NEXT", {"relationship": "NEXT"}) for i in range(count - 1)
    )
    return graph


def _peak_while_refused(path: Path, **caps: int) -> tuple[str, int]:
    """The refusal of reading ``path`` with ``caps``, and the most memory the read held."""
    tracemalloc.start()
    try:
        with pytest.raises(GraphFileError) as caught:
            read_graph(path, **caps)
        return str(caught.value), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
@pytest.mark.parametrize("suffix", ["graphml", "nt", "ttl"])
def test_a_file_over_the_node_cap_is_refused_before_its_graph_is_held(
    tmp_path: Path, suffix: str
) -> None:
    # Before, the whole graph was read (GraphML by NetworkX, RDF gathered by subject) and only
    # then counted: a hostile file held gigabytes before it was refused (here 100-200 MB).
    path = tmp_path / f"many.{suffix}"
    write_graph(_chain(NODES), path)
    message, peak = _peak_while_refused(path, max_nodes=1_000, max_edges=1_000)
    assert message == (
        f"{path}: {NODES:,} nodes, more than the 1,000 one import may hold (split the file, "
        "or raise the setting store.max_import_nodes)"
    )
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB held to refuse the file"


@pytest.mark.slow
@pytest.mark.parametrize("suffix", ["graphml", "nt", "ttl"])
def test_a_file_over_the_edge_cap_is_refused_while_it_is_parsed(
    tmp_path: Path, suffix: str
) -> None:
    graph = nx.MultiDiGraph()
    graph.add_nodes_from((f"n{i}", {"label": "Thing"}) for i in range(250))
    graph.add_edges_from(
        (f"n{i}", f"n{j}", "LINKS", {"relationship": "LINKS"})
        for i in range(250)
        for j in range(250)
        if i != j
    )
    path = tmp_path / f"dense.{suffix}"
    write_graph(graph, path)
    message, peak = _peak_while_refused(path, max_nodes=1_000, max_edges=500)
    assert message == (
        f"{path}: {250 * 249:,} edges, more than the 500 one import may hold (split the file, "
        "or raise the setting store.max_import_edges)"
    )
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB held to refuse the file"


def test_a_graphml_file_over_a_cap_never_reaches_networkx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "many.graphml"
    write_graph(_chain(50), path)

    def whole_graph(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("NetworkX built the graph before it was counted")

    monkeypatch.setattr(nx, "read_graphml", whole_graph)
    with pytest.raises(GraphFileError, match=r": 50 nodes, more than the 49 one import"):
        read_graph(path, max_nodes=49)


@pytest.mark.parametrize("suffix", ["graphml", "nt", "ttl"])
def test_a_file_at_the_caps_is_read(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"fits.{suffix}"
    graph = _chain(300)
    # Parallel edges are described in RDF: one rel: triple, one description per edge.
    graph.add_edge("n0", "n1", "FIRST", relationship="NEXT", order=1)
    graph.add_edge("n0", "n2", "SKIPS", relationship="SKIPS")
    write_graph(graph, path)
    read = read_graph(path, max_nodes=300, max_edges=301)
    assert (read.number_of_nodes(), read.number_of_edges()) == (300, 301)
    with pytest.raises(GraphFileError, match=r": 301 edges, more than the 300 one import"):
        read_graph(path, max_nodes=300, max_edges=300)
