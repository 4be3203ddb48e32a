"""`kgot graph export --entity E FILE --as-of VERSION|TIME` writes the graph as it was then
(issue 27, item 14), and refuses a version or time the entity never had in one line."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from kgot.persistence import open_store
from kgot.persistence.timeutil import iso
from tests.support.command_line import refused, run_cli


def _graph(path: Path, nodes: list[dict[str, object]]) -> Path:
    document = {"directed": True, "multigraph": True, "graph": {}, "nodes": nodes, "edges": []}
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture
def history(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> dict[str, object]:
    """Entity acme at three versions: v1 Ann, v2 Anne (renamed), v3 Anne and Bob."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "kgot.db"))
    monkeypatch.chdir(tmp_path)
    assert run_cli(capsys, "entities", "create", "acme")[0] == 0
    ann = {"id": "a", "label": "Person", "name": "Ann"}
    anne = {**ann, "name": "Anne"}
    bob = {"id": "b", "label": "Person", "name": "Bob"}
    for number, nodes in enumerate([[ann], [anne], [anne, bob]], start=1):
        graph = _graph(tmp_path / f"{number}.json", nodes)
        code, out, err = run_cli(capsys, "graph", "import", "--entity", "acme", str(graph))
        assert code == 0 and f"(version {number})" in out, err
    with open_store(str(tmp_path / "kgot.db")) as store:
        commits = store.session("acme").commits()
        created = store.get_entity("acme").created_at
    return {"times": {c["version"]: c["committed_at"] for c in commits}, "created": created}


def _exported(capsys: pytest.CaptureFixture[str], *options: str) -> tuple[dict[str, str], str]:
    code, _out, err = run_cli(capsys, "graph", "export", "--entity", "acme", "out.json", *options)
    assert code == 0, err
    document = json.loads(Path("out.json").read_text(encoding="utf-8"))
    return {node["id"]: node["name"] for node in document["nodes"]}, err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("as_of", "names"),
    [
        ("0", {}),
        ("1", {"a": "Ann"}),
        ("v2", {"a": "Anne"}),
        ("V3", {"a": "Anne", "b": "Bob"}),
    ],
)
def test_export_as_of_a_version(
    history: dict[str, object], as_of: str, names: dict[str, str], capsys
) -> None:
    found, err = _exported(capsys, "--as-of", as_of)
    assert found == names
    version = as_of.lstrip("vV")
    assert f"of entity 'acme' (version {version})" in err


@pytest.mark.slow
def test_export_as_of_a_time(history: dict[str, object], capsys) -> None:
    times: dict[int, str] = history["times"]  # type: ignore[assignment]
    # The moment of commit 2 is version 2; just before it, version 1.
    assert _exported(capsys, "--as-of", times[2])[0] == {"a": "Anne"}
    from datetime import datetime

    before = datetime.fromisoformat(times[2].replace("Z", "+00:00")) - timedelta(microseconds=1)
    found, err = _exported(capsys, "--as-of", before.isoformat())
    assert found == {"a": "Ann"} and f"(version 1, as of {iso(before)})" in err
    # No zone means UTC.
    naive = before.replace(tzinfo=None).isoformat()
    assert _exported(capsys, "--as-of", naive)[0] == {"a": "Ann"}
    # After the last commit: the current graph.
    assert _exported(capsys, "--as-of", "2999-01-01")[0] == {"a": "Anne", "b": "Bob"}


@pytest.mark.slow
def test_the_current_graph_without_as_of(history: dict[str, object], capsys) -> None:
    assert _exported(capsys)[0] == {"a": "Anne", "b": "Bob"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("as_of", "message"),
    [
        ("4", "entity 'acme' has no version 4: its versions run from 0 (empty) to 3"),
        ("v99", "entity 'acme' has no version 99"),
        ("-1", "--as-of takes a version as `kgot entities show` lists them (5 or v5) or an ISO"),
        ("yesterday", "not 'yesterday'"),
        ("2000-01-01T00:00:00Z", "entity 'acme' did not exist yet at 2000-01-01T00:00:00Z"),
    ],
)
def test_a_version_or_time_the_entity_never_had_is_refused(
    history: dict[str, object], as_of: str, message: str, capsys
) -> None:
    refused(
        run_cli(capsys, "graph", "export", "--entity", "acme", "out.json", "--as-of", as_of),
        message,
    )
    assert not Path("out.json").exists()
