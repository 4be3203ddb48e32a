"""The offline aide example (examples/aide) runs as docs/aides.md shows it: a folder of notes,
a JSONL outbox and a scripted model, no network and no API key."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from kgot.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "aide"


@pytest.mark.slow
def test_the_offline_example_runs_as_documented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "aide"
    shutil.copytree(EXAMPLE, copy)
    settled = time.time() - 60  # a fresh checkout's files are older than a poll's settle time
    for note in (copy / "inbox").iterdir():
        os.utime(note, (settled, settled))
    monkeypatch.chdir(copy)
    db = ("--db", "demo.db")
    steps = [
        ["aide", "create", "demo", "--entity", "acme", *db],
        ["aide", "source", "add", "demo", "--dir", "inbox", *db],
        ["aide", "output", "add", "demo", "--jsonl", "outbox.jsonl", *db],
        ["aide", "run", "demo", "--once", "--model", "scripted:aide.json", *db],
    ]
    for argv in steps:
        assert main(argv) == 0, capsys.readouterr().err

    [delivered] = (copy / "outbox.jsonl").read_text(encoding="utf-8").splitlines()
    digest = json.loads(delivered)
    assert digest["facts"] == [
        "node:acme",
        "edge:acme->zurich",
        "node:globex",
        "edge:jane_roe->globex",
    ]
    capsys.readouterr()
    assert main(["aide", "status", "demo", "--json", *db]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["items"] == {"done": 2}
    # Two notes written, one read query over what they changed, one digest.
    assert status["cycles"][0]["llm_calls"] == 4
