"""`kgot runs show` of a run whose process was killed says `interrupted` at once, not `running`
until another command repairs the record (issue 27, item 13)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kgot.persistence import open_store
from tests.support.command_line import run_cli

RUN_ID = "5e1f0c2a-dead-4aaa-8aaa-000000000001"

# A process that records a run as its own, says so, and waits to be killed.
_OWNER = """
import sys, time
from kgot.persistence import open_store
with open_store(sys.argv[1]) as store:
    store.start_run(sys.argv[2], "What was being asked?", None, {})
print("running", flush=True)
time.sleep(120)
"""


@pytest.fixture
def killed_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The store of a run whose process was killed with SIGKILL while it ran."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    database = str(tmp_path / "kgot.db")
    monkeypatch.setenv("KGOT_DB", database)
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, database, RUN_ID], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "running\n"
        with open_store(database) as store:
            record = store.get_run(RUN_ID)
            assert record is not None and record.status == "running"  # while it lives
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
    assert owner.returncode == -signal.SIGKILL
    return database


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [False, True])
def test_runs_show_of_a_killed_run_says_interrupted(
    killed_run: str, as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "runs", "show", RUN_ID[:8], *(["--json"] if as_json else []))
    assert code == 0, err
    if as_json:
        assert json.loads(out)["status"] == "interrupted"
    else:
        assert "status       interrupted" in out.splitlines()
        assert "running" not in out
    with open_store(killed_run) as store:  # repaired in the store, not only on the screen
        record = store.get_run(RUN_ID)
        assert record is not None and record.status == "interrupted"


@pytest.mark.slow
def test_runs_list_of_a_killed_run_says_interrupted(
    killed_run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "runs", "list")
    assert code == 0, err
    assert out.splitlines()[1].split()[:2] == [RUN_ID[:8], "interrupted"]
