"""A refused `kgot ask` leaves no database behind: inputs are checked before the store is
opened, and opening the default store creates it (with its directories)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.sandbox.docker_runner import docker_problem

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.json"


def _files_under(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


@pytest.fixture
def data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty data directory holding the default store (KGOT_DB unset)."""
    home = tmp_path / "data"
    home.mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv("KGOT_DB", raising=False)
    return home


def _bad_graph(tmp_path: Path) -> str:
    path = tmp_path / "broken.json"
    path.write_text('{"nodes": [', encoding="utf-8")
    return str(path)


CASES = {
    "no model": lambda tmp: ["ask", "What is 2+2?"],
    "empty question": lambda tmp: ["ask", "--model", f"scripted:{QUICKSTART}", "   "],
    "missing graph file": lambda tmp: [
        "ask", "--model", f"scripted:{QUICKSTART}", "--graph", str(tmp / "nope.json"), "q?",
    ],
    "malformed graph file": lambda tmp: [
        "ask", "--model", f"scripted:{QUICKSTART}", "--graph", _bad_graph(tmp), "q?",
    ],
    "graph file of an unknown format": lambda tmp: [
        "ask", "--model", f"scripted:{QUICKSTART}", "--graph", str(tmp / "g.xyz"), "q?",
    ],
    "unknown run to resume": lambda tmp: ["ask", "--resume", "no-such-run"],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_ask_creates_no_store(
    case: str, data_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(CASES[case](tmp_path))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("kgot: error: ") and err.count("\n") == 1, err
    assert _files_under(data_home) == []


def test_a_sandbox_refusal_creates_no_store(
    data_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if docker_problem() is None:
        pytest.skip("a Docker engine is reachable here: the docker sandbox does not refuse")
    argv = ["ask", "--model", f"scripted:{QUICKSTART}", "--sandbox", "docker", "q?"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "no Docker engine is reachable" in err, err
    assert _files_under(data_home) == []


def test_a_refused_ask_creates_no_store_at_kgot_db(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "stores" / "kgot.db"
    monkeypatch.setenv("KGOT_DB", str(target))
    argv = ["ask", "--model", f"scripted:{QUICKSTART}", "--graph", _bad_graph(tmp_path), "q?"]
    assert main(argv) == 2
    assert "broken.json" in capsys.readouterr().err
    assert not target.parent.exists()


@pytest.mark.slow
def test_a_run_that_goes_ahead_creates_the_store(
    data_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The counterpart: the store is still created for a run that actually starts."""
    facts = Path(__file__).resolve().parents[2] / "examples" / "cities.txt"
    argv = [
        "ask", "--model", f"scripted:{QUICKSTART}", "-a", str(facts), "--json",
        "What is the population density of Paris?",
    ]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["status"] == "answered"
    assert "kgot/kgot.db" in _files_under(data_home)
