"""Optional embeddings (kgot.memory.embeddings) on real stores, SQLite and PostgreSQL.

The embedding model is the only stand-in: a deterministic one (hashed character trigrams,
normalised) that records what it was asked, and over the wire a loopback OpenAI-compatible
``/v1/embeddings`` server reached through ``[memory] embeddings_base_url``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from sqlalchemy import select

from kgot.cli.main import main
from kgot.config import MemorySettings, Settings
from kgot.controller import AskResult
from kgot.errors import ConfigError
from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.memory import open_memory
from kgot.memory.api import Memory
from kgot.memory.embeddings import (
    NodeEmbedder,
    embedder_from_settings,
    embedding_relevance,
    load_vectors,
    node_text,
    pending_nodes,
    similar_nodes,
)
from kgot.memory.schema import EMBEDDINGS
from kgot.persistence import Provenance, Store, open_store
from kgot.persistence.engine import read_transaction
from kgot.persistence.schema import TABLES
from kgot.tests.controller.scripts import inspect_call, solution, votes
from kgot.tests.support.loopback_http import LoopbackHTTPServer

DIMENSION = 256


def trigram_vector(text: str) -> list[float]:
    """Hashed character trigrams of the case-folded text, normalised: similar spellings get
    similar vectors, and the same text always the same one."""
    padded = f"  {text.casefold()} "
    vector = np.zeros(DIMENSION)
    for start in range(len(padded) - 2):
        digest = hashlib.blake2b(padded[start : start + 3].encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "little") % DIMENSION] += 1.0
    norm = np.linalg.norm(vector)
    return list(vector / norm) if norm else list(vector)


class TrigramEmbeddings(Embeddings):
    """A deterministic embedding model that records every text it embeds; ``fail`` makes it
    raise like an endpoint that is down."""

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []
        self.calls = 0
        self.fail = False

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.fail:
            raise ConnectionError("embedding endpoint unreachable")
        self.documents.extend(texts)
        return [trigram_vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        if self.fail:
            raise ConnectionError("embedding endpoint unreachable")
        self.queries.append(text)
        return trigram_vector(text)


class SameVectorEmbeddings(TrigramEmbeddings):
    """Every text gets the same vector: cosine 1 between any two nodes."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        super().embed_documents(texts)
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        super().embed_query(text)
        return [1.0, 0.0, 0.0]


def _provenance() -> Provenance:
    return Provenance(run_id="test", step="test", source_ref="file:one")


def _org(node_id: str, name: str, **properties: Any) -> Node:
    return Node(node_id, "Organization", {"name": name, **properties})


def _memory(store: Store, entity: str, model: Embeddings | None) -> Memory:
    if entity not in {e.name for e in store.list_entities()}:
        store.create_entity(entity)
    embedder = NodeEmbedder("test:trigrams", model) if model is not None else None
    memory = open_memory(store, entity, embedder=embedder)
    memory.session.load_graph()
    return memory


def _rows(store: Store, entity: str | None = None) -> list[tuple[str, str, int]]:
    """(entity name, node id, dimension) of every stored vector."""
    table, entities = EMBEDDINGS, TABLES.entities
    query = select(entities.c.name, table.c.node_id, table.c.dimension).join(
        entities, entities.c.id == table.c.entity_id
    )
    if entity is not None:
        query = query.where(entities.c.name == entity)
    with read_transaction(store._context.engine, store.target) as connection:
        return sorted(tuple(row) for row in connection.execute(query))  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# Writing vectors


def test_node_text_is_names_and_description_capped() -> None:
    text = node_text({"name": "Apple Inc.", "aliases": ["Apple"], "description": "Phones."})
    assert text == "Apple Inc.. also known as Apple. Phones."
    assert node_text({"ceo": "Tim Cook"}) == ""
    assert len(node_text({"name": "x", "description": "y" * 5000})) == 1000


def test_vectors_are_stored_per_entity_and_made_again_only_when_the_text_changes(
    store: Store,
) -> None:
    model = TrigramEmbeddings()
    fund = _memory(store, "fund", model)
    fund.commit(
        Changeset(
            added_nodes=(
                _org("apple", "Apple Inc.", description="Makes phones."),
                _org("nameless", "x", founded="1990-01-01"),
            )
        ),
        _provenance(),
    )
    assert _rows(store) == [("fund", "apple", DIMENSION), ("fund", "nameless", DIMENSION)]
    assert sorted(model.documents) == ["Apple Inc.. Makes phones.", "x"]

    # A property outside the text changes nothing; a new description is embedded again.
    fund.commit(
        Changeset(
            changed_nodes=(
                _org("apple", "Apple Inc.", description="Makes phones.", founded="1976-04-01"),
            )
        ),
        _provenance(),
    )
    assert model.calls == 1
    fund.commit(
        Changeset(changed_nodes=(_org("apple", "Apple Inc.", description="Makes computers."),)),
        _provenance(),
    )
    assert model.calls == 2 and model.documents[-1] == "Apple Inc.. Makes computers."
    stored = load_vectors(fund.session, "test:trigrams")
    assert np.allclose(stored["apple"], trigram_vector("Apple Inc.. Makes computers."), atol=1e-6)

    # A second entity's vectors are its own rows; removing a node drops its vector.
    other = _memory(store, "other", model)
    other.commit(Changeset(added_nodes=(_org("apple", "Apple Inc."),)), _provenance())
    assert [r[:2] for r in _rows(store)] == [
        ("fund", "apple"),
        ("fund", "nameless"),
        ("other", "apple"),
    ]
    fund.commit(Changeset(removed_nodes=("nameless",)), _provenance())
    assert [r[1] for r in _rows(store, "fund")] == ["apple"]

    # Deleting the entity takes its vectors along.
    store.delete_entity("fund")
    assert [r[0] for r in _rows(store)] == ["other"]


def test_embeddings_off_write_no_rows_and_call_nothing(store: Store) -> None:
    assert embedder_from_settings(MemorySettings()) is None
    store.create_entity("fund")
    memory = open_memory(store, "fund", settings=MemorySettings())
    assert memory.embedder is None
    memory.session.load_graph()
    memory.commit(Changeset(added_nodes=(_org("apple", "Apple Inc."),)), _provenance())
    memory.resolve(apply=True)
    assert memory.embed().embedded == 0
    assert embedding_relevance(memory.session, "Apple", ["apple"]) == {}
    assert _rows(store) == []


@pytest.mark.slow
def test_a_failing_endpoint_does_not_fail_the_commit_and_is_retried(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    model = TrigramEmbeddings()
    model.fail = True
    memory = _memory(store, "fund", model)
    with caplog.at_level(logging.WARNING, logger="kgot.memory.embeddings"):
        version = memory.commit(
            Changeset(added_nodes=(_org("apple", "Apple Inc."),)), _provenance()
        ).version
    assert version == memory.session.version
    assert "apple" in memory.session.load_graph()
    assert "embedding 1 node(s) of entity 'fund'" in caplog.text
    assert "the commit stands" in caplog.text
    assert pending_nodes(memory.session) == {"apple"}
    assert _rows(store) == []

    # The endpoint is back: the next write embeds its own node and the pending one.
    model.fail = False
    memory.commit(Changeset(added_nodes=(_org("ibm", "IBM"),)), _provenance())
    assert [r[1] for r in _rows(store)] == ["apple", "ibm"]
    assert pending_nodes(memory.session) == set()


@pytest.mark.slow
def test_a_commit_embeds_at_most_its_budget_and_the_rest_follow(store: Store) -> None:
    model = TrigramEmbeddings()
    store.create_entity("fund")
    embedder = NodeEmbedder("test:trigrams", model, batch_size=2, max_per_commit=3)
    memory = open_memory(store, "fund", embedder=embedder)
    memory.session.load_graph()
    nodes = tuple(_org(f"n{i}", f"Company {i}") for i in range(5))
    memory.commit(Changeset(added_nodes=nodes), _provenance())
    assert len(_rows(store)) == 3 and model.calls == 2  # batches of 2: 2 + 1
    assert pending_nodes(memory.session) == {"n3", "n4"}
    memory.commit(Changeset(added_nodes=(_org("n5", "Company 5"),)), _provenance())
    assert len(_rows(store)) == 6


def test_embed_catches_up_on_nodes_written_while_embeddings_were_off(store: Store) -> None:
    off = _memory(store, "fund", None)
    off.commit(
        Changeset(added_nodes=(_org("apple", "Apple Inc."), _org("ibm", "IBM"))), _provenance()
    )
    model = TrigramEmbeddings()
    memory = _memory(store, "fund", model)
    report = memory.embed()
    assert (report.embedded, report.unchanged) == (2, 0)
    report = memory.embed()
    assert (report.embedded, report.unchanged) == (0, 2)


# --------------------------------------------------------------------------------------------
# Reading vectors: one entity only


def test_similarity_and_relevance_never_see_another_entity(store: Store) -> None:
    model = TrigramEmbeddings()
    fund = _memory(store, "fund", model)
    fund.commit(
        Changeset(
            added_nodes=(
                _org("apple", "Apple Inc.", description="Phones and computers."),
                _org("shared", "Globex"),
            )
        ),
        _provenance(),
    )
    rival = _memory(store, "rival", model)
    rival.commit(
        Changeset(
            added_nodes=(
                _org("banana", "Banana Republic Holdings"),
                _org("shared", "Banana Republic Holdings"),
            )
        ),
        _provenance(),
    )
    assert fund.embedder is not None
    found = similar_nodes(fund.session, fund.embedder, "Banana Republic Holdings", limit=10)
    assert {node_id for node_id, _ in found} == {"apple", "shared"}
    # "shared" is scored by the fund's own vector (Globex), not the rival's equal-text one.
    assert dict(found)["shared"] < 0.5

    relevance = embedding_relevance(
        fund.session, "Banana Republic Holdings", ["apple", "shared", "banana"], fund.embedder
    )
    assert set(relevance) == {"apple", "shared"}
    assert all(0.0 <= score < 0.5 for score in relevance.values())
    own = embedding_relevance(
        fund.session, "Apple Inc.. Phones and computers.", ["apple"], fund.embedder
    )
    assert own["apple"] == pytest.approx(1.0, abs=1e-5)
    assert embedding_relevance(rival.session, "Globex", ["apple"], rival.embedder) == {}


def test_a_node_merged_away_is_no_longer_found(store: Store) -> None:
    model = SameVectorEmbeddings()
    memory = _memory(store, "fund", model)
    memory.commit(
        Changeset(added_nodes=(_org("a", "Microsoft"), _org("b", "Microsft"))), _provenance()
    )
    result = memory.resolve(apply=True)
    assert [(m.canonical, m.aliases) for m in result.merges] == [("a", ("b",))]
    assert memory.embedder is not None
    assert [n for n, _ in similar_nodes(memory.session, memory.embedder, "Microsoft")] == ["a"]


# --------------------------------------------------------------------------------------------
# Resolution: extra evidence, never the only one


@pytest.mark.slow
def test_similarity_is_extra_evidence_never_a_merge_on_its_own(store: Store) -> None:
    nodes = (
        _org("a", "Microsoft"),
        _org("b", "Microsft"),  # similar spelling: a suggestion by the name rules
        _org("c", "Oracle"),
        _org("d", "Salesforce"),  # unrelated names, the same vector
    )
    plain = _memory(store, "plain", None)
    plain.commit(Changeset(added_nodes=nodes), _provenance())
    without = plain.resolve()
    assert without.merges == ()
    assert [s.nodes for s in without.suggestions] == [("a", "b")]

    model = SameVectorEmbeddings()
    memory = _memory(store, "fund", model)
    memory.commit(Changeset(added_nodes=nodes), _provenance())
    with_vectors = memory.resolve()
    # Cosine 1 between every pair, yet only the pair the name rules relate merges.
    assert [(m.canonical, m.aliases) for m in with_vectors.merges] == [("a", ("b",))]
    assert "embeddings agree" in with_vectors.merges[0].reason
    assert with_vectors.suggestions == ()

    # Vectors that disagree (trigrams: cosine 0.74) add nothing; a dry run embeds what it
    # needs under the other model's name without storing it.
    trigrams = TrigramEmbeddings()
    dry = open_memory(store, "fund", embedder=NodeEmbedder("test:other", trigrams))
    dry_result = dry.resolve()
    assert dry_result.merges == ()
    assert [s.nodes for s in dry_result.suggestions] == [("a", "b")]
    assert sorted(trigrams.documents) == ["Microsft", "Microsoft"]  # the promotable pair only
    assert len(_rows(store, "fund")) == 4  # the commit's vectors; none of the dry run's


def test_stored_vectors_serve_resolution_without_calls(store: Store) -> None:
    model = SameVectorEmbeddings()
    memory = _memory(store, "fund", model)
    memory.commit(
        Changeset(added_nodes=(_org("a", "Microsoft"), _org("b", "Microsft"))), _provenance()
    )
    calls = model.calls
    assert [m.canonical for m in memory.resolve().merges] == ["a"]
    assert model.calls == calls  # both vectors were stored by the commit and still current


# --------------------------------------------------------------------------------------------
# Search: a blend, re-ranking lexical hits


class DirectionEmbeddings(TrigramEmbeddings):
    """Texts naming Omega or Zeta point one way, all others the other way; queries point
    Omega's way."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        super().embed_documents(texts)
        return [self._direction(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        super().embed_query(text)
        return [1.0, 0.0]

    @staticmethod
    def _direction(text: str) -> list[float]:
        lowered = text.casefold()
        return [1.0, 0.0] if "omega" in lowered or "zeta" in lowered else [0.0, 1.0]


@pytest.mark.slow
def test_search_blends_the_cosine_into_lexical_relevance(store: Store) -> None:
    nodes = (_org("alpha", "Bank Alpha"), _org("omega", "Bank Omega"), _org("zeta", "Zeta Corp"))
    plain = _memory(store, "plain", None)
    plain.commit(Changeset(added_nodes=nodes), _provenance())
    lexical = {hit.id: hit.parts.relevance for hit in plain.search("bank")}
    assert set(lexical) == {"alpha", "omega"}
    assert lexical["alpha"] == pytest.approx(lexical["omega"])

    model = DirectionEmbeddings()
    memory = _memory(store, "fund", model)
    memory.commit(Changeset(added_nodes=nodes), _provenance())
    hits = memory.search("bank")
    assert [hit.id for hit in hits] == ["omega", "alpha"]
    blended = {hit.id: hit.parts.relevance for hit in hits}
    assert blended["omega"] == pytest.approx(0.7 * lexical["omega"] + 0.3)
    assert blended["alpha"] == pytest.approx(0.7 * lexical["alpha"])
    # Zeta's vector matches the query perfectly, but it shares no word with it: never a hit.
    assert "zeta" not in blended
    assert model.queries == ["bank"]

    # The endpoint fails on the query: the search still answers, on lexical relevance.
    model.fail = True
    assert {hit.id: hit.parts.relevance for hit in memory.search("bank")} == lexical


# --------------------------------------------------------------------------------------------
# Settings


def test_settings_without_a_provider_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="names no provider"):
        embedder_from_settings(MemorySettings(embeddings="text-embedding-3-small"))
    with pytest.raises(ConfigError, match=r"unknown|not supported|provider"):
        embedder_from_settings(MemorySettings(embeddings="nosuchprovider:model"))


# --------------------------------------------------------------------------------------------
# Over the wire: an OpenAI-compatible /v1/embeddings server on loopback


class _EmbeddingsServer(LoopbackHTTPServer):
    requests: list[dict[str, Any]]
    headers_seen: list[dict[str, str]]
    status: int


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _EmbeddingsServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.requests.append(body)
        self.server.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        if not self.path.rstrip("/").endswith("/embeddings") or self.server.status != 200:
            self._send(self.server.status if self.server.status != 200 else 404, {"error": {}})
            return
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for index, text in enumerate(texts):
            vector = trigram_vector(str(text))
            if body.get("encoding_format") == "base64":
                raw = np.asarray(vector, dtype="<f4").tobytes()
                encoded: Any = base64.b64encode(raw).decode()
            else:
                encoded = vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def embeddings_server() -> Iterator[_EmbeddingsServer]:
    server = _EmbeddingsServer(("127.0.0.1", 0), _EmbeddingsHandler)
    server.requests, server.headers_seen, server.status = [], [], 200
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.slow
def test_an_openai_compatible_base_url_embeds_over_http(
    store: Store, embeddings_server: _EmbeddingsServer
) -> None:
    port = embeddings_server.server_address[1]
    settings = MemorySettings(
        embeddings="openai:local-embed",
        embeddings_base_url=f"http://127.0.0.1:{port}/v1",
        embeddings_api_key="secret-key",
    )
    store.create_entity("fund")
    memory = open_memory(store, "fund", settings=settings)
    assert memory.embedder is not None and memory.embedder.model == "openai:local-embed"
    memory.session.load_graph()
    memory.commit(
        Changeset(added_nodes=(_org("apple", "Apple Inc.", description="Phones."),)),
        _provenance(),
    )
    [request] = embeddings_server.requests
    assert request["model"] == "local-embed"  # the provider prefix is not sent
    assert request["input"] == ["Apple Inc.. Phones."]  # text, not token ids
    assert embeddings_server.headers_seen[0]["authorization"] == "Bearer secret-key"
    stored = load_vectors(memory.session, "openai:local-embed")
    assert np.allclose(stored["apple"], trigram_vector("Apple Inc.. Phones."), atol=1e-6)
    relevance = embedding_relevance(memory.session, "Apple Inc.", ["apple"], memory.embedder)
    assert 0.5 < relevance["apple"] <= 1.0

    # The server fails: the commit still lands, the node waits for the next write.
    embeddings_server.status = 400
    version = memory.commit(Changeset(added_nodes=(_org("ibm", "IBM"),)), _provenance()).version
    assert version == memory.session.version and "ibm" in memory.session.load_graph()
    assert pending_nodes(memory.session) == {"ibm"}
    assert set(load_vectors(memory.session, "openai:local-embed")) == {"apple"}


def test_a_base_url_alone_turns_embeddings_on_with_the_default_model() -> None:
    embedder = embedder_from_settings(MemorySettings(embeddings_base_url="http://127.0.0.1:9/v1"))
    assert embedder is not None and embedder.model == "text-embedding-3-small"


# --------------------------------------------------------------------------------------------
# Entity runs and the CLI

WRITE_CITIES = """```python
G.add_node("lyon", label="Place", name="Lyon", country="France")
G.add_node("france", label="Place", name="France")
G.add_edge("lyon", "france", relationship="located_in")
```"""


@pytest.mark.slow
def test_an_entity_run_embeds_what_its_commits_write(
    run: Callable[..., AskResult],
    store_settings: Settings,
    facts_file: Path,
    embeddings_server: _EmbeddingsServer,
) -> None:
    port = embeddings_server.server_address[1]
    memory_settings = store_settings.memory.model_copy(
        update={"embeddings_base_url": f"http://127.0.0.1:{port}/v1"}
    )
    settings = store_settings.model_copy(update={"memory": memory_settings})
    with open_store(settings.store.db) as store:
        store.create_entity("atlas")
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [inspect_call(facts_file)],
            "update_graph": [WRITE_CITIES],
            "query": ["```python\nresult = sorted(G.nodes)\n```"],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("Lyon")],
        }
    )
    result = run(scripted, entity="atlas", settings=settings)
    assert result.answer == "Lyon"
    assert sorted(text for r in embeddings_server.requests for text in r["input"]) == [
        "France",
        "Lyon",
    ]
    with open_store(settings.store.db) as store:
        assert [r[1] for r in _rows(store, "atlas")] == ["france", "lyon"]


@pytest.mark.slow
def test_cli_embed_resolve_and_search_use_the_configured_embeddings(
    store_url: str,
    tmp_path: Path,
    embeddings_server: _EmbeddingsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with open_store(store_url) as store:
        store.create_entity("fund")
        session = store.session("fund")
        session.load_graph()
        session.commit(
            Changeset(added_nodes=(_org("a", "Microsoft"), _org("b", "Microsft"))),
            _provenance(),
        )
    port = embeddings_server.server_address[1]
    config = tmp_path / "config.toml"
    config.write_text(
        "[memory]\n"
        f'embeddings_base_url = "http://127.0.0.1:{port}/v1"\n'
        'embeddings = "local-embed"\n'
        "embedding_similarity = 0.7\n"  # the trigram cosine of the two spellings is 0.74
    )
    base = ("--config", str(config))
    db = ("--db", store_url)

    code = main([*base, "memory", "embed", "--entity", "fund", "--json", *db])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out) == {"embedded": 2, "unchanged": 0}
    assert [r["model"] for r in embeddings_server.requests] == ["local-embed"]

    code = main([*base, "memory", "search", "--entity", "fund", "Microsoft", "--json", *db])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [row["id"] for row in json.loads(out)] == ["a"]
    assert embeddings_server.requests[-1]["input"] == ["Microsoft"]  # the query

    code = main([*base, "memory", "resolve", "--entity", "fund", "--json", *db])
    out, err = capsys.readouterr()
    assert code == 0, err
    [merge] = json.loads(out)["merges"]
    assert merge["aliases"] == ["b"] and "embeddings agree" in merge["reason"]

    # Without the settings the same graph only gets a suggestion, and `embed` refuses.
    (tmp_path / "none.toml").write_text("")
    code = main(
        [
            "--config",
            str(tmp_path / "none.toml"),
            "memory",
            "resolve",
            "--entity",
            "fund",
            "--json",
            *db,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["merges"] == []
    code = main(
        ["--config", str(tmp_path / "none.toml"), "memory", "embed", "--entity", "fund", *db]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert err.strip().splitlines() == [
        'kgot: error: embeddings are off: set [memory] embeddings = "provider:model" or '
        "[memory] embeddings_base_url in the config file (see docs/memory.md)"
    ]


@pytest.mark.slow
def test_cli_embed_reports_a_failing_endpoint_in_one_line(
    store_url: str,
    tmp_path: Path,
    embeddings_server: _EmbeddingsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with open_store(store_url) as store:
        store.create_entity("fund")
        session = store.session("fund")
        session.load_graph()
        session.commit(Changeset(added_nodes=(_org("a", "Microsoft"),)), _provenance())
    embeddings_server.status = 400
    config = tmp_path / "config.toml"
    port = embeddings_server.server_address[1]
    config.write_text(f'[memory]\nembeddings_base_url = "http://127.0.0.1:{port}/v1"\n')
    code = main(["--config", str(config), "memory", "embed", "--entity", "fund", "--db", store_url])
    _, err = capsys.readouterr()
    assert code == 1
    [line] = err.strip().splitlines()
    assert line.startswith("kgot: error: the embedding model 'text-embedding-3-small' failed:")
