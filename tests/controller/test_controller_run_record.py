"""The run's record: every trace event kept in the store, in order, across resumes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller import AskResult, ask_async, resume_async, run_record
from kgot.controller.run_record import STORED_TEXT_CHARS, stored_event
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import open_store
from kgot.tests.controller.scripts import (
    ADD_PARIS,
    QUERY_PARIS,
    inspect_call,
    paris_in_one_round,
    solution,
    votes,
)
from kgot.tracing.events import (
    TRACE_ADAPTER,
    Code,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    TraceEvent,
    dump_trace,
)


def _recorded(settings: Settings, run_id: str) -> list[TraceEvent]:
    with open_store(settings.store.db) as store:
        return TRACE_ADAPTER.validate_python(store.run_events(run_id))


def _ask(settings: Settings, facts_file: Path, model: ScriptedChatModel, run_id: str) -> AskResult:
    return asyncio.run(
        ask_async(
            "What is the population of Paris?",
            settings=settings,
            attachments=[facts_file],
            run_id=run_id,
            models={"planning": model, "execution": model},
        )
    )


def assert_spans_are_whole(events: list[TraceEvent]) -> None:
    """Every step_started is closed by the step_finished of the same span and step before
    the next step starts."""
    open_span: StepStarted | None = None
    for event in events:
        if isinstance(event, StepStarted):
            assert open_span is None, f"{event.step} started inside {open_span}"
            open_span = event
        elif isinstance(event, StepFinished):
            assert open_span is not None and open_span.span_id == event.span_id
            assert open_span.step == event.step
            open_span = None
    assert open_span is None


@pytest.mark.slow
def test_the_store_keeps_the_runs_trace_as_it_happened(
    store_settings: Settings, facts_file: Path
) -> None:
    model = ScriptedChatModel(script=paris_in_one_round(facts_file))
    result = _ask(store_settings, facts_file, model, "recorded")

    recorded = _recorded(store_settings, "recorded")
    # The same events in the same order (no text here is long enough to be cut).
    assert dump_trace(recorded) == dump_trace(result.trace)
    assert [e.type for e in recorded][:2] == ["run_started", "step_started"]
    assert recorded[-1].type == "run_finished"
    assert_spans_are_whole(recorded)
    steps = [e.step for e in recorded if isinstance(e, StepFinished)]
    assert steps == ["decide", "update_graph", "decide", "retrieve", "math_check", "solve"]


@pytest.mark.slow
def test_runs_never_mix_their_events(store_settings: Settings, facts_file: Path) -> None:
    first = _ask(
        store_settings, facts_file, ScriptedChatModel(script=paris_in_one_round(facts_file)), "a"
    )
    second = _ask(
        store_settings, facts_file, ScriptedChatModel(script=paris_in_one_round(facts_file)), "b"
    )
    for result in (first, second):
        recorded = _recorded(store_settings, result.run_id)
        assert dump_trace(recorded) == dump_trace(result.trace)
        starts = [e for e in recorded if isinstance(e, RunStarted)]
        assert [start.run_id for start in starts] == [result.run_id]


def _interrupt(_: Any) -> Any:
    raise KeyboardInterrupt  # what Ctrl-C raises in the middle of a model call


@pytest.mark.slow
def test_a_resumed_run_appends_after_what_the_stopped_one_recorded(
    store_settings: Settings, facts_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No write at a step's end: what the stopped run recorded was written as it stopped.
    monkeypatch.setattr(run_record, "FLUSH_INTERVAL_S", 3600.0)
    first = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [inspect_call(facts_file)],
            "update_graph": [ADD_PARIS],
            "query": [_interrupt],
        }
    )
    seen: list[TraceEvent] = []
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(
            ask_async(
                "What is the population of Paris?",
                settings=store_settings,
                attachments=[facts_file],
                run_id="stopped",
                models={"planning": first, "execution": first},
                on_event=seen.append,
            )
        )
    before = _recorded(store_settings, "stopped")
    assert before and dump_trace(before) == dump_trace(seen)
    # The stopped invocation's trace ends (its root span closes) as interrupted.
    stopped = before[-1]
    assert isinstance(stopped, RunFinished) and stopped.status == "interrupted"

    second = ScriptedChatModel(
        script={
            "query": [QUERY_PARIS],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("2102650")],
        }
    )
    resumed = asyncio.run(
        resume_async(
            "stopped", settings=store_settings, models={"planning": second, "execution": second}
        )
    )
    after = _recorded(store_settings, "stopped")
    assert dump_trace(after) == dump_trace(before) + dump_trace(resumed.trace)
    starts = [e for e in after if isinstance(e, RunStarted)]
    assert [start.resumed for start in starts] == [False, True]
    assert after[-1].type == "run_finished"


def test_long_texts_are_cut_in_the_stored_copy_only() -> None:
    code = "x = 1\n" * 2_000  # 12,000 characters
    event = Code(iteration=1, purpose="update_graph", attempt=1, code=code)
    stored = stored_event(event)
    kept = stored["code"]
    assert isinstance(kept, str) and kept.startswith(code[:STORED_TEXT_CHARS])
    assert kept.endswith(f"… [{len(code) - STORED_TEXT_CHARS} more characters]")
    assert event.code == code  # the event itself (the result's trace, on_event) is whole
    [again] = TRACE_ADAPTER.validate_python([stored])  # still a valid event
    assert isinstance(again, Code) and again.attempt == 1


@pytest.mark.slow
def test_a_store_that_cannot_take_the_events_does_not_end_the_run(
    run: Callable[..., AskResult],
    settings: Settings,
    facts_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kgot.errors import StoreError
    from kgot.persistence import Store

    def refuse(*_: Any, **__: Any) -> int:
        raise StoreError("database is locked")

    monkeypatch.setattr(Store, "append_run_events", refuse)
    result = run(ScriptedChatModel(script=paris_in_one_round(facts_file)), run_id="unrecorded")
    assert result.status == "answered" and result.answer == "2102650"
    assert "could not record" in caplog.text and "database is locked" in caplog.text
    monkeypatch.undo()
    assert _recorded(settings, "unrecorded") == []


def _step(kind: type[StepStarted] | type[StepFinished], span: str) -> TraceEvent:
    if kind is StepStarted:
        return StepStarted(iteration=1, step="decide", span_id=span)
    from kgot.tracing import empty_usage

    return StepFinished(
        iteration=1, step="decide", span_id=span, duration_s=0.1, ok=True, usage=empty_usage()
    )


def test_events_are_written_in_batches_and_kept_when_a_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kgot.errors import StoreError

    with open_store(str(tmp_path / "kgot.db")) as store:
        store.start_run("batched", "Q?", None, {})
        recorder = run_record.EventRecorder(store, "batched")
        monkeypatch.setattr(run_record, "FLUSH_INTERVAL_S", 3600.0)
        recorder.add(_step(StepStarted, "a"))
        recorder.add(_step(StepFinished, "a"))
        recorder.wait()
        assert store.run_events("batched") == []  # within the interval: still buffered

        monkeypatch.setattr(run_record, "FLUSH_INTERVAL_S", 0.0)
        real_append = store.append_run_events
        failures = iter([StoreError("database is locked")])

        def once_locked(*args: Any, **kwargs: Any) -> int:
            for failure in failures:
                raise failure
            return real_append(*args, **kwargs)

        monkeypatch.setattr(store, "append_run_events", once_locked)
        recorder.add(_step(StepStarted, "b"))
        recorder.add(_step(StepFinished, "b"))  # the write fails: all four stay buffered
        recorder.wait()
        assert store.run_events("batched") == []
        monkeypatch.setattr(run_record, "FLUSH_INTERVAL_S", 3600.0)
        recorder.add(
            RunFinished(iteration=1, status="answered", answer="x", error=None, span_id="run")
        )
        recorder.wait()
        recorded = TRACE_ADAPTER.validate_python(store.run_events("batched"))
    assert [(e.type, e.span_id) for e in recorded] == [
        ("step_started", "a"),
        ("step_finished", "a"),
        ("step_started", "b"),
        ("step_finished", "b"),
        ("run_finished", "run"),
    ]


@pytest.mark.slow
def test_a_write_waiting_for_a_locked_database_never_holds_the_caller(tmp_path: Path) -> None:
    """``add`` runs on the run's event loop: while another process holds SQLite's write lock,
    the write waits on its own thread and the caller goes on at once."""
    import sqlite3
    import time

    path = tmp_path / "kgot.db"
    with open_store(str(path)) as store:
        store.start_run("locked", "Q?", None, {})
        recorder = run_record.EventRecorder(store, "locked")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another writer holds the database
        try:
            started = time.monotonic()
            recorder.add(_step(StepStarted, "a"))
            recorder.add(RunFinished(iteration=1, status="answered", answer="x", error=None))
            held = time.monotonic() - started
            time.sleep(0.5)
            assert store.run_events("locked") == []  # still waiting for the lock
        finally:
            other.execute("COMMIT")
            other.close()
        recorder.wait()
        recorded = TRACE_ADAPTER.validate_python(store.run_events("locked"))
    assert held < 0.2
    assert [event.type for event in recorded] == ["step_started", "run_finished"]
