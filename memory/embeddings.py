"""Optional node embeddings for one entity's memory (issue 15, "Embeddings (optional)").

Off by default: nothing here runs, no table row is written and no endpoint is called unless
``[memory] embeddings = "provider:model"`` (LangChain's ``init_embeddings``) or
``[memory] embeddings_base_url`` (any OpenAI-compatible ``/v1/embeddings`` server, through
``langchain_openai.OpenAIEmbeddings``) is set; :func:`embedder_from_settings` builds the
embedder, ``None`` when off.

What is embedded. A node's *text*: its ``name`` (or ``title``), its ``aliases`` and its
descriptive properties (``description``, ``summary``, ``definition``), capped at
:data:`MAX_TEXT_CHARS` characters (:func:`node_text`). Each vector is stored with the sha256 of
the text it came from, so a node is embedded again only when that text changes.

Where vectors live. In the store, beside the facts: table ``kgot_embeddings`` (migration 2,
declared by :mod:`kgot.memory.schema`), one row per (entity, model, node), the vector as
unit-length float32 bytes. Rows are never fact versions: reading or writing them changes no
graph version. Every statement here is scoped by the session's entity id in SQL; another
entity's vectors are never read. Rows go with their entity when it is deleted; a node's rows go
when a commit removes it, and similarity reads only look at the entity's *current* nodes, so a
merged-away node's vector is never found.

Similarity search: a numpy scan. sqlite-vec and pgvector were the first choice, and neither can
be used on the machines this was built on: the ``sqlite_vec`` package is installed (a
dependency of langgraph-checkpoint-sqlite), but this Python's ``sqlite3`` module is compiled
without ``enable_load_extension``, so the extension cannot be loaded; and the PostgreSQL server
offers no ``vector`` extension (``pg_available_extensions`` has no such row). So the entity's
vectors of one model are read with one entity-scoped query and compared by a matrix product in
numpy. That is exact (no approximate index) and fast enough for one entity's graph (10,000
vectors of 1,536 dimensions are 60 MB and one product), and the same on both databases.

What vectors influence:

* **Resolution** (:func:`vector_lookup`, used by ``Memory.resolve``): a pair the name rules put
  in the *similar spelling* suggestion band becomes a merge when the two nodes' cosine is above
  ``embedding_similarity`` (0.92). Extra evidence only: a pair the name rules do not relate is
  never merged nor suggested because of its vectors (see :mod:`kgot.memory.resolution`).
* **Search relevance** (:func:`embedding_relevance`): the cosine of a query and each node,
  clipped to 0–1, which ``kgot.memory.search`` may blend into its own relevance.

Writes. :func:`embed_after_commit` runs *after* a commit, outside its transaction: it embeds the
added and changed nodes whose text changed, in batches of :data:`BATCH_SIZE`, at most
:data:`MAX_PER_COMMIT` nodes per commit (the rest wait for the next write). When the endpoint
fails, the commit stands: a warning is logged and the nodes are kept as pending for this session,
retried with the next write; :func:`embed_nodes` embeds every node whose vector is missing or
stale (a catch-up after an outage in another process, or after embeddings were turned on).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, and_, delete, exists, or_, select

from kgot.errors import ConfigError
from kgot.memory.schema import EMBEDDINGS
from kgot.persistence import TABLES, utc_now

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from kgot.config import MemorySettings
    from kgot.graph_model import Changeset
    from kgot.memory.search import SearchHit
    from kgot.persistence import EntitySession

__all__ = [
    "BATCH_SIZE",
    "CANDIDATE_FACTOR",
    "EMBEDDING_SHARE",
    "MAX_PER_COMMIT",
    "MAX_TEXT_CHARS",
    "EmbedReport",
    "NodeEmbedder",
    "blended_relevance",
    "embed_after_commit",
    "embed_nodes",
    "embedder_for_writes",
    "embedder_from_settings",
    "embedding_relevance",
    "load_vectors",
    "node_text",
    "pending_nodes",
    "rerank",
    "similar_nodes",
    "vector_lookup",
]

log = logging.getLogger(__name__)

# A node's text is cut here: names and a description say what a thing is; more text only costs.
MAX_TEXT_CHARS = 1000
# Texts per request to the endpoint.
BATCH_SIZE = 64
# Nodes embedded after one commit; more wait for the next write (a bulk import must not turn
# its commit into minutes of embedding calls).
MAX_PER_COMMIT = 256
# The model asked for when only `embeddings_base_url` is set.
DEFAULT_COMPATIBLE_MODEL = "text-embedding-3-small"
# Seconds one request may take, and retries of a failed one, before the write gives up on it.
REQUEST_TIMEOUT = 30.0
REQUEST_RETRIES = 1

_NAME_PROPERTIES = ("name", "title")
_DESCRIPTIVE_PROPERTIES = ("description", "summary", "definition")
_IN_CHUNK = 500  # ids per IN (...) list


# --------------------------------------------------------------------------------------------
# The embedder


@dataclass(frozen=True)
class NodeEmbedder:
    """An embedding model and the name its vectors are stored under.

    ``model`` keys the stored vectors: vectors of another model are never compared with these
    (changing the model embeds every node again). ``similarity``: the cosine that counts as
    evidence of one thing in resolution.
    """

    model: str
    embeddings: Embeddings
    similarity: float = 0.92
    batch_size: int = BATCH_SIZE
    max_per_commit: int = MAX_PER_COMMIT

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Unit vectors for ``texts``, in batches of :attr:`batch_size`.

        Raises:
            ValueError: the endpoint answered with the wrong number of vectors, vectors of
                different lengths, or values that are not finite numbers.
            Exception: whatever the embedding client raises (network, HTTP errors).
        """
        vectors: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            answered = self.embeddings.embed_documents(batch)
            if len(answered) != len(batch):
                raise ValueError(
                    f"embedding model {self.model!r} returned {len(answered)} vectors for "
                    f"{len(batch)} texts"
                )
            vectors.extend(_unit(vector, self.model) for vector in answered)
        if vectors and len({v.shape for v in vectors}) > 1:
            raise ValueError(f"embedding model {self.model!r} returned vectors of mixed lengths")
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        """The unit vector of a search text (``embed_query``: some models embed queries apart)."""
        return _unit(self.embeddings.embed_query(text), self.model)


def embedder_from_settings(settings: MemorySettings) -> NodeEmbedder | None:
    """The embedder ``[memory]`` describes, or ``None`` when embeddings are off.

    * ``embeddings_base_url`` set → ``OpenAIEmbeddings`` at that URL, asking for the model
      ``embeddings`` names (an ``openai:``-style prefix is dropped; default
      :data:`DEFAULT_COMPATIBLE_MODEL`), with ``embeddings_api_key`` or a placeholder key;
    * else ``embeddings = "provider:model"`` → LangChain's ``init_embeddings``.

    Raises:
        ConfigError: ``embeddings`` has no provider (and no base URL is set), names a provider
            LangChain does not know, or needs a package that is not installed.
    """
    spec = (settings.embeddings or "").strip()
    base_url = (settings.embeddings_base_url or "").strip()
    if not spec and not base_url:
        return None
    api_key = (
        settings.embeddings_api_key.get_secret_value() if settings.embeddings_api_key else None
    )
    if base_url:
        from kgot.llm import served_model_name

        name = served_model_name(spec) or DEFAULT_COMPATIBLE_MODEL
        embeddings = _openai_compatible(name, base_url, api_key)
        return NodeEmbedder(spec or name, embeddings, settings.embedding_similarity)
    return NodeEmbedder(spec, _init_embeddings(spec, api_key), settings.embedding_similarity)


_RUN_EMBEDDERS: dict[tuple[Any, ...], NodeEmbedder | None] = {}
_RUN_EMBEDDERS_LOCK = threading.Lock()


def embedder_for_writes(settings: MemorySettings) -> NodeEmbedder | None:
    """:func:`embedder_from_settings` for a write path that must not fail on it (an entity
    run's commits): built once per distinct settings and kept; settings that cannot be set up
    log one warning and give ``None`` (no embeddings) instead of raising."""
    secret = settings.embeddings_api_key
    key = (
        settings.embeddings,
        settings.embeddings_base_url,
        secret.get_secret_value() if secret is not None else None,
        settings.embedding_similarity,
    )
    if key[0] is None and key[1] is None:
        return None
    with _RUN_EMBEDDERS_LOCK:
        if key in _RUN_EMBEDDERS:
            return _RUN_EMBEDDERS[key]
        try:
            embedder = embedder_from_settings(settings)
        except ConfigError as error:
            log.warning("embeddings stay off for this process: %s", error)
            embedder = None
        _RUN_EMBEDDERS[key] = embedder
        return embedder


def _openai_compatible(name: str, base_url: str, api_key: str | None) -> Embeddings:
    from langchain_openai import OpenAIEmbeddings
    from pydantic import SecretStr

    from kgot.llm import PLACEHOLDER_API_KEY

    try:
        return OpenAIEmbeddings(
            model=name,
            openai_api_base=base_url,
            openai_api_key=SecretStr(api_key or PLACEHOLDER_API_KEY),
            # Send the texts as text: token ids need tiktoken's tables (a download) and only
            # OpenAI's own servers accept them.
            check_embedding_ctx_length=False,
            chunk_size=BATCH_SIZE,
            max_retries=REQUEST_RETRIES,
            request_timeout=REQUEST_TIMEOUT,
        )
    except Exception as error:  # pydantic / SDK validation of the given values
        raise ConfigError(
            f"cannot set up the embeddings endpoint {base_url} (model {name!r}): "
            f"{_first_line(error)}; check [memory] embeddings_base_url"
        ) from None


def _init_embeddings(spec: str, api_key: str | None) -> Embeddings:
    from langchain.embeddings import init_embeddings

    provider, colon, name = spec.partition(":")
    if not colon or not provider or not name:
        raise ConfigError(
            f"[memory] embeddings = {spec!r} names no provider: write it as provider:model "
            "(e.g. openai:text-embedding-3-small), or set [memory] embeddings_base_url for an "
            "OpenAI-compatible server"
        )
    options: dict[str, Any] = {}
    if api_key is not None:
        options["api_key"] = api_key
    if provider in ("openai", "azure_openai"):
        options.update(check_embedding_ctx_length=False, max_retries=REQUEST_RETRIES)
    try:
        return init_embeddings(spec, **options)
    except ImportError as error:
        raise ConfigError(
            f"[memory] embeddings = {spec!r} needs a package that is not installed "
            f"({_first_line(error)})"
        ) from None
    except Exception as error:  # unknown provider, missing key, bad options
        raise ConfigError(
            f"cannot set up [memory] embeddings = {spec!r}: {_first_line(error)}"
        ) from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _unit(vector: Sequence[float], model: str) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"embedding model {model!r} returned a malformed vector")
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array


# --------------------------------------------------------------------------------------------
# A node's text


def node_text(properties: Mapping[str, Any]) -> str:
    """The text embedded for a node: name (or title), aliases, descriptive properties; empty
    when it has none (such a node is not embedded). Capped at :data:`MAX_TEXT_CHARS`."""
    parts: list[str] = []
    for key in _NAME_PROPERTIES:
        value = properties.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(value.strip())
    aliases = properties.get("aliases")
    if isinstance(aliases, str):
        aliases = [aliases]
    if isinstance(aliases, list | tuple):
        names = [a.strip() for a in aliases if isinstance(a, str) and a.strip()]
        names = [a for a in dict.fromkeys(names) if a not in parts]
        if names:
            parts.append("also known as " + ", ".join(names))
    for key in _DESCRIPTIVE_PROPERTIES:
        value = properties.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(value.strip())
    return ". ".join(parts)[:MAX_TEXT_CHARS]


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# Storage (every statement scoped by the session's entity id)

_table = EMBEDDINGS
_nodes = TABLES.nodes


@dataclass(frozen=True)
class _Scope:
    """The entity every statement here is scoped by. Vectors are not facts, so they are read
    and written here, in the session's entity-checked transactions
    (:meth:`EntitySession.read` / :meth:`EntitySession.write`), rather than through its fact
    methods."""

    session: EntitySession
    entity_id: int


def _scope(session: EntitySession) -> _Scope:
    return _Scope(session, session.entity_id)


def _chunks(items: Sequence[str], size: int = _IN_CHUNK) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _current_texts(
    connection: Connection, scope: _Scope, node_ids: Sequence[str] | None
) -> dict[str, str]:
    """Node id → text of the entity's current nodes (``node_ids`` only, when given)."""
    base = select(_nodes.c.node_id, _nodes.c.properties).where(
        _nodes.c.entity_id == scope.entity_id, _nodes.c.valid_to_version.is_(None)
    )
    queries = (
        [base]
        if node_ids is None
        else [base.where(_nodes.c.node_id.in_(part)) for part in _chunks(sorted(set(node_ids)))]
    )
    texts: dict[str, str] = {}
    for query in queries:
        for node_id, properties in connection.execute(query):
            texts[node_id] = node_text(properties if isinstance(properties, dict) else {})
    return texts


def _stored_hashes(
    connection: Connection, scope: _Scope, model: str, node_ids: Sequence[str]
) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in _chunks(sorted(set(node_ids))):
        rows = connection.execute(
            select(_table.c.node_id, _table.c.text_hash).where(
                _table.c.entity_id == scope.entity_id,
                _table.c.model == model,
                _table.c.node_id.in_(part),
            )
        )
        found.update({node_id: digest for node_id, digest in rows})
    return found


def _save(
    connection: Connection, scope: _Scope, model: str, rows: Sequence[tuple[str, np.ndarray, str]]
) -> None:
    """Insert or replace the vectors ``rows`` (node id, unit vector, text hash)."""
    if not rows:
        return
    now = utc_now()
    values = [
        {
            "entity_id": scope.entity_id,
            "model": model,
            "node_id": node_id,
            "dimension": int(vector.shape[0]),
            "vector": vector.astype("<f4").tobytes(),
            "text_hash": digest,
            "updated_at": now,
        }
        for node_id, vector, digest in rows
    ]
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    statement = insert(_table)
    upsert = statement.on_conflict_do_update(
        index_elements=[_table.c.entity_id, _table.c.model, _table.c.node_id],
        set_={
            "dimension": statement.excluded.dimension,
            "vector": statement.excluded.vector,
            "text_hash": statement.excluded.text_hash,
            "updated_at": statement.excluded.updated_at,
        },
    )
    connection.execute(upsert, values)


def _decode(blob: bytes, dimension: int) -> np.ndarray | None:
    vector = np.frombuffer(blob, dtype="<f4")
    return vector if vector.shape[0] == dimension else None


def load_vectors(
    session: EntitySession, model: str, node_ids: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """The stored unit vectors of ``model`` for the entity's current, unexpired nodes
    (``node_ids`` only, when given); nodes without one are absent."""
    scope = _scope(session)
    current = exists().where(
        _nodes.c.entity_id == _table.c.entity_id,
        _nodes.c.node_id == _table.c.node_id,
        _nodes.c.valid_to_version.is_(None),
        or_(_nodes.c.expires_at.is_(None), _nodes.c.expires_at > utc_now()),
    )
    base = select(_table.c.node_id, _table.c.dimension, _table.c.vector).where(
        _table.c.entity_id == scope.entity_id, _table.c.model == model, current
    )
    ids = None if node_ids is None else sorted(set(node_ids))
    queries = [base] if ids is None else [base.where(_table.c.node_id.in_(p)) for p in _chunks(ids)]
    found: dict[str, np.ndarray] = {}
    with scope.session.read() as connection:
        for query in queries:
            for node_id, dimension, blob in connection.execute(query):
                vector = _decode(bytes(blob), int(dimension))
                if vector is not None:
                    found[node_id] = vector
    return found


# --------------------------------------------------------------------------------------------
# Embedding nodes


@dataclass(frozen=True)
class EmbedReport:
    """What one embedding pass did: nodes embedded, nodes whose vector was current, nodes
    left pending (the endpoint failed, or over the per-commit budget; ``deferred`` names those
    over the budget), vectors removed."""

    embedded: int = 0
    unchanged: int = 0
    pending: int = 0
    removed: int = 0
    error: str | None = None
    deferred: tuple[str, ...] = ()


class _Pending:
    """Node ids whose embedding failed or was deferred, per live session (retried with the
    session's next write)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_session: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

    def take(self, session: EntitySession) -> set[str]:
        with self._lock:
            return set(self._by_session.pop(session, set()))

    def put(self, session: EntitySession, node_ids: Iterable[str]) -> None:
        ids = set(node_ids)
        if not ids:
            return
        with self._lock:
            self._by_session.setdefault(session, set()).update(ids)

    def peek(self, session: EntitySession) -> set[str]:
        with self._lock:
            return set(self._by_session.get(session, set()))


_PENDING = _Pending()


def pending_nodes(session: EntitySession) -> set[str]:
    """Node ids of ``session``'s entity waiting to be embedded (after a failure or over the
    budget of a commit); the next write retries them."""
    return _PENDING.peek(session)


def embed_nodes(
    session: EntitySession,
    embedder: NodeEmbedder,
    node_ids: Iterable[str] | None = None,
    *,
    limit: int | None = None,
) -> EmbedReport:
    """Embed the entity's current nodes (``node_ids`` only, when given, in that order) whose
    vector of ``embedder.model`` is missing or was made from another text; at most ``limit``
    of them (the others are reported as pending and ``deferred``, not embedded). Nodes without
    text are skipped.

    Raises:
        Exception: what the embedding endpoint raised; nothing was stored for the failed batch
            (batches before it are kept).
        EntityNotFoundError: the entity was deleted.
    """
    scope = _scope(session)
    ids = None if node_ids is None else list(dict.fromkeys(node_ids))
    with scope.session.read() as connection:
        texts = {k: v for k, v in _current_texts(connection, scope, ids).items() if v}
        stored = _stored_hashes(connection, scope, embedder.model, list(texts))
    order = ids if ids is not None else sorted(texts)
    stale = [n for n in order if n in texts and stored.get(n) != _text_hash(texts[n])]
    todo = stale if limit is None else stale[: max(0, limit)]
    embedded = 0
    for part in _chunks(todo, embedder.batch_size):
        vectors = embedder.embed_texts([texts[node_id] for node_id in part])
        rows = [
            (node_id, vector, _text_hash(texts[node_id]))
            for node_id, vector in zip(part, vectors, strict=True)
        ]
        with scope.session.write() as connection:
            _save(connection, scope, embedder.model, rows)
        embedded += len(rows)
    return EmbedReport(
        embedded=embedded,
        unchanged=len(texts) - len(stale),
        pending=len(stale) - len(todo),
        deferred=tuple(stale[len(todo) :]),
    )


def _remove(session: EntitySession, node_ids: Sequence[str]) -> int:
    """Delete every model's vectors of ``node_ids`` (nodes a commit removed)."""
    if not node_ids:
        return 0
    scope = _scope(session)
    removed = 0
    with scope.session.write() as connection:
        for part in _chunks(sorted(set(node_ids))):
            result = connection.execute(
                delete(_table).where(
                    and_(_table.c.entity_id == scope.entity_id, _table.c.node_id.in_(part))
                )
            )
            removed += int(result.rowcount or 0)
    return removed


def embed_after_commit(
    session: EntitySession, embedder: NodeEmbedder | None, changeset: Changeset
) -> EmbedReport:
    """After a commit of ``changeset``: embed its added and changed nodes (and the session's
    pending ones) whose text changed, drop the vectors of its removed nodes. Never raises for
    the endpoint: a failure is logged as a warning and the nodes stay pending for the next
    write; the commit stands either way. ``embedder`` None (embeddings off) does nothing.
    """
    if embedder is None:
        return EmbedReport()
    removed_ids = list(changeset.removed_nodes)
    written = {node.id for node in (*changeset.added_nodes, *changeset.changed_nodes)}
    wanted = (written | _PENDING.take(session)) - set(removed_ids)
    removed = 0
    try:
        removed = _remove(session, removed_ids)
        if not wanted:
            return EmbedReport(removed=removed)
        # This commit's nodes first, then those left from earlier writes; only nodes whose
        # text changed count against the budget.
        ordered = sorted(written - set(removed_ids)) + sorted(wanted - written)
        report = embed_nodes(session, embedder, ordered, limit=embedder.max_per_commit)
        _PENDING.put(session, report.deferred)
        return dataclasses.replace(report, removed=removed)
    except Exception as error:  # the endpoint (or its answer) failed: the commit stands
        from kgot.errors import EntityNotFoundError

        if isinstance(error, EntityNotFoundError):
            return EmbedReport(removed=removed)
        _PENDING.put(session, wanted)
        log.warning(
            "embedding %d node(s) of entity %r with %r failed (%s); the commit stands and they "
            "are retried with the next write",
            len(wanted),
            session.entity,
            embedder.model,
            _first_line(error),
        )
        return EmbedReport(pending=len(wanted), removed=removed, error=_first_line(error))


# --------------------------------------------------------------------------------------------
# Reading: resolution evidence, similarity, relevance


def vector_lookup(
    session: EntitySession,
    embedder: NodeEmbedder,
    *,
    store: bool,
) -> Callable[[Sequence[str]], dict[str, np.ndarray]]:
    """Node ids → vectors for :func:`kgot.memory.resolution.resolve` (``vector_lookup``):
    stored vectors whose text is current, the others embedded now (and stored when ``store``;
    a dry run embeds without writing). An endpoint failure leaves those nodes without a
    vector, so the name rules alone decide for them (a warning is logged)."""

    def lookup(node_ids: Sequence[str]) -> dict[str, np.ndarray]:
        scope = _scope(session)
        with scope.session.read() as connection:
            texts = {k: v for k, v in _current_texts(connection, scope, node_ids).items() if v}
            stored = _stored_hashes(connection, scope, embedder.model, list(texts))
        fresh = [n for n, text in texts.items() if stored.get(n) == _text_hash(text)]
        found = load_vectors(session, embedder.model, fresh) if fresh else {}
        missing = sorted(n for n in texts if n not in found)
        if not missing:
            return found
        try:
            vectors = embedder.embed_texts([texts[n] for n in missing])
        except Exception as error:
            log.warning(
                "embedding %d node(s) of entity %r for resolution failed (%s); the name rules "
                "decide alone for them",
                len(missing),
                session.entity,
                _first_line(error),
            )
            return found
        made = dict(zip(missing, vectors, strict=True))
        if store:
            rows = [(n, made[n], _text_hash(texts[n])) for n in missing]
            with scope.session.write() as connection:
                _save(connection, scope, embedder.model, rows)
        return {**found, **made}

    return lookup


def similar_nodes(
    session: EntitySession,
    embedder: NodeEmbedder,
    text: str,
    *,
    limit: int = 10,
    among: Iterable[str] | None = None,
) -> list[tuple[str, float]]:
    """The entity's current nodes whose stored vector is closest to ``text``'s: (node id,
    cosine), best first, at most ``limit`` (``among``: only these ids). Nodes without a
    vector are not found (see :func:`embed_nodes`).

    Raises:
        Exception: what the embedding endpoint raised for ``text``.
    """
    vectors = load_vectors(session, embedder.model, among)
    if not vectors or limit <= 0:
        return []
    query = embedder.embed_query(text)
    # A vector of another length was made by an earlier version of the model: skip it.
    ids = [node_id for node_id in sorted(vectors) if vectors[node_id].shape == query.shape]
    if not ids:
        return []
    scores = np.stack([vectors[node_id] for node_id in ids]) @ query
    order = np.argsort(-scores, kind="stable")[:limit]
    return [(ids[int(i)], float(scores[int(i)])) for i in order]


def embedding_relevance(
    session: EntitySession,
    query: str,
    ids: Iterable[str],
    embedder: NodeEmbedder | None = None,
) -> dict[str, float]:
    """Node id → relevance of the node to ``query`` by embeddings: the cosine of their
    vectors, clipped to 0–1. Only nodes among ``ids`` with a stored vector are scored (edges
    and nodes not yet embedded are absent); empty when ``embedder`` is None (embeddings off)
    or the endpoint fails on the query (logged: a search then ranks on its own relevance)."""
    wanted = list(dict.fromkeys(ids))
    if embedder is None or not wanted or not query.strip():
        return {}
    vectors = load_vectors(session, embedder.model, wanted)
    if not vectors:
        return {}
    try:
        target = embedder.embed_query(query)
    except Exception as error:
        log.warning(
            "embedding the search text for entity %r failed (%s); ranking without embeddings",
            session.entity,
            _first_line(error),
        )
        return {}
    return {
        node_id: float(min(1.0, max(0.0, float(vector @ target))))
        for node_id, vector in vectors.items()
        if vector.shape == target.shape
    }


# Search relevance: the lexical relevance of kgot.memory.search, blended with the cosine.
EMBEDDING_SHARE = 0.3
# Lexical candidates re-ranked per result asked for: embeddings re-order the facts that share
# words with the query; they never add a fact that shares none.
CANDIDATE_FACTOR = 4


def blended_relevance(lexical: float, cosine: float | None) -> float:
    """``(1 − EMBEDDING_SHARE)·lexical + EMBEDDING_SHARE·cosine``; ``lexical`` alone for a
    fact without a vector (an edge, a node not embedded yet)."""
    if cosine is None:
        return lexical
    return (1.0 - EMBEDDING_SHARE) * lexical + EMBEDDING_SHARE * cosine


def rerank(
    session: EntitySession,
    query: str,
    hits: Sequence[SearchHit],
    embedder: NodeEmbedder | None,
    *,
    limit: int,
) -> list[SearchHit]:
    """``hits`` (a search's candidates, best first) with each node's relevance blended with
    its cosine to ``query`` (:func:`blended_relevance`), re-sorted by score (ties keep their
    order) and cut to ``limit``. Unchanged when embeddings are off or give nothing."""
    node_ids = [hit.key[1] for hit in hits if hit.key[0] == "node"]
    cosines = embedding_relevance(session, query, node_ids, embedder)
    if not cosines:
        return list(hits)[:limit]
    blended: list[SearchHit] = []
    for hit in hits:
        cosine = cosines.get(hit.key[1]) if hit.key[0] == "node" else None
        if cosine is None:
            blended.append(hit)
            continue
        parts = dataclasses.replace(
            hit.parts, relevance=blended_relevance(hit.parts.relevance, cosine)
        )
        blended.append(dataclasses.replace(hit, parts=parts))
    blended.sort(key=lambda hit: -hit.score)
    return blended[:limit]
