"""An ingestion is a recorded run: `kgot runs show` names what it wrote (its commits), its
steps and the model calls in them; a failed one is recorded as failed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller.ingest import Ingestor
from kgot.errors import ModelError
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import open_store
from kgot.tests.support.command_line import run_cli
from kgot.tracing import ModelCall
from kgot.tracing.events import TRACE_ADAPTER, GraphUpdated, RunFinished, RunStarted, StepStarted

TEXT = "Zeta Dynamics has its head office in Cupertino."
ADD_ZETA = """```python
G.add_node("zeta", label="Organization", name="Zeta Dynamics")
G.add_node("cupertino", label="Place", name="Cupertino")
G.add_edge("zeta", "cupertino", relationship="located_in")
```"""


def _ingest(settings: Settings, script: dict[str, Any], *texts: str) -> str:
    """Ingest ``texts`` in one ingestor on entity acme; return its run id."""
    model = ScriptedChatModel(script=script)

    async def go() -> str:
        with open_store(settings.store.db) as store:
            if "acme" not in {entity.name for entity in store.list_entities()}:
                store.create_entity("acme")
            async with Ingestor(
                store, "acme", settings, models={"planning": model, "execution": model}
            ) as ingestor:
                for number, text in enumerate(texts, 1):
                    report = await ingestor.ingest(text, source_ref=f"note{number}.md")
                    assert report.run_id == ingestor.run_id
                return ingestor.run_id

    return asyncio.run(go())


@pytest.mark.slow
def test_an_ingestion_is_a_run_that_shows_what_it_wrote(
    settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _ingest(settings, {"update_graph": [ADD_ZETA]}, TEXT)

    with open_store(settings.store.db) as store:
        record = store.get_run(run_id)
        commits = store.run_commits(run_id)
        events = TRACE_ADAPTER.validate_python(store.run_events(run_id))
    assert record is not None and run_id.startswith("ingest-")
    assert (record.kind, record.status, record.entity) == ("ingest", "done", "acme")
    assert record.answer is not None and record.answer.startswith("note1.md: ")
    assert [(c.entity, c.version, c.source_ref) for c in commits] == [("acme", 1, "note1.md")]

    started, finished = events[0], events[-1]
    assert isinstance(started, RunStarted) and started.kind == "ingest"
    assert isinstance(finished, RunFinished) and finished.status == "done"
    [step] = [e for e in events if isinstance(e, StepStarted)]
    assert step.step == "ingest" and step.parent_span_id == started.span_id
    [call] = [e for e in events if isinstance(e, ModelCall)]
    assert call.step == "update_graph" and call.parent_span_id == step.span_id
    assert record.totals is not None and record.totals["llm_calls"] == 1
    assert [e.span_id for e in events if isinstance(e, GraphUpdated)] == [step.span_id]

    monkeypatch.setenv("KGOT_DB", settings.store.db)
    code, out, err = run_cli(capsys, "runs", "show", run_id)
    assert code == 0, err
    assert "kind         ingest" in out and "commits      1 commit" in out
    assert "  acme v1 update_graph: " in out and "      from note1.md" in out
    assert "— ingestion started" in out and "run done" in out


@pytest.mark.slow
def test_an_ingestion_that_raises_is_recorded_as_failed(settings: Settings) -> None:
    script = {"update_graph": [{"$error": "bad_request"}]}
    with pytest.raises(ModelError):
        _ingest(settings, script, TEXT)
    with open_store(settings.store.db) as store:
        [record] = [run for run in store.list_runs() if run.kind == "ingest"]
        events = TRACE_ADAPTER.validate_python(store.run_events(record.run_id))
    assert record.status == "failed" and record.totals is not None
    assert record.totals["failed_llm_calls"] >= 1 and record.totals["error"]
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"
