"""``kgot graph import --entity`` takes the one write path (issue 29, item 6): the memory's
write-time rules and the import's trust, unless ``--raw``. Real store, real CLI in-process."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from kgot.graph_backends import write_graph
from kgot.graph_model import Changeset, Edge, Node
from kgot.persistence import Provenance, Store
from kgot.tests.memory.conftest import UPKEEP_TYPES
from kgot.tests.support.command_line import run_cli


def _seed(store: Store) -> None:
    store.create_entity("desk", types=UPKEEP_TYPES)
    session = store.session("desk")
    session.load_graph()
    session.commit(
        Changeset(
            added_nodes=(
                Node(
                    "aapl", "Company", {"name": "Apple Inc.", "symbol": "AAPL", "ceo": "Tim Cook"}
                ),
                Node("cupertino", "Place", {"name": "Cupertino"}),
            ),
            added_edges=(Edge("aapl", "cupertino", "headquartered_in"),),
        ),
        Provenance(run_id="seed", step="test", confidence=0.9),
    )


def _file(tmp_path: Path) -> Path:
    """Apple again under another id, with a new CEO, and a company new to the desk."""
    graph = nx.MultiDiGraph()
    graph.add_node("apple_inc", label="Company", name="APPLE INC", symbol="AAPL", ceo="John Ternus")
    graph.add_node("msft", label="Company", name="Microsoft", symbol="MSFT")
    graph.add_node("cupertino", label="Place", name="Cupertino")
    graph.add_edge(
        "apple_inc", "cupertino", key="headquartered_in", relationship="headquartered_in"
    )
    path = tmp_path / "desk.json"
    write_graph(graph, path)
    return path


@pytest.mark.slow
def test_an_import_lands_duplicates_supersedes_and_carries_the_import_trust(
    store: Store, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user config
    _seed(store)
    path = _file(tmp_path)

    code, out, err = run_cli(
        capsys, "graph", "import", "--db", store_url, "--entity", "desk", str(path), "--dry-run"
    )
    assert code == 0, err
    assert out.startswith("dry run: importing") and "note" in out
    assert sorted(store.session("desk").load_graph()) == ["aapl", "cupertino"]

    code, out, err = run_cli(
        capsys, "graph", "import", "--db", store_url, "--entity", "desk", str(path)
    )
    assert code == 0, err
    assert "landed on 'aapl'" in err
    graph = store.session("desk").load_graph(include_meta=True)
    assert sorted(graph) == ["aapl", "cupertino", "msft"]  # apple_inc is aapl
    assert graph.nodes["aapl"]["ceo"] == "John Ternus"  # a functional property superseded
    assert graph.nodes["msft"]["_confidence"] == pytest.approx(0.7)  # [memory.trust] import
    assert graph.nodes["msft"]["_source_kind"] == "extracted"
    closed = [row for row in store.session("desk").node_history("aapl") if row["closed_reason"]]
    assert [row["closed_reason"] for row in closed] == ["contradicted"]


def test_raw_import_writes_the_file_as_it_is(
    store: Store, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    _seed(store)
    code, _out, err = run_cli(
        capsys, "graph", "import", "--db", store_url, "--entity", "desk", str(_file(tmp_path)),
        "--raw",
    )  # fmt: skip
    assert code == 0, err
    assert sorted(store.session("desk").load_graph()) == ["aapl", "apple_inc", "cupertino", "msft"]
