"""The advisor's seed types: installed by `kgot aide create --program advisor` into the aide's
entity only, and enforced on writes (an Insight's strength and date are checked, with the
JSON path of what is wrong)."""

from __future__ import annotations

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor.types import advisor_type_specs
from kgot.errors import ChangesetError
from kgot.graph_model import Changeset, Node
from kgot.persistence import Provenance, Store

NODE_TYPES = {
    "Asset",
    "Company",
    "Sector",
    "AssetClass",
    "Institution",
    "MarketEvent",
    "News",
    "Insight",
}
EDGE_TYPES = {
    "issued_by",
    "in_sector",
    "belongs_to",
    "affects",
    "mentions",
    "about",
    "derived_from",
    "correlated",
}


@pytest.mark.slow
def test_creating_an_advisor_installs_its_types_in_its_entity_only(store: Store) -> None:
    store.create_entity("other")
    create_aide(store, "adv", "markets", program="advisor")

    catalog = store.type_catalog("markets")
    own = {t.name for t in [*catalog.node_types.values(), *catalog.edge_types.values()] if t.scope}
    assert own == NODE_TYPES | EDGE_TYPES
    for name in NODE_TYPES:
        found = catalog.node_types[name]
        assert (found.scope, found.created_by, found.version) == ("markets", "system", 1)
        assert found.spec.description and found.spec.example is not None
    # Half-lives: news in days, events in weeks, insights in days; categories evergreen.
    assert catalog.node_types["News"].upkeep.half_life_days == 3
    assert catalog.node_types["MarketEvent"].upkeep.half_life_days == 21
    assert catalog.node_types["Insight"].upkeep.half_life_days == 5
    for evergreen in ("Sector", "AssetClass", "Institution", "Asset", "Company"):
        assert catalog.node_types[evergreen].upkeep.half_life_days is None
    assert catalog.node_types["Asset"].upkeep.identity == ("symbol",)
    assert catalog.node_types["Institution"].upkeep.functional == ("policy_rate",)
    # The entity's `mentions` (News -> any) shadows the global one (Document -> any) here only.
    assert catalog.edge_types["mentions"].spec.source_types == ("News",)
    assert store.type_catalog("other").edge_types["mentions"].spec.source_types == ("Document",)
    assert "Asset" not in store.type_catalog("other").node_types
    assert "Asset" not in store.type_catalog().node_types


@pytest.mark.slow
def test_a_second_advisor_on_the_entity_keeps_the_types_it_finds(store: Store) -> None:
    create_aide(store, "first", "markets", program="advisor")
    create_aide(store, "second", "markets", program="advisor")
    catalog = store.type_catalog("markets")
    assert {t.version for t in catalog.node_types.values() if t.scope} == {1}
    assert len(advisor_type_specs()) == 16


def _write(store: Store, properties: dict[str, object]) -> str:
    session = store.session("markets")
    session.load_graph()
    with pytest.raises(ChangesetError) as refused:
        session.commit(
            Changeset(added_nodes=(Node("i1", "Insight", properties),)),
            Provenance(run_id="t", step="test"),
        )
    return str(refused.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"strength": 1.4}, "$.strength"),
        ({"generated_at": "yesterday"}, "$.generated_at"),
        ({"type": "observation", "action": "buy"}, "$"),  # actions are for signals only
    ],
)
def test_an_insight_that_breaks_its_schema_is_refused_naming_the_path(
    store: Store, change: dict[str, object], path: str
) -> None:
    create_aide(store, "adv", "markets", program="advisor")
    good = {
        "type": "signal",
        "summary": "beat",
        "action": "buy",
        "strength": 0.7,
        "generated_at": "2026-11-20T08:00:00Z",
    }
    session = store.session("markets")
    session.load_graph()
    session.commit(  # the valid one is stored
        Changeset(added_nodes=(Node("ok", "Insight", good),)), Provenance(run_id="t", step="t")
    )
    message = _write(store, {**good, **change})
    assert path in message
    assert "i1" in message and "Insight" in message


@pytest.mark.slow
def test_deleting_the_aide_or_the_entity_deletes_its_users_rows(store: Store) -> None:
    from kgot.aides import open_aide
    from kgot.aides.advisor import advisor_rows
    from kgot.aides.advisor.holdings import PositionRow
    from kgot.aides.advisor.schema import ADVISOR_TABLE_ORDER, ADVISOR_TABLES

    def rows() -> dict[str, int]:
        from sqlalchemy import func, select

        with store.read() as connection:
            return {
                name: int(
                    connection.execute(
                        select(func.count()).select_from(getattr(ADVISOR_TABLES, name))
                    ).scalar_one()
                )
                for name in ADVISOR_TABLE_ORDER
            }

    for name, entity in (("one", "markets"), ("two", "other")):
        aide = create_aide(store, name, entity, program="advisor")
        user = advisor_rows.add_user(store, aide.row, "alice")
        advisor_rows.import_positions(store, aide.row, user, [PositionRow("AAPL", 1.0)])
        advisor_rows.add_watch(store, aide.row, user, ["NVDA"])
    assert rows()["advisor_positions"] == 2
    open_aide(store, "one").delete()
    assert rows() == {
        **{n: 0 for n in ADVISOR_TABLE_ORDER},
        "advisor_users": 1,
        "advisor_positions": 1,
        "advisor_watchlist": 1,
    }
    store.delete_entity("other")
    assert set(rows().values()) == {0}


@pytest.mark.slow
def test_a_company_is_one_node_by_ticker_or_by_name(store: Store) -> None:
    """The issue's "identity name/ticker", as the installed types resolve writes: an equal
    ticker is one company whatever the name's form; without a ticker the name rules decide
    ("Apple Inc." is "Apple"); different tickers are two companies."""
    from kgot.memory import Memory
    from kgot.memory.resolution import resolve

    create_aide(store, "adv", "markets", program="advisor")
    assert store.type_catalog("markets").node_types["Company"].upkeep.identity == ("ticker",)
    memory = Memory(store.session("markets"))
    memory.session.load_graph()

    def write(node_id: str, **properties: object) -> str:
        outcome = memory.commit(
            Changeset(added_nodes=(Node(node_id, "Company", properties),)),
            Provenance(run_id="t", step="test"),
        )
        return {merged.given: merged.into for merged in outcome.merged}.get(node_id, node_id)

    assert write("apple", name="Apple Inc.", ticker="AAPL") == "apple"
    assert write("apple_2", name="Apple", ticker="AAPL") == "apple"  # same ticker
    assert write("apple_3", name="Apple Incorporated") == "apple"  # no ticker: the name rules
    assert write("alphabet", name="Alphabet Inc.", ticker="GOOGL") == "alphabet"
    assert write("alphabet_c", name="Alphabet Inc.", ticker="GOOG") == "alphabet_c"  # two
    graph = memory.session.load_graph()
    assert sorted(n for n, d in graph.nodes(data=True) if d["label"] == "Company") == [
        "alphabet",
        "alphabet_c",
        "apple",
    ]

    # Why the name is not an identity property too: identity values compare as written (case
    # folded), and two different values of any identity property mean two things, so "Apple
    # Inc." and "Apple" would stay apart even with the same ticker.
    one = Node("a", "Company", {"name": "Apple Inc.", "ticker": "AAPL"})
    two = Node("b", "Company", {"name": "Apple", "ticker": "AAPL"})
    assert [m.aliases for m in resolve([one, two], ("ticker",)).merges] == [("b",)]
    assert resolve([one, two], ("name", "ticker")).merges == ()
