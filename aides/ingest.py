"""``ingest_text``: add a text to an entity's graph ("add this to memory"), and reading a
document into such a text.

The work is the controller's INSERT path without a vote (:mod:`kgot.controller.ingest`): graph
code is written for the text, run in the sandbox, checked against the entity's types, fixed when
it fails and committed with provenance; the entity's memory applies its write-time rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgot.controller import Ingestor, IngestReport, TextTooLongError, check_ingestion
from kgot.errors import UsageError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from kgot.config import Settings
    from kgot.persistence import Store

__all__ = [
    "IngestReport",
    "TextTooLongError",
    "ingest_text",
    "ingest_text_async",
    "read_document",
]


async def ingest_text_async(
    store: Store,
    entity: str,
    text: str,
    *,
    source_ref: str | None = None,
    confidence: float | None = None,
    model: str | BaseChatModel | None = None,
    settings: Settings | None = None,
    title: str | None = None,
    result_key: str | None = None,
    max_chars: int | None = None,
    max_cost_usd: float | None = None,
) -> IngestReport:
    """:func:`ingest_text` inside an event loop."""
    settings, models = _model_settings(settings, model)
    # Refused here before the sandbox is started and the graph loaded (the ingestion checks
    # the same again, for callers of the Ingestor).
    check_ingestion(
        settings,
        text,
        confidence=confidence,
        max_chars=max_chars,
        max_cost_usd=max_cost_usd,
    )
    async with Ingestor(store, entity, settings, models=models) as ingestor:
        return await ingestor.ingest(
            text,
            source_ref=source_ref,
            title=title,
            confidence=confidence,
            result_key=result_key,
            max_chars=max_chars,
            max_cost_usd=max_cost_usd,
        )


def ingest_text(
    store: Store,
    entity: str,
    text: str,
    *,
    source_ref: str | None = None,
    confidence: float | None = None,
    model: str | BaseChatModel | None = None,
    settings: Settings | None = None,
    title: str | None = None,
    result_key: str | None = None,
    max_chars: int | None = None,
    max_cost_usd: float | None = None,
) -> IngestReport:
    """Add what ``text`` states to ``entity``'s graph and say what became of it.

    Args:
        store: an open store holding the entity.
        entity: the entity whose graph grows (it must exist).
        text: plain text or Markdown (see :func:`read_document` for files).
        source_ref: where the text came from (URL, path, "conversation 12"), kept on its facts.
        confidence: trust (0–1) of facts whose graph code sets none; default: ``[memory.trust]``
            ``ingest``, else ``default`` (0.7).
        model: ``"provider:model"`` for both roles, or a LangChain chat model; default: the
            configured models.
        settings: effective settings (default: environment and config file).
        title: a title, shown to the model with the text.
        result_key: names the work: a key the entity has a commit for writes nothing again
            (a long text is committed piece by piece, each under ``<key>/part <n>``).
        max_chars: the longest text taken (default ``[ingest] max_chars``, 300,000); a
            longer one is refused before any model call.
        max_cost_usd: stop between pieces once the model cost reaches this (default
            ``[ingest] max_cost_usd``, unset: no cap); needs the model's price.

    Returns:
        The :class:`IngestReport`: nodes and edges inserted, nodes updated, writes merged onto
        existing nodes, facts corroborated and superseded, and the commit's version. A text the
        cost cap stopped is ``not ok``; ``parts_done`` / ``parts_missing`` say which pieces were
        written, and ingesting it again with ``result_key=report.result_key`` writes only the
        missing ones.

    Raises:
        UsageError: empty text, confidence outside 0–1, a cap not above 0.
        TextTooLongError: the text is longer than ``max_chars`` (a :class:`UsageError`).
        EntityNotFoundError: no such entity.
        ConfigError: no model configured; a cost cap with a model whose price is unknown.
    """
    return asyncio.run(
        ingest_text_async(
            store,
            entity,
            text,
            source_ref=source_ref,
            confidence=confidence,
            model=model,
            settings=settings,
            title=title,
            result_key=result_key,
            max_chars=max_chars,
            max_cost_usd=max_cost_usd,
        )
    )


def _model_settings(
    settings: Settings | None, model: str | BaseChatModel | None
) -> tuple[Settings, Mapping[str, Any] | None]:
    from kgot.config import load_settings

    if isinstance(model, str):
        return load_settings({"llm.model": model}) if settings is None else _with_model(
            settings, model
        ), None
    settings = settings or load_settings()
    if model is None:
        return settings, None
    return settings, {"planning": model, "execution": model}


def _with_model(settings: Settings, model: str) -> Settings:
    from kgot.config import with_options

    return with_options(settings, {}, {"llm": {"model": model}})


async def read_document(path: Path, settings: Settings) -> tuple[str, str | None]:
    """The text of the file at ``path`` and its title, if it has one.

    Text and Markdown are read as they are; HTML, PDF, Office files, JSON, CSV … go through
    :func:`kgot.documents.read_document`, whose parsers run in the sandbox's conversion workers
    (parsing untrusted bytes never happens in this process).

    Raises:
        UsageError: the file is missing, unreadable, or in a format kgot does not read.
    """
    from kgot import documents

    outcome = await documents.read_document(path, settings)
    if isinstance(outcome, documents.DocumentText):
        return outcome.text, outcome.title
    if outcome.problem == "missing":
        raise UsageError(f"{path} does not exist or is not a file")
    if outcome.problem == "unreadable":
        raise UsageError(f"cannot read {path} ({outcome.detail})")
    if outcome.problem == "not_a_document":
        raise UsageError(
            f"{path} is not a document kgot reads (text, Markdown, HTML, PDF, Office, JSON, "
            "CSV, XML, EPUB); convert it to text first"
        )
    raise UsageError(f"cannot read {path}: {outcome.detail}")
