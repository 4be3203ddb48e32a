"""`Memory.search` / `kgot memory search|feedback` on real stores (SQLite and PostgreSQL):
ranking order, filters, superseded / merged / expired facts left out, tenants kept apart,
reinforcement, the per-session index following other writers, and the CLI's JSON and errors."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kgot.cli.main import main
from kgot.errors import UsageError
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import open_memory, scoring
from kgot.memory.search import query_words
from kgot.persistence import Provenance, Store, open_store
from kgot.persistence.facts import edge_key, edge_key_from_id, fact_id
from kgot.tests.memory.conftest import UPKEEP_TYPES

NEWS: dict[str, Any] = {
    "kind": "node",
    "name": "News",
    "description": "A news item; ages over a month.",
    "properties": {
        "type": "object",
        "required": ["title"],
        "properties": {
            "title": {"type": "string", "minLength": 1},
            "published_at": {"type": "string", "format": "date-time"},
            "summary": {"type": "string"},
        },
    },
    "half_life_days": 30,
    "rank_weight": 0.5,
}
FUND: dict[str, Any] = {
    "kind": "node",
    "name": "Fund",
    "description": "An investment fund; matters more than a company here.",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}},
    },
    "rank_weight": 0.9,
}
TYPES = [*UPKEEP_TYPES, NEWS, FUND]
# A fact's age runs from the latest of its date properties and its creation (scoring), and
# creation is the clock's: the news items are dated after it so their dates make a difference.
NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(days=400)
LAST_YEAR = NOW - timedelta(days=365)


def _provenance(source: str = "file:one") -> Provenance:
    return Provenance(run_id="test", step="test", source_ref=source)


def _seed(store: Store, entity: str = "fund") -> None:
    store.create_entity(entity, types=TYPES)
    session = store.session(entity)
    session.commit(
        Changeset(
            added_nodes=(
                Node("apple", "Company", {"name": "Apple Inc.", "ceo": "Steve Jobs"}),
                Node("apple_pie", "Company", {"name": "Apple Pie Bakery of Springfield"}),
                Node("banana", "Company", {"name": "Banana Republic", "sector": "retail"}),
                Node("acme_a", "Company", {"name": "Acme Alfa", "_confidence": 0.9}),
                Node("acme_b", "Company", {"name": "Acme Beta", "_confidence": 0.6}),
                Node("zeta_c", "Company", {"name": "Zeta One"}),
                Node("zeta_f", "Fund", {"name": "Zeta Two"}),
                Node("cupertino", "Place", {"name": "Cupertino"}),
                Node(
                    "news_new",
                    "News",
                    {"title": "Vega launch", "published_at": NOW.isoformat()},
                ),
                Node(
                    "news_old",
                    "News",
                    {"title": "Vega rumour", "published_at": LAST_YEAR.isoformat()},
                ),
                Node(
                    "orion_news",
                    "News",
                    {"title": "Orion", "published_at": NOW.isoformat()},
                ),
                Node("orion_co", "Company", {"name": "Orion", "_confidence": 0.8}),
            ),
            added_edges=(Edge("apple", "cupertino", "headquartered_in"),),
        ),
        _provenance(),
    )


def _ids(hits: list[Any]) -> list[str]:
    return [hit.id for hit in hits]


# --------------------------------------------------------------------------------------------
# Ranking


def test_relevance_comes_first_and_irrelevant_facts_are_not_hits(store: Store) -> None:
    _seed(store)
    hits = open_memory(store, "fund").search("apple", now=NOW)
    assert _ids(hits)[:2] == ["apple", "apple_pie"]
    assert hits[0].parts.relevance > hits[1].parts.relevance
    assert "banana" not in _ids(hits) and all(hit.parts.relevance > 0 for hit in hits)
    # Apple's edge matches through its end's name, below the node itself.
    edge = next(hit for hit in hits if hit.kind == "edge")
    assert edge.id == "apple -[headquartered_in]-> cupertino"
    assert edge.key == ("edge", "apple", "cupertino", "headquartered_in")
    assert edge.name == "Apple Inc. headquartered_in Cupertino"
    assert _ids(hits).index(edge.id) > _ids(hits).index("apple")
    # An exact name is the most relevant possible.
    [exact] = open_memory(store, "fund").search("Banana Republic", limit=1, now=NOW)
    assert (exact.id, exact.parts.relevance) == ("banana", 1.0)
    # The score is scoring.rank of the four components.
    parts = hits[0].parts
    assert hits[0].score == pytest.approx(
        0.6 * parts.relevance + 0.15 * parts.rank_weight + 0.15 * parts.confidence + 0.1
    )


@pytest.mark.slow
def test_among_equally_relevant_facts_confidence_and_rank_weight_decide(store: Store) -> None:
    _seed(store)
    memory = open_memory(store, "fund")
    first, second = memory.search("acme", now=NOW)
    assert first.parts.relevance == second.parts.relevance
    assert (first.id, first.parts.confidence, second.id, second.parts.confidence) == (
        "acme_a",
        0.9,
        "acme_b",
        0.6,
    )
    first, second = memory.search("zeta", now=NOW)
    assert first.parts.relevance == second.parts.relevance
    assert (first.id, first.parts.rank_weight, second.id, second.parts.rank_weight) == (
        "zeta_f",
        0.9,
        "zeta_c",
        0.5,
    )


@pytest.mark.slow
def test_fresher_facts_rank_higher_and_stale_decaying_facts_sink(store: Store) -> None:
    _seed(store)
    memory = open_memory(store, "fund")
    first, second = memory.search("vega", now=NOW)
    assert (first.id, second.id) == ("news_new", "news_old")
    expected, age = scoring.fact_freshness(
        {"published_at": LAST_YEAR.isoformat()}, now=NOW, half_life_days=30
    )
    assert second.parts.freshness == pytest.approx(expected)
    assert second.age_days == pytest.approx(age)

    # Fresh, the fully trusted news item beats the less trusted evergreen company ...
    assert _ids(memory.search("orion", now=NOW)) == ["orion_news", "orion_co"]
    # ... ten years on it has faded below it; the company never fades.
    later = memory.search("orion", now=NOW + timedelta(days=3650))
    assert _ids(later) == ["orion_co", "orion_news"]
    assert later[0].parts.freshness == 1.0 and later[1].parts.freshness < 0.001


@pytest.mark.slow
def test_use_and_good_feedback_raise_a_fading_fact(store: Store) -> None:
    store.create_entity("fund", types=TYPES)
    store.session("fund").commit(
        Changeset(
            added_nodes=(
                Node("n1", "News", {"title": "Lyra alpha", "published_at": NOW.isoformat()}),
                Node("n2", "News", {"title": "Lyra gamma", "published_at": NOW.isoformat()}),
            )
        ),
        _provenance(),
    )
    memory = open_memory(store, "fund")
    later = NOW + timedelta(days=90)
    first, second = memory.search("lyra", now=later)
    assert first.score == second.score and (first.id, second.id) == ("n1", "n2")
    fresh = second.parts.freshness

    assert memory.used([second]) == 1  # a hit the caller used: +0.10
    first, second = memory.search("lyra", now=later)
    assert (first.id, second.id) == ("n2", "n1")
    assert first.parts.freshness == pytest.approx(scoring.retention(fresh, 0.1), abs=1e-4)

    use = memory.feedback("n1", good=True)  # +0.20 puts n1 ahead again
    assert use.strength == pytest.approx(0.2) and (use.good, use.bad) == (1, 0)
    first, _ = memory.search("lyra", now=later)
    assert first.id == "n1"
    assert first.parts.freshness == pytest.approx(scoring.retention(fresh, 0.2), abs=1e-4)
    assert memory.feedback("n1", good=False).strength == pytest.approx(0.2)  # bad: counted only


# --------------------------------------------------------------------------------------------
# Filters and bad input


def test_filters(store: Store) -> None:
    _seed(store)
    memory = open_memory(store, "fund")
    assert _ids(memory.search("orion", type="News", now=NOW)) == ["orion_news"]
    assert _ids(memory.search("apple", type="headquartered_in", now=NOW)) == [
        "apple -[headquartered_in]-> cupertino"
    ]
    assert _ids(memory.search("acme", min_confidence=0.7, now=NOW)) == ["acme_a"]
    assert len(memory.search("apple", limit=1, now=NOW)) == 1
    assert memory.search("nothing matches this", now=NOW) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"limit": 0}, "limit must be a whole number of at least 1"),
        ({"min_confidence": 1.5}, "min_confidence must be between 0 and 1"),
        ({"type": "Spaceship"}, "has no type or fact labelled 'Spaceship'"),
        ({"query": "  ?! "}, "the search query is empty"),
    ],
)
def test_bad_search_input(store: Store, options: dict[str, Any], message: str) -> None:
    _seed(store)
    options = dict(options)  # the parameters are shared by both stores' runs
    query = options.pop("query", "apple")
    with pytest.raises(UsageError, match=message):
        open_memory(store, "fund").search(query, **options)


def test_query_words_drop_stop_words_unless_nothing_is_left() -> None:
    assert query_words("Who is the CEO of Apple?") == ["ceo", "apple"]
    assert query_words("The Who") == ["the", "who"]
    assert query_words("Nestlé S.A.") == ["nestle", "s"]  # "a": a stop word


def test_edge_ids_round_trip() -> None:
    text = fact_id(edge_key("a b", "c -[d]-> e", "rel"))
    assert edge_key_from_id(text) == ("edge", "a b", "c -[d]-> e", "rel")
    assert edge_key_from_id("plain_node") is None


# --------------------------------------------------------------------------------------------
# What never appears


@pytest.mark.slow
def test_superseded_merged_removed_and_expired_facts_never_appear(store: Store) -> None:
    _seed(store)
    session = store.session("fund")
    session.load_graph()
    # A new CEO supersedes the old value (functional property).
    memory = open_memory(store, "fund")
    memory.commit(
        Changeset(
            changed_nodes=(Node("apple", "Company", {"name": "Apple Inc.", "ceo": "Tim Cook"}),)
        ),
        _provenance("file:two"),
    )
    assert memory.search("Steve Jobs", now=NOW) == []
    assert _ids(memory.search("Tim Cook", now=NOW)) == ["apple"]
    # A duplicate merged away leaves; its name leads to the node that stays.
    session = store.session("fund")
    session.load_graph()
    session.commit(
        Changeset(added_nodes=(Node("banana_dup", "Company", {"name": "Banana Republic Inc"}),)),
        _provenance("file:three"),
    )
    assert "banana_dup" in _ids(memory.search("banana", now=NOW))
    memory.resolve(apply=True)
    assert _ids(memory.search("banana", now=NOW)) == ["banana"]
    # Removed facts leave.
    session = store.session("fund")
    session.load_graph()
    session.commit(Changeset(removed_nodes=("apple_pie",)), _provenance())
    assert "apple_pie" not in _ids(memory.search("apple", now=NOW))
    # A fact that expires while the index is kept leaves at once (an edge with its end).
    soon = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat()
    session.commit(
        Changeset(
            added_nodes=(Node("flash", "Company", {"name": "Flash Sale", "_expires_at": soon}),),
            added_edges=(Edge("flash", "cupertino", "headquartered_in"),),
        ),
        _provenance(),
    )
    assert len(memory.search("flash", now=NOW)) == 2
    time.sleep(1.6)
    assert memory.search("flash", now=NOW) == []
    assert memory.search("flash", now=NOW) == []  # a fresh index (load_graph) agrees
    assert memory.search("flash", now=NOW) == open_memory(store, "fund").search("flash")


def test_another_entitys_facts_never_appear(store: Store) -> None:
    _seed(store, "fund")
    store.create_entity("other", types=TYPES)
    other = store.session("other")
    other.commit(
        Changeset(added_nodes=(Node("apple_other", "Company", {"name": "Apple Orchard"}),)),
        _provenance(),
    )
    assert "apple_other" not in _ids(open_memory(store, "fund").search("apple", limit=50))
    assert _ids(open_memory(store, "other").search("apple")) == ["apple_other"]
    with pytest.raises(UsageError, match="no current node 'apple_other' in entity 'fund'"):
        open_memory(store, "fund").feedback("apple_other", good=True)
    assert open_memory(store, "fund").used([("node", "apple_other"), "apple_other"]) == 0
    assert open_memory(store, "fund").used(["apple", "apple -[headquartered_in]-> cupertino"]) == 2


@pytest.mark.slow
def test_the_kept_index_follows_every_writer(store_url: str) -> None:
    with open_store(store_url) as store, open_store(store_url) as elsewhere:
        _seed(store)
        memory = open_memory(store, "fund")
        assert memory.search("kiwi") == []  # builds the index
        writer = elsewhere.session("fund")  # another process, in effect
        writer.commit(
            Changeset(added_nodes=(Node("kiwi", "Company", {"name": "Kiwi Ltd"}),)),
            _provenance(),
        )
        assert _ids(memory.search("kiwi")) == ["kiwi"]


def test_feedback_on_edges_and_merged_ids(store: Store) -> None:
    _seed(store)
    memory = open_memory(store, "fund")
    use = memory.feedback("apple -[headquartered_in]-> cupertino", good=True)
    assert use.strength == pytest.approx(0.2)
    use = memory.session.fact_use([("edge", "apple", "cupertino", "headquartered_in")])
    assert use[("edge", "apple", "cupertino", "headquartered_in")].good == 1
    with pytest.raises(UsageError, match="no current edge"):
        memory.feedback("apple -[headquartered_in]-> banana", good=True)


# --------------------------------------------------------------------------------------------
# The command line


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_cli_search_json_text_and_feedback(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url) as store:
        _seed(store)
    db = ("--db", store_url)
    now = ("--now", "2026-01-02T00:00:00Z")
    code, out, err = _run(
        capsys, "memory", "search", "--entity", "fund", "apple", "--json", "-n", "3", *now, *db
    )
    assert code == 0, err
    rows = json.loads(out)
    assert [row["id"] for row in rows] == [
        "apple",
        "apple_pie",
        "apple -[headquartered_in]-> cupertino",
    ]
    assert set(rows[0]) == {
        "id",
        "kind",
        "label",
        "name",
        "key",
        "score",
        "relevance",
        "rank_weight",
        "confidence",
        "freshness",
        "properties",
        "matched_properties",
        "key_properties",
        "edges",
        "edges_matched",
        "ends",
    }
    assert rows[0]["kind"] == "node" and rows[0]["label"] == "Company"
    assert rows[0]["name"] == "Apple Inc." and rows[0]["key"] == ["node", "apple"]
    assert rows[2]["kind"] == "edge" and rows[2]["label"] == "headquartered_in"
    assert rows[2]["key"] == ["edge", "apple", "cupertino", "headquartered_in"]
    assert rows[0]["score"] == round(
        0.6 * rows[0]["relevance"]
        + 0.15 * rows[0]["rank_weight"]
        + 0.15 * rows[0]["confidence"]
        + 0.1 * rows[0]["freshness"],
        4,
    )

    code, out, err = _run(
        capsys, "memory", "search", "-e", "fund", "orion", "--type", "News", *now, *db
    )
    assert code == 0, err
    # The headline's columns; the news item's matched properties (none: its title is its
    # name) and key properties (none) add no lines, its age does.
    line, *details = out.splitlines()
    assert line.split("  ") == [line.split("  ")[0], "node", "News", "orion_news", "Orion"]
    assert all(detail.startswith("       ") for detail in details), details

    code, out, err = _run(capsys, "memory", "search", "-e", "fund", "durian", *db)
    assert (code, out) == (0, "nothing in entity 'fund' matches 'durian'\n")

    edge = "apple -[headquartered_in]-> cupertino"
    code, out, err = _run(capsys, "memory", "feedback", "-e", "fund", edge, "--good", *db)
    assert (code, out) == (0, f"good feedback on {edge}: strength 0.20 (1 good, 0 bad)\n"), err
    code, out, err = _run(
        capsys,
        "memory",
        "feedback",
        "-e",
        "fund",
        "apple",
        "headquartered_in",
        "cupertino",
        "--bad",
        *db,
    )
    assert code == 0, err
    assert (
        out == "bad feedback on apple headquartered_in cupertino: strength 0.20 (1 good, 1 bad)\n"
    )
    code, out, err = _run(capsys, "memory", "feedback", "-e", "fund", "acme_a", "--good", *db)
    assert code == 0 and "strength 0.20" in out


@pytest.mark.slow
def test_cli_bad_input_is_one_line_exit_2(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url) as store:
        _seed(store)
        before = store.session("fund").fact_use([("node", "apple")])
    db = ("--db", store_url)
    cases = {
        ("search", "-e", "nobody", "apple"): "no entity named 'nobody'",
        ("search", "-e", "fund", "apple", "--now", "soon"): "--now must be",
        ("search", "-e", "fund", "apple", "--limit", "0"): "--limit must be at least 1",
        ("search", "-e", "fund", "apple", "--min-confidence", "1.5"): "--min-confidence must",
        ("search", "-e", "fund", "apple", "--type", "Spaceship"): "no type or fact labelled",
        ("feedback", "-e", "fund", "apple"): "give exactly one of --good or --bad",
        ("feedback", "-e", "fund", "apple", "--good", "--bad"): "exactly one of --good",
        ("feedback", "-e", "fund", "ghost", "--good"): "no current node 'ghost'",
        ("feedback", "-e", "nobody", "apple", "--good"): "no entity named 'nobody'",
        ("feedback", "-e", "fund", "apple", "cupertino", "--good"): "as three words",
        ("feedback", "-e", "fund", "apple", "owns", "cupertino", "--good"): "no current edge",
    }
    for args, message in cases.items():
        code, out, err = _run(capsys, "memory", *args, *db)
        assert code == 2, (args, err)
        assert out == "" and err.count("\n") == 1, (args, err)
        assert err.startswith("kgot: error: ") and message in err, (args, err)
    with open_store(store_url) as store:
        assert store.session("fund").fact_use([("node", "apple")]) == before


def test_a_fact_ages_from_its_own_date_not_from_when_it_was_written() -> None:
    written = "2026-06-01T00:00:00Z"
    now = scoring.parse_instant("2026-06-02T00:00:00Z")
    assert now is not None
    old_news = {"published_at": "2025-06-01", "_created_at": written, "_reinforced_at": written}
    fresh, age = scoring.fact_freshness(old_news, now=now, half_life_days=7)
    assert age is not None and 365 < age < 367 and fresh < 1e-10
    undated = {"_created_at": "2026-05-01T00:00:00Z", "_reinforced_at": written}
    fresh, age = scoring.fact_freshness(undated, now=now, half_life_days=7)
    assert age == 1.0 and fresh == 0.5 ** (1 / 7)
