"""`kgot entities`, `kgot types` and `kgot graph export|import|stats --entity`."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from kgot.cli.main import main
from kgot.graph_backends import read_graph, write_graph
from kgot.persistence import open_store

SECURITY_TYPES = """
node_types:
  - name: Security
    description: A tradable financial asset.
    properties:
      type: object
      required: [ticker]
      properties:
        ticker: {type: string, pattern: "^[A-Z.]{1,6}$"}
        as_of: {type: string, format: date-time}
    example: {ticker: AAPL, as_of: "2024-01-02T21:00:00Z"}
edge_types:
  - name: holds
    description: A fund holds a position in a security.
    source: Organization
    target: Security
    properties: {type: object, properties: {shares: {type: integer, minimum: 0}}}
"""


@pytest.fixture
def kgot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, store_url: str, capsys):
    """Run the CLI against a fresh store; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user config
    monkeypatch.setenv("KGOT_DB", store_url)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.slow
def test_entities_lifecycle(kgot) -> None:
    assert kgot("entities", "create", "acme-fund", "-d", "An investment fund")[0] == 0
    code, out, err = kgot("entities", "create", "acme-fund")
    assert code == 2 and err == (
        "kgot: error: entity 'acme-fund' already exists (pick another name, or delete it "
        "first with `kgot entities delete acme-fund`)\n"
    )
    code, out, _ = kgot("entities", "list", "--json")
    (entity,) = json.loads(out)
    assert (entity["name"], entity["description"], entity["nodes"]) == (
        "acme-fund",
        "An investment fund",
        0,
    )
    code, out, _ = kgot("entities", "show", "acme-fund", "--json")
    assert json.loads(out)["stats"]["nodes"] == 0
    code, _, err = kgot("entities", "delete", "acme-fund")  # stdin is not a terminal in tests
    assert code == 2 and "cannot be undone; pass --yes to confirm" in err
    assert kgot("entities", "delete", "acme-fund", "--yes")[0] == 0
    code, out, _ = kgot("entities", "list")
    assert "no entities yet" in out
    code, _, err = kgot("entities", "show", "ghost")
    assert code == 2  # bad input
    assert err.endswith("create it with `kgot entities create ghost`\n") and err.count("\n") == 1
    code, _, err = kgot("entities", "create", "two  spaces")
    assert code == 2 and "invalid entity name" in err


@pytest.mark.slow
def test_types_commands(kgot, tmp_path: Path) -> None:
    kgot("entities", "create", "fund")
    types_file = tmp_path / "types.yaml"
    types_file.write_text(SECURITY_TYPES, encoding="utf-8")
    code, out, err = kgot("types", "add", str(types_file), "--entity", "fund")
    assert code == 0, err
    assert out.splitlines() == [
        "added node type 'Security' of entity 'fund' v1",
        "added edge type 'holds' of entity 'fund' v1",
    ]
    code, out, _ = kgot("types", "list", "--entity", "fund", "--json")
    listed = json.loads(out)
    assert "Security" in {t["name"] for t in listed["node_types"]}
    code, out, _ = kgot("types", "list", "--json")  # global scope: not there
    assert "Security" not in {t["name"] for t in json.loads(out)["node_types"]}
    code, out, _ = kgot("types", "show", "Security", "-e", "fund", "--json")
    assert json.loads(out)["properties"]["required"] == ["ticker"]

    updated = tmp_path / "update.json"
    updated.write_text(
        json.dumps({"kind": "node", "name": "Security", "description": "Any tradable asset."}),
        encoding="utf-8",
    )
    assert kgot("types", "update", str(updated), "-e", "fund")[1] == (
        "updated node type 'Security' of entity 'fund' v2\n"
    )
    code, out, _ = kgot("types", "show", "Security", "-e", "fund", "--history")
    versions = json.loads(out)
    assert [(v["version"], v["retired_reason"]) for v in versions] == [(1, "updated"), (2, None)]
    code, out, err = kgot("types", "remove", "holds", "-e", "fund")
    assert code == 0 and out == "removed type 'holds' of entity 'fund' (version 1 retired)\n"
    code, _, err = kgot("types", "show", "holds", "-e", "fund")
    assert code == 2 and "no type 'holds' in entity 'fund'" in err


@pytest.mark.slow
def test_bad_type_files_are_one_line_errors_and_store_nothing(kgot, tmp_path: Path) -> None:
    kgot("entities", "create", "fund")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        SECURITY_TYPES.replace("type: string, pattern", "type: strin, pattern"), encoding="utf-8"
    )
    code, _, err = kgot("types", "add", str(bad), "-e", "fund")
    assert code == 2
    assert err.startswith(
        "kgot: error: type 'Security' rejected: properties schema at $.properties.ticker.type"
    )
    assert err.count("\n") == 1
    code, out, _ = kgot("types", "list", "-e", "fund", "--json")
    assert "holds" not in {t["name"] for t in json.loads(out)["edge_types"]}  # all or nothing
    # An entity created with a bad types file is not left behind.
    code, _, err = kgot("entities", "create", "other", "--types", str(bad))
    assert code == 2
    assert json.loads(kgot("entities", "list", "--json")[1])[0]["name"] == "fund"
    code, _, err = kgot("types", "add", str(tmp_path / "missing.yaml"))
    assert code == 2 and "does not exist" in err


ASSET_TYPES = """
node_types:
  - name: Asset
    description: A listed security an aide watches.
    identity: [symbol]
    functional: [price]
    half_life_days: 21
    ttl_days: 90
    rank_weight: 0.8
    properties:
      type: object
      required: [symbol]
      properties:
        symbol: {type: string}
        price: {type: number}
edge_types:
  - name: listed_on
    description: The asset's primary listing.
    functional: true
    half_life_days: 730
    source: Asset
    properties: {type: object}
"""


@pytest.mark.slow
def test_types_show_gives_the_upkeep_settings(kgot, tmp_path: Path) -> None:
    kgot("entities", "create", "aide")
    types_file = tmp_path / "assets.yaml"
    types_file.write_text(ASSET_TYPES, encoding="utf-8")
    assert kgot("types", "add", str(types_file), "-e", "aide")[0] == 0

    code, out, err = kgot("types", "show", "Asset", "-e", "aide")
    assert code == 0, err
    lines = out.splitlines()
    assert lines == [
        "type            Asset (node type of entity 'aide', v1, by user)",
        "description     A listed security an aide watches.",
        "identity        symbol",
        "functional      price",
        "half_life_days  21 (freshness halves every 21 days)",
        "ttl_days        90 (a fact expires 90 days after it was written or reinforced)",
        "rank_weight     0.8",
        "properties      symbol (required), price",
        "schema          kgot types show Asset --entity aide --json",
    ]
    assert all(len(line) <= 80 for line in lines)

    code, out, _ = kgot("types", "show", "Asset", "-e", "aide", "--json")
    shown = json.loads(out)
    assert {k: shown[k] for k in ("identity", "functional", "ttl_days", "rank_weight")} == {
        "identity": ["symbol"],
        "functional": ["price"],
        "ttl_days": 90,
        "rank_weight": 0.8,
    }
    assert (shown["half_life_days"], shown["evergreen"]) == (21, False)

    # An edge type's `functional` is a yes/no; an evergreen type says so.
    code, out, _ = kgot("types", "show", "listed_on", "-e", "aide")
    assert "functional      true (at most one current edge per source node)" in out.splitlines()
    assert "connects        Asset -> any" in out.splitlines()
    assert (
        json.loads(kgot("types", "show", "listed_on", "-e", "aide", "--json")[1])["functional"]
        is True
    )
    code, out, _ = kgot("types", "show", "Event")
    assert out.splitlines()[0] == "type            Event (global node type, v1, by system)"
    assert "half_life_days  evergreen (never decays)" in out.splitlines()
    assert "identity        none" in out.splitlines()
    shown = json.loads(kgot("types", "show", "Event", "--json")[1])
    assert (shown["half_life_days"], shown["evergreen"], shown["ttl_days"]) == (None, True, None)
    assert shown["functional"] == ["date", "start", "end"]
    (version,) = json.loads(kgot("types", "show", "Event", "--history")[1])
    assert version["evergreen"] is True and version["retired_reason"] is None


@pytest.mark.slow
def test_a_setting_naming_a_missing_property_is_one_line_and_stores_nothing(
    kgot, tmp_path: Path
) -> None:
    kgot("entities", "create", "aide")
    bad = tmp_path / "bad.yaml"
    bad.write_text(ASSET_TYPES.replace("identity: [symbol]", "identity: [ticker]"), "utf-8")
    code, out, err = kgot("types", "add", str(bad), "-e", "aide")
    assert (code, out) == (2, "")
    assert err == (
        "kgot: error: type 'Asset' rejected: identity names property 'ticker' the schema lacks "
        "(declare it under `properties` or drop it from `identity`)\n"
    )
    listed = json.loads(kgot("types", "list", "-e", "aide", "--json")[1])
    assert "Asset" not in {t["name"] for t in listed["node_types"]}  # all or nothing
    assert "listed_on" not in {t["name"] for t in listed["edge_types"]}

    # Several violations: grouped on the one line, each named.
    worse = tmp_path / "worse.yaml"
    worse.write_text(
        ASSET_TYPES.replace("identity: [symbol]", "identity: [ticker]").replace(
            "functional: [price]", "functional: [price, ceo]"
        ),
        "utf-8",
    )
    code, _, err = kgot("types", "add", str(worse), "-e", "aide")
    assert code == 2 and err.count("\n") == 1
    assert "identity names property 'ticker'" in err
    assert "functional names property 'ceo' the schema lacks" in err

    # The same rule holds for an update (the stored version stays) and a new entity's types.
    good = tmp_path / "assets.yaml"
    good.write_text(ASSET_TYPES, "utf-8")
    assert kgot("types", "add", str(good), "-e", "aide")[0] == 0
    code, _, err = kgot("types", "update", str(bad), "-e", "aide")
    assert code == 2 and err.count("\n") == 1 and "identity names property 'ticker'" in err
    assert json.loads(kgot("types", "show", "Asset", "-e", "aide", "--json")[1])["version"] == 1
    code, _, err = kgot("entities", "create", "other", "--types", str(bad))
    assert code == 2 and "identity names property 'ticker'" in err
    assert [e["name"] for e in json.loads(kgot("entities", "list", "--json")[1])] == ["aide"]


@pytest.mark.slow
def test_graph_import_export_and_stats_by_entity(kgot, tmp_path: Path, store_url: str) -> None:
    kgot("entities", "create", "alice")
    kgot("entities", "create", "bob")
    graph = nx.MultiDiGraph()
    graph.add_node("ada", label="Person", name="Ada", _confidence=0.7)
    graph.add_node("acme", label="Organization", name="Acme")
    graph.add_edge("ada", "acme", key="works_for", relationship="works_for", role="engineer")
    source = tmp_path / "alice.json"
    write_graph(graph, source)
    code, out, err = kgot("graph", "import", "--entity", "alice", str(source), "--dry-run")
    assert code == 0 and "would apply: +2 nodes, +1 edge" in out
    assert kgot("graph", "stats", "--entity", "alice")[1].count('"nodes": 0') == 1
    code, out, err = kgot("graph", "import", "--entity", "alice", str(source))
    assert code == 0 and "+2 nodes, +1 edge (version 1)" in out
    code, out, _ = kgot("graph", "import", "--entity", "alice", str(source))
    assert "holds nothing new" in out

    bob_graph = nx.MultiDiGraph()
    bob_graph.add_node("ada", label="Person", name="Bob's secret Ada")
    write_graph(bob_graph, tmp_path / "bob.ttl")
    assert kgot("graph", "import", "--entity", "bob", str(tmp_path / "bob.ttl"))[0] == 0

    for ext in ("ttl", "graphml", "json"):
        exported = tmp_path / f"alice-out.{ext}"
        code, _, err = kgot("graph", "export", "--entity", "alice", str(exported))
        assert code == 0 and "2 nodes, 1 edge of entity 'alice' (version 1)" in err
        back = read_graph(exported)
        assert back.nodes["ada"]["name"] == "Ada"  # never Bob's fact with the same id
        assert back.nodes["ada"]["_confidence"] == 0.7 and "_created_at" in back.nodes["ada"]
        assert "Bob" not in exported.read_text(encoding="utf-8")
        assert "holds nothing new" in kgot("graph", "import", "--entity", "alice", str(exported))[1]
    plain = tmp_path / "plain.json"
    kgot("graph", "export", "--entity", "alice", str(plain), "--no-meta")
    assert "_confidence" not in plain.read_text(encoding="utf-8")

    stats = json.loads(kgot("graph", "stats", "--entity", "alice")[1])
    assert stats == {
        "nodes": 2,
        "edges": 1,
        "nodes_by_label": {"Organization": 1, "Person": 1},
        "edges_by_relationship": {"works_for": 1},
    }

    # --replace removes what the file lacks; a bad file is rejected whole.
    smaller = nx.MultiDiGraph()
    smaller.add_node("ada", label="Person", name="Ada")
    write_graph(smaller, tmp_path / "smaller.json")
    code, out, _ = kgot(
        "graph", "import", "--entity", "alice", str(tmp_path / "smaller.json"), "--replace"
    )
    assert code == 0 and "-1 node, -1 edge" in out
    smaller.add_node("x", label="Gadget", name="x")
    write_graph(smaller, tmp_path / "bad.json")
    code, _, err = kgot("graph", "import", "--entity", "alice", str(tmp_path / "bad.json"))
    assert code == 2 and "nothing was imported" in err and "label 'Gadget'" in err
    store = open_store(store_url)
    assert set(store.session("alice").load_graph()) == {"ada"}
    store.close()
    code, _, err = kgot("graph", "export", "--entity", "ghost", str(tmp_path / "g.json"))
    assert code == 2 and "kgot entities create ghost" in err
    assert not (tmp_path / "g.json").exists()
    code, _, err = kgot("graph", "stats")
    assert code == 2 and "give either a graph FILE or --entity NAME" in err


def test_an_unreachable_database_is_one_line(kgot) -> None:
    code, out, err = kgot("entities", "list", "--db", "postgresql://me:pw@127.0.0.1:1/kg")
    assert code == 2 and out == ""  # the store location is configuration
    assert err.startswith("kgot: error: cannot use database postgresql://me:***@127.0.0.1:1/kg")
    assert "pw@" not in err and err.count("\n") == 1
