"""Fixtures for controller tests: real store, sandbox, backend and tools; scripted models."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings, load_settings
from kgot.controller import AskResult, ask_async
from kgot.llm.scripted import ScriptedChatModel
from kgot.tests.controller.scripts import FACTS


@pytest.fixture
def facts_file(tmp_path: Path) -> Path:
    path = tmp_path / "cities.txt"
    path.write_text(FACTS, encoding="utf-8")
    return path


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        {
            "store.db": str(tmp_path / "kgot.db"),
            "controller.votes": 5,
            "llm.structured_retries": 1,
            "llm.model": "scripted",
        }
    )


@pytest.fixture
def run(settings: Settings, facts_file: Path) -> Callable[..., AskResult]:
    """Run a question with one scripted model serving both roles."""

    def go(
        model: ScriptedChatModel, question: str = "What is the population of Paris?", **options: Any
    ) -> AskResult:
        chosen = options.pop("settings", settings)
        return asyncio.run(
            ask_async(
                question,
                settings=chosen,
                attachments=options.pop("attachments", [facts_file]),
                models={"planning": model, "execution": model},
                **options,
            )
        )

    return go


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_settings(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Settings]:
    """``settings`` with the store on SQLite, or on PostgreSQL in a schema of its own."""
    if request.param == "sqlite":
        yield settings
        return
    from kgot.tests.persistence.conftest import POSTGRES_URL, drop_schema, postgres_unreachable

    reason = postgres_unreachable()
    if reason:
        pytest.skip(reason)
    schema = f"kgot_test_{uuid.uuid4().hex[:12]}"
    store = settings.store.model_copy(update={"db": f"{POSTGRES_URL}?schema={schema}"})
    yield settings.model_copy(update={"store": store})
    drop_schema(schema)
