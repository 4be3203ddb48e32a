"""``kill -9`` between an item's commit and its being marked done: on restart the item is
claimed again (its worker is gone), its commit is found by the item's result key, and it is
marked done without a second ingestion; every item lands exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kgot.aides import aide_rows, create_aide, open_aide
from kgot.config import Settings
from kgot.persistence import Store
from kgot.tests.aides.aide_scripts import inbox, model

WORKER = textwrap.dedent(
    """
    import os, signal, sys
    from kgot.aides import open_aide, aide_rows
    from kgot.config import load_settings
    from kgot.persistence import open_store
    from kgot.tests.aides.aide_scripts import model

    def killed(*args, **kwargs):  # the commit landed; the process dies before marking it done
        os.kill(os.getpid(), signal.SIGKILL)

    aide_rows.finish_item = killed
    scripted = model()
    settings = load_settings({"llm.model": "scripted", "store.db": sys.argv[1]})
    with open_store(sys.argv[1]) as store:
        aide = open_aide(store, "crashy", settings=settings,
                         models={"planning": scripted, "execution": scripted})
        aide.run_cycle()
    """
)


@pytest.mark.slow
def test_an_item_committed_before_a_kill_is_not_ingested_again(
    tmp_path: Path, store: Store, store_url: str, settings: Settings
) -> None:
    aide = create_aide(store, "crashy", "acme", settings=settings)
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md", "globex.md"])))
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER, encoding="utf-8")

    died = subprocess.run(
        [sys.executable, str(worker), store_url],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )

    assert died.returncode == -signal.SIGKILL, died.stderr
    [claimed] = aide_rows.items(store, aide.row, "ingesting")
    first_key = f"aide {aide.row.id}/item {claimed.id}"
    assert store.session("acme").committed(first_key) is not None  # its facts landed

    scripted = model()
    report = open_aide(
        store, "crashy", settings=settings, models={"planning": scripted, "execution": scripted}
    ).run_cycle()

    assert report.reclaimed == 1
    assert (report.ingested, report.failed, report.backlog) == (2, 0, 0)
    assert len(scripted.calls_for("update_graph")) == 1  # only the item that never ran
    done = aide_rows.items(store, aide.row, "done")
    assert len(done) == 2
    commits = store.session("acme").commits()
    keys = [c["result_key"] for c in commits if c["result_key"]]
    assert sorted(keys) == sorted(f"aide {aide.row.id}/item {row.id}" for row in done)
    graph = store.session("acme").load_graph()
    assert {"acme", "zurich", "globex", "springfield"} <= set(graph.nodes)
