"""The OpenTelemetry exporter: a real run's spans in an in-memory exporter, nested as kgot's."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from kgot.config import Settings
from kgot.controller import AskResult
from kgot.llm.scripted import ScriptedChatModel
from kgot.tests.controller.scripts import paris_in_one_round
from kgot.tracing import ModelCall
from kgot.tracing.events import StepStarted

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from kgot.tracing import otel

Run = Callable[..., AskResult]


@pytest.fixture
def exported() -> tuple[otel.OtelExporter, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return otel.OtelExporter(provider), memory


@pytest.mark.slow
def test_a_runs_spans_are_exported_nested_as_kgot_nests_them(
    run: Run,
    facts_file: Path,
    settings: Settings,
    exported: tuple[otel.OtelExporter, InMemorySpanExporter],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter, memory = exported
    # [tracing] otel on: the run hands its events to the shared exporter (ours, here).
    monkeypatch.setattr(otel, "shared_exporter", lambda: exporter)
    on = settings.model_copy(update={"tracing": settings.tracing.model_copy(update={"otel": True})})
    script = paris_in_one_round(facts_file)
    script["math_check"] = ["not json", *script["math_check"]]  # one failed request
    result = run(ScriptedChatModel(script=script), settings=on)

    spans = {span.name: span for span in memory.get_finished_spans()}
    by_id = {span.context.span_id: span for span in memory.get_finished_spans()}
    root = spans["kgot.ask"]
    assert root.parent is None and root.attributes["kgot.run_id"] == result.run_id
    assert root.status.status_code is not StatusCode.ERROR
    steps = [s for s in memory.get_finished_spans() if s.name.startswith("kgot.step ")]
    assert len(steps) == len([e for e in result.trace if isinstance(e, StepStarted)]) == 6
    assert all(s.parent.span_id == root.context.span_id for s in steps)
    assert all(s.context.trace_id == root.context.trace_id for s in steps)

    chats = [s for s in memory.get_finished_spans() if s.name == "chat scripted"]
    assert len(chats) == len([e for e in result.trace if isinstance(e, ModelCall)])
    assert {by_id[s.parent.span_id].name for s in chats} >= {"kgot.step decide"}
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == result.input_tokens
    assert [
        s.attributes["kgot.step"] for s in chats if s.status.status_code == StatusCode.ERROR
    ] == ["math_check"]
    tool = spans["execute_tool inspect_file"]
    assert by_id[tool.parent.span_id].name == "kgot.step decide"
    assert tool.attributes["gen_ai.tool.name"] == "inspect_file"
    # Spans keep the events' times; other events are span events of their step.
    assert all(s.start_time <= s.end_time for s in memory.get_finished_spans())
    assert root.start_time <= min(s.start_time for s in steps)
    decide = next(s for s in steps if s.name == "kgot.step decide")
    assert [e.name for e in decide.events][:2] == ["votes", "tool_calls"]
    assert decide.attributes["kgot.usage.llm_calls"] >= 5


def test_the_exporter_says_how_to_install_opentelemetry_when_it_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    from kgot.errors import ConfigError

    real_import = builtins.__import__

    def without_otel(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", without_otel)
    with pytest.raises(ConfigError, match=re.escape("pip install -e '.[otel]'")):
        otel.OtelExporter()
