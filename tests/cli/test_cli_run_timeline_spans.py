"""The `kgot runs show` timeline reads spans: a step's line sums the events of its span (a
call by its parent), whatever comes between; the commits a run wrote come first."""

from __future__ import annotations

from datetime import UTC, datetime

from kgot.cli.run_timeline import commit_lines, timeline_lines
from kgot.persistence.store import RunCommit
from kgot.tracing import ModelCall, child_span_ids, empty_usage, span
from kgot.tracing.events import (
    GraphUpdated,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    TraceEvent,
)


def _failed_request(step: str) -> ModelCall:
    return ModelCall(
        **child_span_ids(),
        role="planning",
        step=step,
        model="scripted",
        attempt=1,
        input_tokens=0,
        output_tokens=0,
        estimated=False,
        cost_usd=0.0,
        duration_s=0.1,
        ok=False,
        error="invalid output",
    )


def _finished(step: str) -> StepFinished:
    return StepFinished(step=step, duration_s=0.5, ok=True, usage=empty_usage())


def test_a_steps_line_sums_its_own_span_even_around_a_step_inside_it() -> None:
    events: list[TraceEvent] = []
    with span(sink=events.append):
        events.append(
            RunStarted(
                kind="aide_cycle",
                question="cycle 3 of aide news",
                run_id="aide news/cycle 3",
                resumed=False,
                backend="networkx",
                entity="acme",
            )
        )
        with span():
            events.append(StepStarted(step="digest"))
            with span():
                events.append(StepStarted(step="retrieve"))
                events.append(_failed_request("query"))
                events.append(_finished("retrieve"))
            events.append(GraphUpdated(summary="1 node", nodes=4, edges=2))
            events.append(_finished("digest"))
        with span():
            events.append(StepStarted(step="deliver"))  # the process died here
        events.append(RunFinished(status="interrupted", answer="", error="stopped"))

    lines = timeline_lines(events)
    assert lines[2].split() == ["0", "—", "aide", "cycle", "started"]
    assert lines[3].split()[:2] == ["0", "retrieve"] and lines[3].endswith("1 retry")
    assert lines[4].split()[:2] == ["0", "digest"] and lines[4].endswith("graph 4n/2e")
    assert lines[5].split()[1:] == ["deliver", "(no", "end", "recorded)"]
    assert lines[6].split()[:4] == ["0", "—", "run", "interrupted:"]


def test_commit_lines_name_entity_version_step_and_source() -> None:
    at = datetime(2026, 11, 29, tzinfo=UTC)
    commits = [
        RunCommit("acme", 4, "update_graph", "a.md", "2 nodes inserted\n1 edge", at),
        RunCommit("acme", 5, "ingest", None, "1 node updated", at),
    ]
    assert commit_lines(commits) == [
        "commits      2 commits",
        "  acme v4 update_graph: 2 nodes inserted 1 edge",
        "      from a.md",
        "  acme v5 ingest: 1 node updated",
    ]
    assert commit_lines([]) == []
