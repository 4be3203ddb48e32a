"""The offline advisor example (examples/advisor) runs as its README shows: feeds served on
loopback, a folder of notes, two users, quotes in CSV and a scripted model. Each user gets a
briefing citing facts the graph has, alerts are made, and a second run sends nothing new."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.persistence import open_store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "advisor"


@pytest.fixture
def feeds(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    copy = tmp_path / "advisor"
    shutil.copytree(EXAMPLE, copy)
    settled = time.time() - 3600  # a checkout's files are older than a poll's settle time
    for note in (copy / "notes").iterdir():
        os.utime(note, (settled, settled))
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(copy / "feeds"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield copy, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _commands(readme: str, port: int) -> list[list[str]]:
    """The README's kgot commands, with the loop over the days unrolled."""
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    found: list[list[str]] = []
    for raw in block.splitlines():
        line = raw.split("  #", 1)[0].strip()
        loop = re.match(r"for day in ([\d ]+); do (.*); done$", line)
        lines = (
            [loop.group(2).replace("$day", day) for day in loop.group(1).split()]
            if loop
            else [line]
        )
        for command in lines:
            if command.startswith("$K "):
                text = command.replace("$DB", "--db demo.db").replace("8765", str(port))
                found.append(["--config", "kgot.toml", *shlex.split(text[3:])])
    return found


def test_the_offline_example_runs_as_documented(
    feeds: tuple[Path, int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder, port = feeds
    monkeypatch.chdir(folder)
    commands = _commands((folder / "README.md").read_text(encoding="utf-8"), port)
    runs = [i for i, argv in enumerate(commands) if argv[2:4] == ["aide", "run"]]
    assert len(runs) == 2 and len(commands) > 20
    outputs: list[str] = []
    for index, argv in enumerate(commands):
        if index == runs[1]:
            sent_before = (folder / "outbox.jsonl").read_text(encoding="utf-8")
        capsys.readouterr()
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        outputs.append(capsys.readouterr().out)

    # Nothing new in the second run: the outbox is as it was.
    assert (folder / "outbox.jsonl").read_text(encoding="utf-8") == sent_before
    sent = [json.loads(line) for line in sent_before.splitlines()]
    briefings = {line["user"]: line for line in sent if line["kind"] == "briefing"}
    alerts = [line for line in sent if line["kind"] == "alert"]
    assert set(briefings) == {"alice", "bob"}
    assert {(a["user"], a["rule"]) for a in alerts} >= {
        ("alice", "strong_signal"),
        ("alice", "negative_impact"),
        ("bob", "price_drop"),
    }
    # Every cited fact is in the graph (prices are cited as price:SYMBOL).
    with open_store(str(folder / "demo.db")) as store:
        graph = store.session("markets").load_graph()
    for line in [*briefings.values(), *alerts]:
        assert line["facts"]
        for fact in line["facts"]:
            kind, _, rest = fact.partition(":")
            if kind == "node":
                assert rest in graph, fact
            elif kind == "edge":
                source, target = rest.split("-", 1)[0], rest.rsplit("->", 1)[1]
                assert graph.has_edge(source, target), fact
            else:
                assert kind == "price", fact
    assert "[node:fed_hike_nov]" in briefings["alice"]["text"]
    assert "apple_vision_pro" not in briefings["alice"]["text"]  # sent back and fixed
    assert "Not investment advice" in briefings["bob"]["text"]
    # alice's own outbox holds alice's deliveries only.
    mine = [json.loads(line) for line in (folder / "alice.jsonl").read_text().splitlines()]
    assert mine and {line["user"] for line in mine} == {"alice"}
    printed = "\n".join(outputs)
    assert "briefing 1 for alice" in printed and "[node:aapl_q4_earnings]" in printed
    assert "strong_signal" in printed and "price_drop" in printed
