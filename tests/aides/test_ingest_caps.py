"""Caps on ingestion: a text longer than ``ingest.max_chars`` is refused before any model call
(``ingest_text``, ``kgot ingest``, an aide's item, which fails alone); a cost cap stops between
pieces, says which were committed and which not, and ingesting again under the report's result
key writes only the missing ones. A cost cap the ledger could not see (no price) is refused."""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import aide_rows, create_aide, ingest_text
from kgot.cli.main import main
from kgot.config import Price, Settings
from kgot.controller.ingest import TextTooLongError, part_ranges, split_text
from kgot.errors import ConfigError, UsageError
from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, Store, open_store
from kgot.tests.aides.aide_scripts import inbox, model
from kgot.tests.support.openai_server import OpenAIServer, RecordedRequest, Reply

TOWNS = ["Bern", "Basel", "Geneva"]
# Three pieces at max_output_chars = 500, one town each.
LONG = "\n\n".join(f"{town} is a city in Switzerland. " * 9 for town in TOWNS)
PRICEY = "test:pricey"  # a scripted model with a price: its calls cost something


def _seed(store: Store) -> None:
    store.create_entity("atlas")
    session = store.session("atlas")
    session.load_graph()
    session.commit(
        Changeset(added_nodes=(Node("france", "Place", {"name": "France"}),)),
        Provenance(run_id="earlier", step="test", source_ref="atlas.txt"),
    )


def _town_code(prompt: str) -> str:
    """Graph code for the town whose piece the write prompt shows."""
    shown = prompt.rsplit("Tool result:", maxsplit=1)[-1]
    [town] = [town for town in TOWNS if town in shown]
    return f'```python\nG.add_node("{town.lower()}", label="Place", name="{town}")\n```'


def _scripted(name: str = "scripted") -> ScriptedChatModel:
    return ScriptedChatModel(
        script={"update_graph": [lambda call: _town_code(call.prompt)]}, model_name=name
    )


def _capped(settings: Settings, **ingest: Any) -> Settings:
    """``settings`` with pieces of 500 characters, a price for PRICEY and ``ingest`` caps."""
    return settings.model_copy(
        update={
            "tools": settings.tools.model_copy(update={"max_output_chars": 500}),
            "llm": settings.llm.model_copy(
                update={"prices": {PRICEY: Price(input=100.0, output=100.0)}}
            ),
            "ingest": settings.ingest.model_copy(update=ingest),
        }
    )


@pytest.mark.slow
def test_a_text_over_the_cap_is_refused_before_any_model_call(
    tmp_path: Path, settings: Settings
) -> None:
    assert Settings().ingest.max_chars == 300_000 and Settings().ingest.max_cost_usd is None
    scripted = _scripted()
    with open_store(str(tmp_path / "kgot.db")) as store:
        _seed(store)
        # The default cap: a 10 MB text is ~870 pieces, so as many model writes at least.
        with pytest.raises(TextTooLongError) as refused:
            ingest_text(store, "atlas", "word " * 2_000_000, model=scripted, settings=settings)
        message = str(refused.value)
        assert "9,999,999 characters" in message and "at least 834 pieces of 12,000" in message
        assert "above the ingestion cap of 300,000 (ingest.max_chars)" in message
        assert "[ingest] max_chars" in message and "\n" not in message
        assert isinstance(refused.value, UsageError)  # the CLI's exit code 2

        # A lower cap in the settings, and one given per call, which wins over it.
        low = _capped(settings, max_chars=600)
        with pytest.raises(TextTooLongError, match=f"has {len(LONG.strip())} characters"):
            ingest_text(store, "atlas", LONG, model=scripted, settings=low)
        with pytest.raises(TextTooLongError, match="above the ingestion cap of 100 "):
            ingest_text(store, "atlas", LONG, model=scripted, settings=settings, max_chars=100)
        assert scripted.calls == []
        assert store.session("atlas").version == 1

        report = ingest_text(store, "atlas", LONG, model=scripted, settings=low, max_chars=2_000)
    assert report.ok and sorted(report.inserted_nodes) == ["basel", "bern", "geneva"]
    assert (report.parts, report.parts_done, report.parts_missing) == (3, [1, 2, 3], [])


@pytest.mark.slow
def test_the_cost_cap_stops_between_pieces_and_a_retry_writes_only_the_rest(
    store: Store, settings: Settings
) -> None:
    _seed(store)
    assert len(split_text(LONG, 500)) == 3
    scripted = _scripted(PRICEY)
    settings = _capped(settings)

    stopped = ingest_text(
        store, "atlas", LONG, model=scripted, settings=settings, max_cost_usd=0.000001
    )

    assert not stopped.ok and stopped.stopped_by is not None
    assert stopped.stopped_by.startswith("max_cost_usd 1e-06 (spent $")
    assert stopped.cost_usd is not None and stopped.cost_usd > 0.000001  # one piece overshot
    assert (stopped.parts, stopped.parts_done, stopped.parts_missing) == (3, [1], [2, 3])
    assert stopped.inserted_nodes == ["bern"] and stopped.version == 2
    assert "parts 1 of 3 committed, 2-3 not; ingesting the text again under result key" in (
        stopped.failed or ""
    )
    assert repr(stopped.result_key) in (stopped.failed or "")
    assert len(scripted.calls_for("update_graph")) == 1  # nothing asked after the cap
    keys = {c["result_key"] for c in store.session("atlas").commits()}
    assert f"{stopped.result_key}/part 1" in keys and f"{stopped.result_key}/part 2" not in keys

    # Again under the same key, with no cap: only the missing pieces are written.
    rest = ingest_text(
        store, "atlas", LONG, model=scripted, settings=settings, result_key=stopped.result_key
    )

    assert rest.ok and rest.stopped_by is None
    assert (rest.parts_done, rest.parts_missing) == ([1, 2, 3], [])
    assert sorted(rest.inserted_nodes) == ["basel", "geneva"]
    assert len(scripted.calls_for("update_graph")) == 3
    graph = store.session("atlas").load_graph()
    assert {"bern", "basel", "geneva"} <= set(graph.nodes)


@pytest.mark.slow
def test_the_settings_cost_cap_applies_and_needs_a_price(
    tmp_path: Path, settings: Settings
) -> None:
    with open_store(str(tmp_path / "kgot.db")) as store:
        _seed(store)
        capped = _capped(settings, max_cost_usd=0.000001)
        priced = _scripted(PRICEY)
        report = ingest_text(store, "atlas", LONG, model=priced, settings=capped)
        assert report.stopped_by is not None and report.parts_done == [1]

        # A model with no price: the cap could never see a cost, so it is refused up front.
        unpriced = _scripted("test:unpriced")
        with pytest.raises(ConfigError) as refused:
            ingest_text(store, "atlas", LONG, model=unpriced, settings=capped)
        assert "needs the price of test:unpriced" in str(refused.value)
        assert '[llm.prices."test:unpriced"]' in str(refused.value)
        assert unpriced.calls == []
        # A text of one piece has nothing to stop between: the cap does not matter to it.
        one = ingest_text(store, "atlas", "Bern is a city.", model=unpriced, settings=capped)
        assert one.ok and one.parts == 1 and one.parts_done == [1]
        with pytest.raises(UsageError, match="above 0"):
            ingest_text(store, "atlas", LONG, model=priced, settings=settings, max_cost_usd=0)


@pytest.mark.slow
def test_an_aide_item_over_the_cap_fails_alone_with_its_reason(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    settings = settings.model_copy(
        update={"ingest": settings.ingest.model_copy(update={"max_chars": 200})}
    )
    folder = inbox(tmp_path / "inbox", ["acme.md"])
    big = folder / "big.md"
    big.write_text("Globex Corporation is based in Springfield. " * 40, encoding="utf-8")
    past = time.time() - 60  # settled: sources skip files written in the last seconds
    os.utime(big, (past, past))
    scripted = model()
    aide = create_aide(
        store,
        "capped",
        "acme",
        settings=settings,
        models={"planning": scripted, "execution": scripted},
    )
    aide.add_source("dir", str(folder))

    report = aide.run_cycle()

    assert (report.ingested, report.failed) == (1, 1)
    [failed] = aide_rows.items(store, aide.row, "failed") or aide_rows.items(store, aide.row, "new")
    assert "ingest.max_chars" in (failed.reason or "") and "1,759 characters" in failed.reason
    assert len(scripted.calls_for("update_graph")) == 1  # the small item only


@pytest.mark.slow
def test_kgot_ingest_refuses_a_long_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = str(tmp_path / "kgot.db")
    with open_store(url) as store:
        _seed(store)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"update_graph": ["```python\npass\n```"]}), encoding="utf-8")
    huge = tmp_path / "huge.txt"
    huge.write_text("0123456789" * 1_048_576, encoding="utf-8")  # 10 MB
    command = ["ingest", "-e", "atlas", "--db", url, "--model", f"scripted:{script}"]

    code = main([*command, str(huge)])
    _out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"kgot: error: {huge} has 10,485,760 characters (at least 874 pieces")
    assert "above the ingestion cap of 300,000" in err
    assert "raise the cap with --max-chars 10485760" in err

    note = tmp_path / "note.txt"
    note.write_text(LONG, encoding="utf-8")
    code = main([*command, str(note), "--max-chars", "100"])
    _out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "cap of 100 " in err
    with open_store(url) as store:
        assert store.session("atlas").version == 1  # nothing was written


@pytest.mark.slow
def test_kgot_ingest_stops_at_its_cost_cap_and_finishes_with_the_result_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(tmp_path / "kgot.db")
    with open_store(url) as store:
        _seed(store)

    def respond(request: RecordedRequest) -> Reply:
        return Reply.text(_town_code(json.dumps(request.messages)))

    note = tmp_path / "note.txt"
    note.write_text(LONG, encoding="utf-8")
    with OpenAIServer(responder=respond) as server:
        config = tmp_path / "config.toml"
        config.write_text(
            "[llm]\n"
            'model = "openai:local-model"\n'
            f'base_url = "{server.url}"\n'
            "max_retries = 0\n"
            '[llm.prices."openai:local-model"]\n'
            "input = 100.0\n"
            "output = 100.0\n"
            "[tools]\n"
            "max_output_chars = 500\n"
        )
        monkeypatch.setenv("KGOT_CONFIG", str(config))
        command = ["ingest", "-e", "atlas", str(note), "--db", url]

        code = main([*command, "--max-cost-usd", "0.0001", "--json"])
        out, err = capsys.readouterr()
        assert code == 1, err
        data = json.loads(out)
        assert (data["parts_done"], data["parts_missing"], data["ok"]) == ([1], [2, 3], False)
        line = err.strip()
        assert line.count("\n") == 0 and line.startswith("kgot: error: stopped at the cost cap")
        assert "parts 1 of 3 committed, 2-3 not" in line
        assert f"--result-key {shlex.quote(data['result_key'])}" in line
        assert len(server.requests) == 1

        key = shlex.split(line.split("--result-key ", 1)[1])[0]
        code = main([*command, "--result-key", key])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert len(server.requests) == 3  # pieces 2 and 3 only
    with open_store(url) as store:
        assert {"bern", "basel", "geneva"} <= set(store.session("atlas").load_graph().nodes)


def test_part_ranges() -> None:
    assert part_ranges([3, 1, 2, 5, 7, 8]) == "1-3, 5, 7-8"
    assert part_ranges([]) == "none"
