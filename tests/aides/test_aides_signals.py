"""`kgot aide run --every` stopped by SIGTERM mid-cycle: the item being ingested finishes, the
cycle is recorded as stopped, the command exits 0, and no item is left half-done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from kgot.aides import create_aide, records
from kgot.config import Settings
from kgot.persistence import Store
from kgot.tests.aides.aide_scripts import inbox

# The CLI with every scripted model answering after 0.5 s, so a signal lands mid-cycle.
SLOW_CLI = textwrap.dedent(
    """
    import sys
    from kgot.llm import scripted

    loaded = scripted.ScriptedChatModel.from_file.__func__

    def slow(cls, path, **options):
        return loaded(cls, path, latency_s=0.5, **options)

    scripted.ScriptedChatModel.from_file = classmethod(slow)
    from kgot.cli.main import main

    sys.exit(main(sys.argv[1:]))
    """
)


def test_sigterm_finishes_the_current_item_records_the_cycle_and_exits_0(
    tmp_path: Path, store: Store, store_url: str, settings: Settings
) -> None:
    aide = create_aide(store, "busy", "acme", settings=settings)
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md", "globex.md", "initech.txt"])))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"update_graph": ["```python\npass\n```"]}), encoding="utf-8")
    cli = tmp_path / "slow_cli.py"
    cli.write_text(SLOW_CLI, encoding="utf-8")

    worker = subprocess.Popen(
        [
            sys.executable,
            str(cli),
            "aide",
            "run",
            "busy",
            "--every",
            "1h",
            "--db",
            store_url,
            "--model",
            f"scripted:{script}",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert worker.stderr is not None
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = worker.stderr.readline()
        lines.append(line)
        if " item " in line and " done " in line:
            break
    worker.send_signal(signal.SIGTERM)
    _rest, err = worker.communicate(timeout=120)

    assert worker.returncode == 0, "".join(lines) + err
    assert "SIGTERM: finishing the current item" in err
    counts = records.item_counts(store, aide.row)
    assert counts.get("ingesting", 0) == 0
    assert 1 <= counts.get("done", 0) < 3 and counts.get("new", 0) == 3 - counts["done"]
    [cycle] = records.cycles(store, aide.row)
    assert cycle.status == "stopped" and "asked to stop" in cycle.stop_reason
    assert cycle.finished_at is not None and cycle.items == counts["done"]
