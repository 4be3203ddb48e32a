"""The README's "Try it offline" commands and the aide example's README run as shown, from a copy
of ``examples/``, with no network (issue 27, item 1 and item 13): each answers what its
scripted model was written for, and leaves only files git ignores. The commands are read from
the READMEs, so the documents and the test cannot drift apart."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kgot.tests.support.command_line import run_cli

CHECKOUT = Path(__file__).resolve().parents[2]
EXAMPLES = CHECKOUT / "examples"


def readme_commands(text: str, after: str) -> list[list[str]]:
    """The ``kgot`` commands of the first bash block after the line ``after``, as argv lists
    without the leading ``kgot`` (comments dropped). Any other shell line fails the test: the
    block must hold only commands that run as written."""
    section = text.split(after, 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    commands = []
    for raw in block.splitlines():
        line = raw.split("  #", 1)[0].strip()
        if not line or line.startswith("cd examples/") or line.startswith("cat "):
            continue
        assert line.startswith("kgot "), f"not a kgot command: {line!r}"
        commands.append(shlex.split(line)[1:])
    return commands


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every connection but a local socket's, and every name lookup, refused and noted."""
    tried: list[Any] = []

    def guard(connect: Callable[..., Any]) -> Callable[..., Any]:
        def refuse(self: socket.socket, address: Any) -> Any:
            if self.family != socket.AF_UNIX:
                tried.append(address)
                raise OSError(f"the offline example may not connect to {address!r}")
            return connect(self, address)

        return refuse

    def no_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        tried.append(host)
        raise socket.gaierror(socket.EAI_NONAME, f"the offline example may not look up {host}")

    monkeypatch.setattr(socket.socket, "connect", guard(socket.socket.connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guard(socket.socket.connect_ex))
    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    yield tried


def _copy_examples(tmp_path: Path) -> Path:
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy, ignore=shutil.ignore_patterns("demo*.db*", "*.jsonl"))
    settled = time.time() - 60  # a checkout's files are older than a folder poll's settle time
    for written in copy.rglob("*"):
        os.utime(written, (settled, settled))
    return copy


def _untracked_and_not_ignored(copy: Path, before: set[Path]) -> list[str]:
    """Files the commands wrote into the copy that git would list as untracked in a checkout."""
    written = sorted(
        str(Path("examples") / path.relative_to(copy))
        for path in copy.rglob("*")
        if path.is_file() and path not in before
    )
    if not written:
        return []
    ignored = subprocess.run(
        ["git", "-C", str(CHECKOUT), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(written),
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return [path for path in written if path not in ignored]


@pytest.mark.slow
def test_the_try_it_offline_commands_answer_as_the_readme_says(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    offline: list[Any],
) -> None:
    commands = readme_commands(
        (CHECKOUT / "README.md").read_text(encoding="utf-8"), "## Try it offline"
    )
    asks = [argv for argv in commands if argv[0] == "ask"]
    assert [argv[:3] for argv in asks] == [["ask", "--backend", "rdf"], ["ask", "--entity", "acme"]]
    assert {argv[0] for argv in commands} >= {"entities", "types", "ingest", "memory"}
    # Every command that calls a model names its script: none needs a key or a server.
    for argv in commands:
        if argv[0] in ("ask", "ingest", "memory"):
            assert any(arg.startswith("scripted:") for arg in argv), argv

    copy = _copy_examples(tmp_path)
    before = {path for path in copy.rglob("*") if path.is_file()}
    monkeypatch.chdir(copy)
    # A command without --db uses the default store: one of this test's, not the user's.
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "default.db"))
    outputs = {}
    for argv in commands:
        code, out, err = run_cli(capsys, *argv)
        assert code == 0, (argv, err)
        outputs[" ".join(argv[:3])] = out

    assert offline == []
    assert outputs["ask --backend rdf"] == "Marseille, with 240.62 km²\n"
    quote = outputs["ask --entity acme"]
    assert "Dana Whitfield" in quote and "41.2%" in quote and "38.5%" in quote
    assert "'acme'.ceo is now 'Maria Lopez'" in outputs["ingest --entity acme"]
    assert outputs["memory verify --entity"].startswith("corroborated")
    assert _untracked_and_not_ignored(copy, before) == []


@pytest.mark.slow
def test_the_aide_example_runs_as_its_readme_shows(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    offline: list[Any],
) -> None:
    commands = readme_commands(
        (EXAMPLES / "aide" / "README.md").read_text(encoding="utf-8"), "## Run it"
    )
    assert ["aide", "run"] in [argv[:2] for argv in commands]
    copy = _copy_examples(tmp_path)
    before = {path for path in copy.rglob("*") if path.is_file()}
    folder = copy / "aide"
    monkeypatch.chdir(folder)
    for argv in commands:
        code, _, err = run_cli(capsys, *argv)
        assert code == 0, (argv, err)

    assert offline == []
    digest = (folder / "outbox.jsonl").read_text(encoding="utf-8")
    assert "[node:acme]" in digest and "Jane Roe" in digest
    assert _untracked_and_not_ignored(copy, before) == []


@pytest.mark.parametrize(
    "written",
    [
        "examples/demo.db",
        "examples/demo.checkpoints.db",
        "examples/demo.db-wal",
        "examples/aide/demo.db",
        "examples/aide/outbox.jsonl",
        "examples/advisor/demo.db",
        "examples/advisor/outbox.jsonl",
        "examples/advisor/alice.jsonl",
    ],
)
def test_what_the_examples_write_is_ignored_and_nothing_else(written: str) -> None:
    def ignored(path: str) -> bool:
        check = ["git", "-C", str(CHECKOUT), "check-ignore", "--no-index", "-q", path]
        return subprocess.run(check, check=False).returncode == 0

    assert ignored(written)
    # The patterns are precise: a file of the examples with a similar name is not hidden.
    assert not ignored(re.sub(r"(demo|outbox|alice)", r"\1-notes", written))
