"""The offline advisor example (examples/advisor) runs as its README shows, with no network and
no server: feed files, a folder of notes, two users, quotes in CSV and a scripted model. Each
user gets a briefing citing facts the graph has, alerts are made, and a second run sends
nothing new."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgot.cli.main import main
from kgot.persistence import open_store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "advisor"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    copy = tmp_path / "advisor"
    shutil.copytree(EXAMPLE, copy)
    settled = time.time() - 3600  # a checkout's files are older than a poll's settle time
    for folder in ("notes", "feeds"):
        for written in (copy / folder).iterdir():
            os.utime(written, (settled, settled))
    return copy


def _no_network(connect: Callable[..., Any], tried: list[Any]) -> Callable[..., Any]:
    """``connect`` refusing every address but a local socket's, noting each one it refused
    (the code under test may catch the error; the test reads ``tried``)."""

    def refuse(self: socket.socket, address: Any) -> Any:
        if self.family != socket.AF_UNIX:
            tried.append(address)
            raise OSError(f"the offline example may not connect to {address!r}")
        return connect(self, address)

    return refuse


def _no_lookup(lookup: Callable[..., Any], tried: list[Any]) -> Callable[..., Any]:
    """``getaddrinfo`` refusing every name, noting it (a feed URL would be looked up first)."""

    def refuse(host: Any, *args: Any, **kwargs: Any) -> Any:
        tried.append(host)
        raise socket.gaierror(socket.EAI_NONAME, f"the offline example may not look up {host!r}")

    return refuse


def _commands(readme: str) -> list[list[str]]:
    """The README's kgot commands, with the loop over the days unrolled; every other line of
    the block is a shell line the test has no use for (cd, DB=, wc)."""
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
            if command.startswith("kgot "):
                found.append(shlex.split(command.replace("$DB", "--db demo.db"))[1:])
            else:
                assert re.match(r"(cd examples/advisor|DB=\"--db demo.db\"|wc -l .*)?$", command)
    return found


@pytest.mark.slow
def test_the_offline_example_runs_as_documented(
    example: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = example
    monkeypatch.chdir(folder)
    tried: list[Any] = []
    monkeypatch.setattr(socket.socket, "connect", _no_network(socket.socket.connect, tried))
    monkeypatch.setattr(socket.socket, "connect_ex", _no_network(socket.socket.connect_ex, tried))
    monkeypatch.setattr(socket, "getaddrinfo", _no_lookup(socket.getaddrinfo, tried))
    commands = _commands((folder / "README.md").read_text(encoding="utf-8"))
    runs = [i for i, argv in enumerate(commands) if argv[:2] == ["aide", "run"]]
    assert len(runs) == 2 and len(commands) > 20
    # The feeds are files: nothing to serve, nothing to allow.
    assert [argv[5] for argv in commands if argv[4:5] == ["--rss"]] == [
        "feeds/day1.xml",
        "feeds/day2.xml",
        "feeds/day3.xml",
    ]
    assert "--config" not in {arg for argv in commands for arg in argv}
    outputs: list[str] = []
    for index, argv in enumerate(commands):
        if index == runs[1]:
            sent_before = (folder / "outbox.jsonl").read_text(encoding="utf-8")
        capsys.readouterr()
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        outputs.append(capsys.readouterr().out)

    assert tried == []  # no network: the host process opened no connection
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
