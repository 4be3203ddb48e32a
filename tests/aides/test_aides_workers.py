"""Two workers on PostgreSQL share one aide's 50 items: claims with FOR UPDATE SKIP LOCKED
hand each item to exactly one of them; none is ingested twice and none is lost."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kgot.aides import aide_rows, create_aide
from kgot.config import Settings
from kgot.persistence import open_store

WORKER = textwrap.dedent(
    """
    import re, sys
    from kgot.aides import open_aide
    from kgot.config import load_settings
    from kgot.llm.scripted import ScriptedChatModel
    from kgot.persistence import open_store
    from kgot.tests.aides.aide_scripts import QUERY

    def code(call):
        number = re.search(r"Company (\\d+)", call.prompt.split("Tool result:")[-1]).group(1)
        return (f'```python\\nG.add_node("co{number}", label="Organization", '
                f'name="Company {number}")\\n```')

    scripted = ScriptedChatModel(script={"update_graph": [code], "query": [QUERY],
                                         "digest": ["- new [node:co1]"]})
    settings = load_settings({"llm.model": "scripted", "store.db": sys.argv[1]})
    with open_store(sys.argv[1]) as store:
        aide = open_aide(store, "shared", settings=settings,
                         models={"planning": scripted, "execution": scripted})
        print(aide.run_cycle().ingested)
    """
)


@pytest.mark.slow
@pytest.mark.postgres
def test_two_workers_share_fifty_items_without_repeating_or_losing_one(
    tmp_path: Path, postgres_url: str, settings: Settings
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    past = 1_700_000_000
    for number in range(50):
        note = inbox / f"note{number:02}.txt"
        note.write_text(f"Company {number} was founded in 1999.", encoding="utf-8")
        os.utime(note, (past, past))
    with open_store(postgres_url) as store:
        aide = create_aide(store, "shared", "market", settings=settings)
        aide.add_source("dir", str(inbox))
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    running = [
        subprocess.Popen(
            [sys.executable, str(worker), postgres_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=600) for process in running]

    for process, (_out, err) in zip(running, outputs, strict=True):
        assert process.returncode == 0, err
    ingested = [int(out.strip().splitlines()[-1]) for out, _err in outputs]
    assert sum(ingested) == 50
    with open_store(postgres_url) as store:
        done = aide_rows.items(store, aide.row, "done", limit=100)
        assert len(done) == 50 and {row.attempts for row in done} == {1}
        session = store.session("market")
        keys = [c["result_key"] for c in session.commits(limit=200) if c["result_key"]]
        assert len(keys) == len(set(keys)) == 50
        assert len(session.load_graph()) == 50
