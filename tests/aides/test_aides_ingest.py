"""``ingest_text`` and ``kgot ingest``: a text goes through the INSERT path with no vote (graph
code in the sandbox, checked against the entity's types, fixed, committed with provenance), and
the report says what the entity's memory made of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgot.aides import ingest_text
from kgot.cli.main import main
from kgot.config import Settings
from kgot.errors import UsageError
from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, Store

NOTE = "Paris is the capital of France. Lyon is in France too."

ADD_CITIES = """```python
G.add_node("paris_city", label="Place", name="PARIS", country="France")
G.add_node("lyon", label="Place", name="Lyon", country="France")
G.add_edge("lyon", "france", relationship="located_in")
```"""

BROKEN = """```python
G.add_node("lyon", label="Place")
```"""  # no name: the Place type requires one


def _seed(store: Store) -> None:
    store.create_entity("atlas")
    session = store.session("atlas")
    session.load_graph()
    session.commit(
        Changeset(
            added_nodes=(
                Node("paris", "Place", {"name": "Paris", "country": "France"}),
                Node("france", "Place", {"name": "France"}),
            )
        ),
        Provenance(run_id="earlier", step="test", source_ref="atlas.txt"),
    )


@pytest.mark.slow
def test_a_text_is_written_fixed_and_committed_with_its_source(
    store: Store, settings: Settings
) -> None:
    _seed(store)
    model = ScriptedChatModel(script={"update_graph": [BROKEN], "fix_code": [ADD_CITIES]})

    report = ingest_text(
        store, "atlas", NOTE, source_ref="note.md", confidence=0.8, model=model, settings=settings
    )

    assert report.ok, report.failed
    assert report.inserted_nodes == ["lyon"]
    assert [edge.fact_id for edge in report.inserted_edges] == ["lyon -[located_in]-> france"]
    assert [merged.into for merged in report.merged] == ["paris"]  # PARIS is paris
    assert any("landed on 'paris'" in note for note in report.notes)
    assert report.version == 2
    assert report.llm_calls == 2  # the first code failed the type check and was fixed
    # The fix prompt carried the type violation the store found.
    assert "name" in model.calls_for("fix_code")[0].prompt
    # The write prompt showed the text as the tool result.
    assert NOTE in model.calls_for("update_graph")[0].prompt
    graph = store.session("atlas").load_graph(include_meta=True)
    assert graph.nodes["lyon"]["_source_ref"] == "note.md"
    assert graph.nodes["lyon"]["_confidence"] == pytest.approx(0.8)
    assert sorted(graph.nodes) == ["france", "lyon", "paris"]


@pytest.mark.slow
def test_the_same_text_again_corroborates_and_a_result_key_is_applied_once(
    store: Store, settings: Settings
) -> None:
    _seed(store)
    restate = (
        '```python\nG.add_node("paris_fr", label="Place", name="Paris", country="France")\n```'
    )
    model = ScriptedChatModel(script={"update_graph": [restate]})

    first = ingest_text(
        store,
        "atlas",
        NOTE,
        source_ref="other.md",
        model=model,
        settings=settings,
        result_key="aide 1/item a",
    )
    again = ingest_text(
        store,
        "atlas",
        NOTE,
        source_ref="other.md",
        model=model,
        settings=settings,
        result_key="aide 1/item a",
    )

    assert first.corroborated == 1  # a new source states the same fact
    assert first.inserted_nodes == []
    assert again.already_committed and again.version == first.version
    assert again.llm_calls == 0  # nothing was asked of the model the second time
    assert len(model.calls_for("update_graph")) == 1


@pytest.mark.slow
def test_code_that_never_passes_is_reported_failed_and_nothing_is_written(
    store: Store, settings: Settings
) -> None:
    _seed(store)
    model = ScriptedChatModel(script={"update_graph": [BROKEN], "fix_code": [BROKEN]})

    report = ingest_text(store, "atlas", NOTE, model=model, settings=settings)

    assert not report.ok
    assert "gave up after" in (report.failed or "")
    assert report.version is None
    assert store.session("atlas").version == 1


def test_empty_text_is_refused(store: Store, settings: Settings) -> None:
    _seed(store)
    with pytest.raises(UsageError, match="empty"):
        ingest_text(store, "atlas", "  \n", model=ScriptedChatModel(script={}), settings=settings)


@pytest.mark.slow
def test_kgot_ingest_reads_a_file_or_stdin(
    tmp_path: Path,
    store: Store,
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _seed(store)
    url = store_url
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"update_graph": [ADD_CITIES]}), encoding="utf-8")
    note = tmp_path / "note.html"
    note.write_text(f"<html><head><title>Cities</title></head><body><p>{NOTE}</p></body></html>")

    code = main(
        [
            "ingest",
            "--entity",
            "atlas",
            str(note),
            "--db",
            url,
            "--model",
            f"scripted:{script}",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["inserted_nodes"] == ["lyon"] and data["ok"]
    assert data["source_ref"] == str(note.resolve())

    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(""))
    code = main(["ingest", "--entity", "atlas", "-", "--db", url, "--model", f"scripted:{script}"])
    _out, err = capsys.readouterr()
    assert code == 2
    assert err.strip() == "kgot: error: - holds no text to ingest"

    code = main(["ingest", "--entity", "nowhere", str(note), "--db", url])
    _out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1


@pytest.mark.slow
def test_a_long_text_is_ingested_in_pieces_each_applied_once(
    store: Store, settings: Settings
) -> None:
    from kgot.controller.ingest import split_text

    _seed(store)
    settings = settings.model_copy(
        update={"tools": settings.tools.model_copy(update={"max_output_chars": 500})}
    )
    towns = ["Bern", "Basel", "Geneva"]
    text = "\n\n".join(f"{town} is a city in Switzerland. " * 9 for town in towns)
    assert [len(piece) <= 500 for piece in split_text(text, 500)] == [True] * 3

    def code(call: object) -> str:
        shown = str(getattr(call, "prompt", "")).split("Tool result:")[-1]
        [town] = [town for town in towns if town in shown]
        return f'```python\nG.add_node("{town.lower()}", label="Place", name="{town}")\n```'

    model = ScriptedChatModel(script={"update_graph": [code]})
    report = ingest_text(
        store, "atlas", text, model=model, settings=settings, result_key="long note"
    )
    again = ingest_text(
        store, "atlas", text, model=model, settings=settings, result_key="long note"
    )

    assert report.ok and sorted(report.inserted_nodes) == ["basel", "bern", "geneva"]
    assert "part 2 of 3" in model.calls_for("update_graph")[1].prompt
    assert again.already_committed and len(model.calls_for("update_graph")) == 3
    keys = {c["result_key"] for c in store.session("atlas").commits()}
    assert {"long note/part 1", "long note/part 2", "long note/part 3"} <= keys
