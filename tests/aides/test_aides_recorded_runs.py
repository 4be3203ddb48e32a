"""An aide's cycle is a recorded run (`kgot runs show "aide NAME/cycle N"`): its steps, the
model calls in them, and the commits its ingestions wrote under the cycle's run id."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgot.aides import create_aide
from kgot.config import Settings
from kgot.persistence import Store
from kgot.tests.aides.aide_scripts import inbox, model
from kgot.tests.support.command_line import run_cli
from kgot.tracing import ModelCall
from kgot.tracing.events import TRACE_ADAPTER, RunFinished, RunStarted, StepStarted


@pytest.mark.slow
def test_a_cycle_is_a_run_that_shows_its_steps_calls_and_commits(
    tmp_path: Path,
    store: Store,
    *,
    store_url: str,
    settings: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scripted = model()
    aide = create_aide(
        store,
        "research",
        "acme",
        settings=settings,
        models={"planning": scripted, "execution": scripted},
    )
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md", "globex.md"])))

    report = aide.run_cycle()
    assert report.ingested == 2

    run_id = f"aide research/cycle {report.cycle_id}"
    record = store.get_run(run_id)
    assert record is not None
    assert (record.kind, record.status, record.entity) == ("aide_cycle", "done", "acme")
    assert record.answer is not None and "2 ingested" in record.answer
    assert record.totals is not None and record.totals["llm_calls"] == len(scripted.calls)
    # Every commit of the cycle names its run: two items, one commit each.
    versions = sorted(item.version for item in report.items if item.version is not None)
    commits = store.run_commits(run_id)
    assert [(c.entity, c.version) for c in commits] == [("acme", v) for v in versions]
    assert {c.source_ref for c in commits} == {
        str(tmp_path / "inbox" / "acme.md"),
        str(tmp_path / "inbox" / "globex.md"),
    }

    events = TRACE_ADAPTER.validate_python(store.run_events(run_id))
    started, finished = events[0], events[-1]
    assert isinstance(started, RunStarted) and started.kind == "aide_cycle"
    assert isinstance(finished, RunFinished) and finished.status == "done"
    steps = {e.span_id: e.step for e in events if isinstance(e, StepStarted)}
    assert [e.step for e in events if isinstance(e, StepStarted)][:3] == [
        "poll",
        "ingest",
        "ingest",
    ]
    assert {"upkeep", "digest", "retrieve", "deliver"} <= set(steps.values())
    calls = [e for e in events if isinstance(e, ModelCall)]
    assert len(calls) == len(scripted.calls)
    writes = [c for c in calls if c.step == "update_graph"]
    assert len(writes) == 2 and all(steps[c.parent_span_id] == "ingest" for c in writes)
    assert all(e.parent_span_id == started.span_id for e in events if isinstance(e, StepStarted)
               and steps[e.span_id] != "retrieve")  # fmt: skip

    monkeypatch.setenv("KGOT_DB", store_url)
    code, out, err = run_cli(capsys, "runs", "show", run_id)
    assert code == 0, err
    assert "kind         aide_cycle" in out and "status       done" in out
    assert "commits      2 commits" in out
    assert f"acme v{versions[0]} update_graph: " in out
    assert f"      from {tmp_path / 'inbox' / 'acme.md'}"[:79] in out
    lines = out.splitlines()
    timeline = lines[lines.index("timeline") :]
    assert timeline[2].split() == ["0", "—", "aide", "cycle", "started"]
    assert [line.split()[1] for line in timeline[3:6]] == ["poll", "ingest", "ingest"]
    assert timeline[-1].split() == ["0", "—", "run", "done"]

    code, out, err = run_cli(capsys, "runs", "list")
    assert code == 0 and f"cycle {report.cycle_id} of aide research" in out, err
