"""An aide's cycle on real stores, a real sandbox and a folder source, with a scripted model:
poll → ingest (exactly once) → upkeep → digest → deliver once; failures retried a bounded
number of times; budgets; two aides on two entities never see each other's items or facts;
deleting an aide keeps the graph, deleting the entity takes its aides."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kgot.aides import aide_rows, create_aide, open_aide
from kgot.config import Settings
from kgot.errors import UsageError
from kgot.persistence import Store
from kgot.tests.aides.aide_scripts import BROKEN, inbox, model


@pytest.mark.slow
def test_a_cycle_ingests_new_files_digests_and_delivers_once(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    scripted = model()
    aide = create_aide(store, "research", "acme", settings=settings, models=_both(scripted))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md", "globex.md"])))
    outbox = tmp_path / "outbox.jsonl"
    output_id = aide.add_output("jsonl", str(outbox))

    report = aide.run_cycle()

    assert (report.new_items, report.ingested, report.failed) == (2, 2, 0)
    assert report.source_errors == [] and report.stop_reason is None
    graph = store.session("acme").load_graph(include_meta=True)
    assert {"acme", "zurich", "globex", "springfield"} <= set(graph.nodes)
    assert graph.nodes["acme"]["_source_ref"] == str(tmp_path / "inbox" / "acme.md")
    # The digest cites facts the graph has; an id it invented is not among them.
    assert report.digest is not None
    assert "node:acme" in report.digest["facts"] and "node:invented" not in report.digest["facts"]
    [line] = outbox.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["facts"] == report.digest["facts"]
    assert report.deliveries == [
        {"output": output_id, "kind": "jsonl", "cycle": report.cycle_id, "ok": True, "error": None}
    ]
    assert report.upkeep is not None

    again = open_aide(store, "research", settings=settings, models=_both(scripted)).run_cycle()

    assert (again.new_items, again.ingested, again.digest) == (0, 0, None)
    assert len(outbox.read_text(encoding="utf-8").splitlines()) == 1  # nothing new, nothing sent
    assert len(scripted.calls_for("update_graph")) == 2
    done = aide_rows.items(store, aide.row, "done")
    assert {row.committed_version for row in done} <= {1, 2} and len(done) == 2


@pytest.mark.slow
def test_a_digest_an_output_refused_is_delivered_by_a_later_cycle(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "patient", "acme", settings=settings, models=_both(model()))
    folder = inbox(tmp_path / "inbox", ["acme.md"])
    aide.add_source("dir", str(folder))
    outbox = tmp_path / "outbox.jsonl"
    aide.add_output("jsonl", str(outbox))
    outbox.mkdir()  # the outbox cannot be written: the delivery fails

    start = datetime.now(UTC)
    failed = aide.run_cycle(now=start)
    outbox.rmdir()
    waiting = aide.run_cycle(now=start + timedelta(seconds=30))  # within the first backoff
    later = aide.run_cycle(now=start + timedelta(minutes=2))
    last = aide.run_cycle(now=start + timedelta(minutes=3))

    [refused] = failed.deliveries
    assert not refused["ok"] and refused["error"]
    assert waiting.deliveries == []  # a failed try waits a minute before the next
    assert later.digest is None  # nothing new this cycle, but the earlier digest goes out now
    assert [(d["cycle"], d["ok"]) for d in later.deliveries] == [(failed.cycle_id, True)]
    [line] = outbox.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["cycle"] == failed.cycle_id
    assert last.deliveries == []  # delivered once


@pytest.mark.slow
def test_two_aides_on_two_entities_never_see_each_others_items_or_facts(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    first = create_aide(store, "one", "north", settings=settings, models=_both(model()))
    second = create_aide(store, "two", "south", settings=settings, models=_both(model()))
    first.add_source("dir", str(inbox(tmp_path / "a", ["acme.md"])))
    second.add_source("dir", str(inbox(tmp_path / "b", ["globex.md"])))

    first.run_cycle()
    second.run_cycle()

    assert [row.item_id.split("#")[0] for row in aide_rows.items(store, first.row)] == [
        str(tmp_path / "a" / "acme.md")
    ]
    assert [row.item_id.split("#")[0] for row in aide_rows.items(store, second.row)] == [
        str(tmp_path / "b" / "globex.md")
    ]
    assert "globex" not in store.session("north").load_graph()
    assert "acme" not in store.session("south").load_graph()


@pytest.mark.slow
def test_a_failing_item_is_retried_a_bounded_number_of_times_with_its_reason(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    settings = settings.model_copy(
        update={"controller": settings.controller.model_copy(update={"fix_code_retries": 0})}
    )
    scripted = model(update_graph=[BROKEN])
    aide = create_aide(store, "stubborn", "acme", settings=settings, models=_both(scripted))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md"])))

    reports = [aide.run_cycle() for _ in range(aide_rows.MAX_ATTEMPTS + 1)]

    assert [r.failed for r in reports] == [1] * aide_rows.MAX_ATTEMPTS + [0]
    [row] = aide_rows.items(store, aide.row, "failed")
    assert row.attempts == aide_rows.MAX_ATTEMPTS
    # The code's one attempt, then the item's three ingestions, each count named.
    assert row.reason.startswith("gave up after 1 attempt at the graph code: ")
    assert row.reason.endswith("(the item was given up after 3 ingestion attempts)")
    assert "name" in row.reason
    assert row.text  # kept: nothing is silently dropped
    assert reports[-1].backlog == 0


def test_an_unreachable_model_stops_the_cycle_without_using_up_the_items_attempts(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    from kgot.config import load_settings

    settings = load_settings(
        {"store.db": settings.store.db, "llm.model": "scripted", "llm.max_retries": 0}
    )
    down = model(update_graph=[{"$error": "connection"}])
    aide = create_aide(store, "offline", "acme", settings=settings, models=_both(down))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md", "globex.md"])))

    report = aide.run_cycle()

    assert (report.ingested, report.failed, report.backlog) == (0, 0, 2)
    assert "ModelError" in (report.stop_reason or "") and "waits" in (report.stop_reason or "")
    assert len(down.calls_for("update_graph")) == 1  # the second item was not tried
    assert {(row.status, row.attempts) for row in aide_rows.items(store, aide.row)} == {("new", 0)}


@pytest.mark.slow
def test_one_bad_source_never_stops_the_others(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "mixed", "acme", settings=settings, models=_both(model()))
    gone = tmp_path / "gone"
    gone.mkdir()
    aide.add_source("dir", str(gone))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md"])))
    gone.rmdir()

    report = aide.run_cycle()
    again = aide.run_cycle()

    assert report.ingested == 1
    assert len(report.source_errors) == 1 and "does not exist" in report.source_errors[0]
    assert len(again.source_errors) == 1  # polled again next cycle
    [bad, _good] = aide_rows.sources(store, aide.row)
    assert bad.failures == 2 and "does not exist" in bad.last_error


@pytest.mark.slow
def test_budgets_stop_the_cycle_cleanly_and_say_so(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "thrifty", "acme", settings=settings, models=_both(model()))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md", "globex.md", "initech.txt"])))

    broke = aide.run_cycle(max_cost_usd=0)
    one = aide.run_cycle(max_items=1)
    stopped = aide.run_cycle(should_stop=lambda: True)

    assert broke.ingested == 0 and "--max-cost-usd 0" in (broke.stop_reason or "")
    assert broke.backlog == 3
    assert one.ingested == 1 and one.backlog == 2 and one.stop_reason is None
    assert stopped.ingested == 0 and "asked to stop" in (stopped.stop_reason or "")
    [last, *_] = aide_rows.cycles(store, aide.row)
    assert last.status == "stopped" and last.stop_reason == stopped.stop_reason


@pytest.mark.slow
def test_deleting_an_aide_keeps_the_graph_and_deleting_the_entity_takes_its_aides(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "temp", "acme", settings=settings, models=_both(model()))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md"])))
    aide.add_output("jsonl", str(tmp_path / "out.jsonl"))
    aide.run_cycle()
    version = store.session("acme").version

    aide.delete()

    with pytest.raises(UsageError, match="no aide named 'temp'"):
        open_aide(store, "temp", settings=settings)
    assert store.session("acme").version == version and "acme" in store.session("acme").load_graph()
    assert aide_rows.items(store, aide.row) == [] and aide_rows.cycles(store, aide.row) == []

    again = create_aide(store, "again", "acme", settings=settings, models=_both(model()))
    again.add_source("dir", str(tmp_path / "inbox"))
    again.run_cycle()
    store.delete_entity("acme")

    assert aide_rows.list_aides(store) == []
    assert aide_rows.items(store, again.row) == [] and aide_rows.sources(store, again.row) == []


def _both(scripted: object) -> dict[str, object]:
    return {"planning": scripted, "execution": scripted}


def test_one_worker_per_aide_and_a_dead_workers_claim_is_ignored(
    store: Store, settings: Settings
) -> None:
    import subprocess
    import sys

    from kgot.persistence.owner import current_owner

    aide = create_aide(store, "solo", "acme", settings=settings)
    here = current_owner()
    aide_rows.claim_worker(store, aide.row, here)

    if not store.target.is_sqlite:  # PostgreSQL serves any number of workers
        aide_rows.claim_worker(store, aide.row, "another process")
        return
    with pytest.raises(UsageError, match="already being run by process"):
        aide_rows.claim_worker(store, aide.row, "another process")

    aide_rows.release_worker(store, aide.row, here)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    fields = here.split()
    fields[3] = dead.stdout.strip()  # this machine, a pid whose process has ended
    aide_rows.claim_worker(store, aide.row, " ".join(fields))
    aide_rows.claim_worker(store, aide.row, here)  # the dead one's claim does not count
