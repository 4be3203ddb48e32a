"""Leases on claimed items: a worker renews the lease of the item it is ingesting, so a slow
item is not taken over while its worker is alive; an item whose worker died (``kill -9``) or
stopped renewing (a stopped process) is taken over; a worker that lost its item never records
over its new owner, and the item's facts are committed once.

The records-level checks run on SQLite and PostgreSQL; the workers run on PostgreSQL, where
several serve one aide, with a real lease of a second or two."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import aide_rows, create_aide, open_aide
from kgot.config import Settings
from kgot.persistence import Store, open_store
from kgot.persistence.timeutil import as_utc
from kgot.tests.aides.aide_scripts import inbox, model

# --------------------------------------------------------------------------- the records


def test_only_the_owner_renews_and_a_renewed_lease_is_not_reclaimed(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    aide, cycle = _one_item(store, settings, tmp_path)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    row = aide_rows.claim_next(store, aide.row, "me", start, cycle, lease=timedelta(seconds=10))
    assert row is not None

    assert not aide_rows.renew_lease(store, row.id, "someone else", start + timedelta(hours=1))
    assert aide_rows.renew_lease(store, row.id, "me", start + timedelta(seconds=30))

    # At 20 s the first lease (10 s) would have run out; the renewed one (30 s) has not.
    assert aide_rows.reclaim_abandoned(store, aide.row, start + timedelta(seconds=20)) == 0
    assert aide_rows.reclaim_abandoned(store, aide.row, start + timedelta(seconds=31)) == 1
    [back] = aide_rows.items(store, aide.row)
    assert (back.status, back.lease_owner) == ("new", None)


@pytest.mark.slow
def test_a_worker_that_lost_its_item_records_nothing_over_the_new_owner(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    aide, cycle = _one_item(store, settings, tmp_path)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    lease = timedelta(seconds=10)
    first = aide_rows.claim_next(store, aide.row, "slow", start, cycle, lease=lease)
    later = start + timedelta(seconds=11)
    assert aide_rows.reclaim_abandoned(store, aide.row, later) == 1
    other_cycle = aide_rows.start_cycle(store, aide.row, later)
    second = aide_rows.claim_next(store, aide.row, "fast", later, other_cycle, lease=lease)
    assert first is not None and second is not None and first.id == second.id

    assert not aide_rows.renew_lease(store, first.id, "slow", later + lease)
    finish = {"version": 7, "reason": None, "report": None, "now": later}
    assert not aide_rows.finish_item(store, first.id, owner="slow", ok=True, **finish)
    assert not aide_rows.release_item(store, first.id, owner="slow", status="new", attempts=0)
    [held] = aide_rows.items(store, aide.row)
    assert (held.status, held.lease_owner, held.attempts) == ("ingesting", "fast", 2)

    assert aide_rows.finish_item(store, first.id, owner="fast", ok=True, **finish)
    [done] = aide_rows.items(store, aide.row)
    assert (done.status, done.committed_version, done.lease_owner) == ("done", 7, None)


# --------------------------------------------------------------------------- the workers

WORKER = textwrap.dedent(
    """
    import json, sys
    from datetime import timedelta
    from kgot.aides import open_aide
    from kgot.config import load_settings
    from kgot.persistence import open_store
    from kgot.tests.aides.aide_scripts import SlowModel, model

    url, lease, slow = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    scripted = SlowModel(script=model().script, slow={"update_graph": slow})
    settings = load_settings({"llm.model": "scripted", "store.db": url})
    with open_store(url) as store:
        aide = open_aide(store, "slow", settings=settings,
                         models={"planning": scripted, "execution": scripted})
        report = aide.run_cycle(lease=timedelta(seconds=lease))
        print(json.dumps(report.to_json(), default=str))
    """
)
LEASE_S = 1.5


@pytest.mark.slow
@pytest.mark.postgres
def test_a_slow_item_is_not_taken_over_while_its_worker_renews_the_lease(
    tmp_path: Path, postgres_url: str, settings: Settings
) -> None:
    with open_store(postgres_url) as store:
        aide = _slow_aide(store, tmp_path, settings)
        # The model takes 4 lease lengths over the item: without renewals it is taken over.
        with _worker(tmp_path, postgres_url, lease=LEASE_S, slow=4 * LEASE_S) as worker:
            claimed = _wait_for(lambda: _claimed(store, aide))
            other = model()
            other_cycles = []
            expiries = {claimed.lease_expires_at}
            while worker.poll() is None:
                other_cycles.append(_open(store, settings, other).run_cycle())
                row = _claimed(store, aide)
                if row is not None:
                    expiries.add(row.lease_expires_at)
                time.sleep(0.3)
            out, err = worker.communicate()

        assert worker.returncode == 0, err
        assert len(other_cycles) >= 5  # the other worker kept looking while the item was slow
        assert all(cycle.reclaimed == 0 and cycle.items == [] for cycle in other_cycles)
        assert other.calls_for("update_graph") == []
        assert len(expiries) >= 3  # the lease was pushed forward while the item was worked on
        [item] = json.loads(out)["items"]
        assert (item["status"], item["attempts"]) == ("done", 1)
        [row] = aide_rows.items(store, aide.row)
        assert (row.status, row.attempts, row.lease_owner) == ("done", 1, None)
        assert _keyed_commits(store) == 1


@pytest.mark.slow
@pytest.mark.postgres
def test_an_item_whose_worker_was_killed_is_taken_over(
    tmp_path: Path, postgres_url: str, settings: Settings
) -> None:
    with open_store(postgres_url) as store:
        aide = _slow_aide(store, tmp_path, settings)
        # A long lease: the item is taken over because its worker is seen to be gone.
        with _worker(tmp_path, postgres_url, lease=600, slow=600) as worker:
            _wait_for(lambda: _claimed(store, aide))
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=30)
            taker = model()
            report = _open(store, settings, taker).run_cycle()

        assert report.reclaimed == 1 and report.ingested == 1
        assert len(taker.calls_for("update_graph")) == 1
        [row] = aide_rows.items(store, aide.row)
        assert (row.status, row.attempts) == ("done", 2)
        assert _keyed_commits(store) == 1


@pytest.mark.slow
@pytest.mark.postgres
def test_an_item_whose_worker_stopped_renewing_is_taken_over_and_committed_once(
    tmp_path: Path, postgres_url: str, settings: Settings
) -> None:
    with open_store(postgres_url) as store:
        aide = _slow_aide(store, tmp_path, settings)
        with _worker(tmp_path, postgres_url, lease=LEASE_S, slow=3 * LEASE_S) as worker:
            first = _wait_for(lambda: _claimed(store, aide))
            # Stop the worker just after a renewal (never inside one: its row lock would
            # hold up the other worker), so its lease runs out while the process lives.
            _wait_for(lambda: _renewed_since(store, aide, first))
            worker.send_signal(signal.SIGSTOP)
            try:
                time.sleep(LEASE_S + 0.5)
                taker = model()
                taken = _open(store, settings, taker).run_cycle()
            finally:
                worker.send_signal(signal.SIGCONT)
            out, err = worker.communicate(timeout=120)

        assert worker.returncode == 0, err
        assert taken.reclaimed == 1 and taken.ingested == 1
        stalled = json.loads(out)
        [lost] = stalled["items"]
        assert lost["status"] == "lost" and "another worker took it over" in lost["reason"]
        # Its own commit found the other's made with the item's key: nothing of it was
        # written, and it does not digest facts it did not write.
        assert f"already committed as version {taken.items[0].version}" in lost["reason"]
        assert stalled["digest"] is None
        [row] = aide_rows.items(store, aide.row)
        assert (row.status, row.attempts) == ("done", 2)
        # Both workers ingested the item; its facts were committed once, by the one that got
        # there first (the worker that took it over), and the item records that commit.
        assert _keyed_commits(store) == 1
        key = f"aide {aide.row.id}/item {row.id}"
        commit = store.session("acme").committed(key)
        assert commit is not None and commit["version"] == row.committed_version
        assert commit["run_id"] == f"aide slow/cycle {taken.cycle_id}"
        assert "acme" in store.session("acme").load_graph()


# --------------------------------------------------------------------------- helpers


def _one_item(store: Store, settings: Settings, tmp_path: Path) -> tuple[Any, int]:
    """An aide with one new item, and a cycle of it (started at 2026-01-01)."""
    from kgot.aides.sources import SourceItem

    start = datetime(2026, 1, 1, tzinfo=UTC)
    aide = create_aide(store, "leasy", "acme", settings=settings)
    source = aide.add_source("dir", str(tmp_path))
    item = SourceItem("a", "a", "Acme.", str(tmp_path / "a.md"), None, "dir")
    aide_rows.record_poll(store, aide.row, source, [item], cursor={}, error=None, now=start)
    return aide, aide_rows.start_cycle(store, aide.row, start)


def _slow_aide(store: Store, tmp_path: Path, settings: Settings) -> Any:
    aide = create_aide(store, "slow", "acme", settings=settings)
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md"])))
    return aide


def _open(store: Store, settings: Settings, scripted: object) -> Any:
    return open_aide(
        store, "slow", settings=settings, models={"planning": scripted, "execution": scripted}
    )


@contextmanager
def _worker(tmp_path: Path, url: str, *, lease: float, slow: float) -> Iterator[Any]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(script), url, str(lease), str(slow)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.communicate()


def _claimed(store: Store, aide: Any) -> Any:
    """The aide's one item while it is claimed (before the worker's poll it has none)."""
    rows = aide_rows.items(store, aide.row)
    return rows[0] if rows and rows[0].status == "ingesting" else None


def _renewed_since(store: Store, aide: Any, first: Any) -> bool:
    row = _claimed(store, aide)
    return row is not None and as_utc(row.lease_expires_at) > as_utc(first.lease_expires_at)


def _wait_for(found: Callable[[], Any], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"waited {timeout:g} s in vain")


def _keyed_commits(store: Store) -> int:
    return sum(1 for c in store.session("acme").commits() if c["result_key"])
