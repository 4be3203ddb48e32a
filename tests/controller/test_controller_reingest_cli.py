"""`kgot ingest` of a note the entity's graph holds already (issue 27, item 13): the store
records a reinforcement of each fact when the same source states it again and a corroboration
when another does, and both the text line and `--json` say so. Through the real `kgot` entry
point, with the real sandbox and store and a scripted model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from kgot.persistence import open_store
from kgot.tests.support.command_line import run_cli

NOTE = "Zeta Dynamics, led by Ada Byron, has its head office in Cupertino.\n"
ADD_ZETA = """```python
G.add_node("zeta", label="Organization", name="Zeta Dynamics", ceo="Ada Byron")
G.add_node("cupertino", label="Place", name="Cupertino")
G.add_edge("zeta", "cupertino", relationship="located_in")
```"""


@dataclass
class Ingest:
    """``kgot ingest --entity acme note.md ARGS…`` against a store of its own; the model writes
    the same graph code every time, as a model reading the same note does."""

    db: Path
    script: Path
    note: Path
    capsys: pytest.CaptureFixture[str]

    def __call__(self, *args: str) -> str:
        code, out, err = run_cli(
            self.capsys,
            "ingest",
            "--entity",
            "acme",
            "--db",
            str(self.db),
            "--model",
            f"scripted:{self.script}",
            str(self.note),
            *args,
        )
        assert code == 0, err
        return out


@pytest.fixture
def ingest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Ingest:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"update_graph": [ADD_ZETA]}), encoding="utf-8")
    note = tmp_path / "note.md"
    note.write_text(NOTE, encoding="utf-8")
    db = tmp_path / "kgot.db"
    assert run_cli(capsys, "entities", "create", "acme", "--db", str(db))[0] == 0
    return Ingest(db=db, script=script, note=note, capsys=capsys)


def _zeta(db: Path) -> dict[str, object]:
    with open_store(str(db)) as store:
        graph = store.session("acme").load_graph(include_meta=True, track=False)
    return dict(graph.nodes["zeta"])


@pytest.mark.slow
def test_ingesting_the_same_note_again_records_and_reports_reinforcement(ingest: Ingest) -> None:
    first = ingest()
    assert "acme: 2 nodes and 1 edge inserted" in first
    assert "restated" not in first  # nothing was, and a zero is not shown
    before = _zeta(ingest.db)
    assert "_reinforced_at" not in before and before["_corroborations"] == 1

    again = ingest()
    assert "acme: 0 nodes and 0 edges inserted" in again
    assert "3 restated (3 reinforced)" in again
    after = _zeta(ingest.db)
    assert "_reinforced_at" in after  # the decay clock restarts from the re-statement
    assert after["_corroborations"] == 1  # the same source confirms nothing new
    assert after["_version"] == before["_version"]  # no new version of an unchanged fact

    report = json.loads(ingest("--json"))
    assert report["reinforced"] == 3 and report["corroborated"] == 0
    assert report["restated"] == ["zeta", "cupertino", "zeta -[located_in]-> cupertino"]
    assert report["inserted_nodes"] == [] and report["inserted_edges"] == []


@pytest.mark.slow
def test_the_same_note_from_another_source_is_reported_corroborated(ingest: Ingest) -> None:
    ingest()
    other = ingest("--source-ref", "https://example.com/zeta")
    assert "3 restated (3 corroborated)" in other
    assert _zeta(ingest.db)["_corroborations"] == 2
