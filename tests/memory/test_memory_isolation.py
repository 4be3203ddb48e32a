"""No memory command reaches another entity (issue 15, "no cross-entity effect of any command").

Two entities, ``a`` and ``b``, hold the same node ids and names (a duplicate Apple in both,
the same functional ``ceo``, a headline with a time to live, an open suggestion each, use
counts and embeddings); ``b`` also holds one company whose words appear nowhere in ``a``.
Every ``kgot memory`` command then runs on ``a`` through the CLI, and the Python API where
the CLI has no command (``Memory.used``); after each, every row of ``b`` in every table that
has an ``entity_id`` (nodes, edges, commits, suggestions, fact use, embeddings, …), its
entity row and its graph with metadata must be exactly as before. The embedding model is
the loopback OpenAI-compatible server of the embeddings tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from kgot.cli.main import main
from kgot.errors import UsageError
from kgot.graph_model import Changeset, Edge, Node
from kgot.memory import open_memory
from kgot.persistence import Provenance, open_store
from kgot.persistence.engine import read_transaction
from kgot.persistence.migrations import store_tables
from kgot.persistence.schema import TABLES
from kgot.tests.memory.conftest import UPKEEP_TYPES
from kgot.tests.memory.test_memory_embeddings import (  # noqa: F401  (a fixture, found by name)
    _EmbeddingsServer,
    embeddings_server,
)

HEADLINE: dict[str, Any] = {
    "kind": "node",
    "name": "Headline",
    "description": "A news headline: stale after a month.",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}},
    },
    "ttl_days": 30,
    "half_life_days": 7,
}
FAR_FUTURE = "2100-01-01T00:00:00Z"
B_ONLY_WORDS = "Zanzibar Quokka"


def _company(node_id: str, name: str, **properties: Any) -> Node:
    return Node(node_id, "Company", {"name": name, **properties})


def _seed(store_url: str, entity: str, *, own_company: bool = False) -> list[int]:
    """The shared shape of both entities; the ids of the two suggestions queued."""
    with open_store(store_url) as store:
        store.create_entity(entity, types=[*UPKEEP_TYPES, HEADLINE])
        session = store.session(entity)
        session.load_graph()
        nodes = [
            _company("apple_old", "Apple, Inc.", ceo="Tim Cook"),
            _company("apple", "Apple Inc.", sector="tech"),
            _company("meta", "Meta"),
            _company("meta_fin", "Meta Financial Group"),
            Node("cupertino", "Place", {"name": "Cupertino"}),
            Node("headline", "Headline", {"name": "Apple earnings beat"}),
        ]
        if own_company:
            nodes.append(_company("quokka", f"{B_ONLY_WORDS} Holdings", ceo="Wombat Smith"))
        session.commit(
            Changeset(
                added_nodes=tuple(nodes),
                added_edges=(Edge("apple", "cupertino", "headquartered_in"),),
            ),
            Provenance(run_id="seed", step="seed", source_ref="file:one"),
        )
        session.record_use([("node", "apple")])
        session.feedback(("node", "cupertino"), True)
        return [
            session.suggest(
                "merge",
                {"nodes": ["meta", "meta_fin"], "type": "Company", "reason": "seeded"},
                0.6,
            ),
            session.suggest(
                "merge",
                {"nodes": ["apple", "cupertino"], "type": "Company", "reason": "seeded"},
                0.5,
            ),
        ]


def _snapshot(store_url: str, entity: str) -> dict[str, Any]:
    """Everything the store keeps for ``entity``: its rows in each table scoped by entity,
    its entity row, and its graph as sessions read it (with metadata)."""
    with open_store(store_url) as store:
        session = store.session(entity)
        graph = session.load_graph(include_meta=True)
        entity_id = session._entity_id
        found: dict[str, Any] = {
            "version": session.version,
            "commits": session.commits(limit=10_000),
            "suggestions": [s.to_dict() for s in session.suggestions(None)],
            "nodes": sorted((n, repr(sorted(d.items()))) for n, d in graph.nodes(data=True)),
            "edges": sorted(
                (s, t, k, repr(sorted(d.items())))
                for s, t, k, d in graph.edges(keys=True, data=True)
            ),
        }
        with read_transaction(store._context.engine, store.target) as connection:
            entities = TABLES.entities
            found["entity_row"] = [
                repr(tuple(row))
                for row in connection.execute(select(entities).where(entities.c.id == entity_id))
            ]
            for table in store_tables().values():
                if "entity_id" in table.c:
                    rows = connection.execute(select(table).where(table.c.entity_id == entity_id))
                    found[table.name] = sorted(repr(tuple(row)) for row in rows)
    return found


@pytest.fixture
def two_entities(store_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    """Both entities seeded and ``b`` embedded; the CLI arguments every command takes."""
    server: _EmbeddingsServer = request.getfixturevalue("embeddings_server")
    config = tmp_path / "config.toml"
    port = server.server_address[1]
    config.write_text(
        f'[memory]\nembeddings_base_url = "http://127.0.0.1:{port}/v1"\n'
        'embeddings = "local-embed"\n'
    )
    a_ids = _seed(store_url, "a")
    b_ids = _seed(store_url, "b", own_company=True)
    top = ["--config", str(config)]
    db = ["--db", store_url]
    assert main([*top, "memory", "embed", "--entity", "b", *db]) == 0
    return {"top": top, "db": db, "a": a_ids, "b": b_ids}


def _cli(
    capsys: pytest.CaptureFixture[str], env: dict[str, Any], *args: str
) -> tuple[int, str, str]:
    code = main([*env["top"], "memory", *args, *env["db"]])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_every_memory_command_on_one_entity_leaves_the_other_untouched(
    store_url: str, two_entities: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    env = two_entities
    capsys.readouterr()
    b_before = _snapshot(store_url, "b")
    assert b_before["kgot_embeddings"] and b_before["kgot_fact_use"]
    assert len(b_before["suggestions"]) == 2
    a_kept, a_dropped = env["a"]
    b_first = env["b"][0]

    def unchanged_b(step: str) -> None:
        after = _snapshot(store_url, "b")
        changed = [part for part in b_before if after[part] != b_before[part]]
        assert not changed, f"{step} changed entity b: {changed}"

    def run(step: str, *args: str, code: int = 0) -> str:
        got, out, err = _cli(capsys, env, *args)
        assert got == code, f"{step}: exit {got}, {err}"
        if code == 2:
            assert err.startswith("kgot: error: ") and err.count("\n") == 1, err
        unchanged_b(step)
        return out

    # resolve --apply merges a's duplicate Apple, not b's.
    resolved = json.loads(run("resolve", "resolve", "-e", "a", "--apply", "--json"))
    assert [m["aliases"] for m in resolved["merges"]] == [["apple_old"]]

    # The queue of a lists a's suggestions only; b's ids read as unknown.
    listed = json.loads(run("suggestions", "suggestions", "-e", "a", "--status", "open", "--json"))
    assert b_first not in {row["id"] for row in listed}
    assert a_kept in {row["id"] for row in listed}
    for verb in ("accept", "reject"):
        run(f"{verb} b's suggestion", verb, "-e", "a", str(b_first), code=2)
    run("accept", "accept", "-e", "a", str(a_kept))
    run("reject", "reject", "-e", "a", str(a_dropped), "--reason", "two different funds")
    rejected = json.loads(run("rejected", "suggestions", "-e", "a", "--status", "rejected",
                              "--json"))  # fmt: skip
    assert [row["decision"] for row in rejected] == [
        {"by": "person", "reason": "two different funds"}
    ]

    # Upkeep far in the future expires a's headline (ttl 30 days), not b's.
    report = json.loads(run("upkeep", "upkeep", "-e", "a", "--now", FAR_FUTURE, "--json"))
    assert report["expired"] >= 1
    run("upkeep with a bad --now", "upkeep", "-e", "a", "--now", "next tuesday", code=2)

    # Search: b's words find nothing in a; a's own search works.
    hits = json.loads(run("search b-only", "search", "-e", "a", B_ONLY_WORDS, "--json"))
    assert all("quokka" not in json.dumps(hit).casefold() for hit in hits)
    hits = json.loads(run("search", "search", "-e", "a", "Apple", "--json"))
    assert "apple" in [hit["id"] for hit in hits]

    # Feedback on a fact only b has is an unknown fact; on a's own it counts in a.
    run("feedback on b's fact", "feedback", "-e", "a", "quokka", "--good", code=2)
    run("feedback", "feedback", "-e", "a", "apple", "--good")

    # Verify: a subject only b has is not found in a (not b's facts as evidence).
    verdict = json.loads(
        run(
            "verify b's subject",
            *("verify", "-e", "a", "--subject", "quokka", "--property", "ceo"),
            *("--value", "Wombat Smith", "--json"),
        )
    )
    assert verdict["verdict"] == "inconclusive"
    assert (verdict["supporting"], verdict["contradicting"]) == ([], [])
    verdict = json.loads(
        run(
            "verify",
            *("verify", "-e", "a", "--subject", "apple", "--property", "ceo"),
            *("--value", "Tim Cook", "--json"),
        )
    )
    assert verdict["verdict"] == "corroborated"

    # Embeddings: a's nodes get their vectors; b's rows stay as they were.
    embedded = json.loads(run("embed", "embed", "-e", "a", "--json"))
    assert embedded["embedded"] >= 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda memory: memory.used(["apple", "cupertino"]), id="used"),
        pytest.param(lambda memory: memory.used(["quokka"]), id="used-b-only-id"),
        pytest.param(lambda memory: memory.search(B_ONLY_WORDS), id="search"),
        pytest.param(lambda memory: memory.upkeep(), id="upkeep-now"),
        pytest.param(lambda memory: memory.resolve(apply=True), id="resolve"),
        pytest.param(
            lambda memory: memory.verify_claim("quokka", property="ceo", value="Wombat Smith"),
            id="verify",
        ),
    ],
)
def test_python_api_calls_on_one_entity_leave_the_other_untouched(
    store_url: str, two_entities: dict[str, Any], call: Callable[[Any], Any]
) -> None:
    before = _snapshot(store_url, "b")
    with open_store(store_url) as store:
        result = call(open_memory(store, "a"))
    if isinstance(result, list):  # search: nothing of b's
        assert all("quokka" not in repr(hit).casefold() for hit in result)
    after = _snapshot(store_url, "b")
    assert [part for part in before if after[part] != before[part]] == []


@pytest.mark.slow
def test_used_and_feedback_count_only_the_callers_entity(
    store_url: str, two_entities: dict[str, Any]
) -> None:
    with open_store(store_url) as store:
        memory = open_memory(store, "a")
        assert memory.used(["quokka"]) == 0
        with pytest.raises(UsageError, match="quokka"):
            memory.feedback("quokka", True)
        assert memory.used(["apple"]) == 1
        a_use = memory.session.fact_use([("node", "apple")])[("node", "apple")]
        b_use = store.session("b").fact_use([("node", "apple")])[("node", "apple")]
    assert a_use.uses == 2 and b_use.uses == 1


@pytest.mark.slow
def test_accepting_a_merge_of_nodes_whose_identity_now_differs_is_refused(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A merge queued while two nodes had no symbol, accepted after each got a different one:
    identity says they are two things, so the accept is refused and nothing is written (the
    merge would otherwise drop one node's symbol from the current graph)."""
    kept, _ = _seed(store_url, "a")
    with open_store(store_url) as store:
        session = store.session("a")
        session.load_graph()
        session.commit(
            Changeset(
                changed_nodes=(
                    _company("meta", "Meta", symbol="META"),
                    _company("meta_fin", "Meta Financial Group", symbol="CASH"),
                )
            ),
            Provenance(run_id="later", step="later", source_ref="file:two"),
        )
    before = _snapshot(store_url, "a")

    code = main(["memory", "accept", "--entity", "a", str(kept), "--db", store_url])
    _, err = capsys.readouterr()

    assert code == 2
    assert err.startswith("kgot: error: suggestion ") and err.count("\n") == 1, err
    assert "symbol" in err and "reject" in err
    assert _snapshot(store_url, "a") == before


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["accept", "reject"])
@pytest.mark.parametrize("number", [2**31, 2**63, 10**30])
def test_a_suggestion_id_beyond_any_stored_one_is_unknown(
    store_url: str, capsys: pytest.CaptureFixture[str], verb: str, number: int
) -> None:
    """An id too large for the database's integers reads as an unknown id (exit 2), not an
    internal error."""
    _seed(store_url, "a")
    before = _snapshot(store_url, "a")

    code = main(["memory", verb, "--entity", "a", str(number), "--db", store_url])
    _, err = capsys.readouterr()

    assert (code, err) == (
        2,
        f"kgot: error: no suggestion {number} in entity 'a' (list them with "
        "`kgot memory suggestions --entity a`)\n",
    )
    assert _snapshot(store_url, "a") == before


def _trusted(confidence: float, source: str) -> Provenance:
    return Provenance(run_id="r", step="s", source_ref=source, confidence=confidence)


def _stale_contradiction(store_url: str, fact: str) -> int:
    """A low-trust value queued as a contradiction, then superseded by a trusted write: the
    suggestion's "old" value is no longer the current one. Returns the suggestion's id."""
    with open_store(store_url) as store:
        store.create_entity("c", types=UPKEEP_TYPES)
        memory = open_memory(store, "c")
        memory.session.load_graph()
        places = tuple(Node(p, "Place", {"name": p.title()}) for p in ("cup", "aus", "ny"))
        if fact == "node":
            writes = [
                Changeset(added_nodes=(_company("apple", "Apple", ceo="Tim Cook"),)),
                Changeset(changed_nodes=(_company("apple", "Apple", ceo="Low Trust"),)),
                Changeset(changed_nodes=(_company("apple", "Apple", ceo="New Boss"),)),
            ]
        else:
            writes = [
                Changeset(
                    added_nodes=(_company("apple", "Apple"), *places),
                    added_edges=(Edge("apple", "cup", "headquartered_in"),),
                ),
                Changeset(added_edges=(Edge("apple", "aus", "headquartered_in"),)),
                Changeset(added_edges=(Edge("apple", "ny", "headquartered_in"),)),
            ]
        memory.commit(writes[0], _trusted(0.9, "file:a"))
        memory.commit(writes[1], _trusted(0.5, "web:b"))
        [queued] = memory.suggestions()
        memory.commit(writes[2], _trusted(0.95, "file:c"))
        return queued.id


@pytest.mark.slow
@pytest.mark.parametrize("fact", ["node", "edge"])
def test_accepting_a_contradiction_whose_old_value_was_superseded_is_refused(
    store_url: str, capsys: pytest.CaptureFixture[str], fact: str
) -> None:
    """Accepting "take the low-trust value over the old one" after a trusted write replaced the
    old one would overwrite the newer value (node) or leave two current edges of a functional
    relationship (edge): refused in one line, nothing written, the suggestion still open."""
    suggestion = _stale_contradiction(store_url, fact)
    before = _snapshot(store_url, "c")

    code = main(["memory", "accept", "--entity", "c", str(suggestion), "--db", store_url])
    _, err = capsys.readouterr()

    assert code == 2, err
    assert err.startswith(f"kgot: error: suggestion {suggestion} ") and err.count("\n") == 1
    assert "reject" in err
    assert _snapshot(store_url, "c") == before
