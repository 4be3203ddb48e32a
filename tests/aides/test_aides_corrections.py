"""Corrections to an aide (issue 25): `kgot aide source list|set|remove`, `kgot aide output
list|remove`, `kgot aide delete` asking first, `--every` with a unit, and "no aide named"
naming the database. On SQLite and PostgreSQL.

A removal keeps what the source brought (its done items' rows too, so their ids stay known),
drops its items not ingested and leaves an item being ingested to its worker; it touches no
row of another aide, byte for byte. Bad input is one line and exit code 2."""

from __future__ import annotations

import io
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from kgot.aides import Aide, aide_rows, create_aide
from kgot.aides.schema import AIDE_TABLE_ORDER, AIDE_TABLES
from kgot.aides.sources import SourceItem
from kgot.cli.aide_cmd import parse_every
from kgot.config import Settings
from kgot.errors import UsageError
from kgot.persistence import Store
from kgot.tests.aides.aide_scripts import QUERY, inbox
from kgot.tests.aides.test_aides_sources import FIRST, SECOND, rss
from kgot.tests.support.command_line import refused as _refused
from kgot.tests.support.command_line import run_cli as _run

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _rows(store: Store, aide_id: int) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the aide owns, table by table, as the database gives them back."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    with store.read() as connection:
        for name in AIDE_TABLE_ORDER:
            table = getattr(AIDE_TABLES, name)
            owner = table.c.id if name == "aides" else table.c.aide_id
            found[name] = [
                tuple(row)
                for row in connection.execute(
                    select(table).where(owner == aide_id).order_by(table.c.id)
                )
            ]
    return found


def _seed(store: Store, settings: Settings, name: str, folder: Path) -> tuple[Aide, int, int, int]:
    """An aide with a folder source whose items are done (2), failed (1), being ingested (1)
    and new (1), a search source, and a JSONL output with a delivered and a refused digest."""
    aide = create_aide(store, name, "acme", settings=settings)
    folder.mkdir()
    source = aide.add_source("dir", str(folder))
    search = aide.add_source("search", f"{name} news")
    output = aide.add_output("jsonl", str(folder.parent / f"{name}.jsonl"))
    made = [
        SourceItem(f"{name}/{n}", n, f"Text {n}.", str(folder / n), None, "dir")
        for n in ("done1", "done2", "failed", "busy", "new")
    ]
    aide_rows.record_poll(store, aide.row, source, made, cursor={}, error=None, now=NOW)
    cycle = aide_rows.start_cycle(store, aide.row, NOW)
    for ok in (True, True, False):
        row = aide_rows.claim_next(store, aide.row, "worker", NOW, cycle)
        aide_rows.finish_item(
            store,
            row.id,
            owner="worker",
            ok=ok,
            version=1 if ok else None,
            reason=None if ok else "the code never passed",
            report=None,
            now=NOW,
        )
    aide_rows.claim_next(store, aide.row, "worker", NOW, cycle)  # "busy": being ingested
    for key, ok in (("first", True), ("second", False)):
        assert aide_rows.claim_delivery(
            store, aide.row, output, key, cycle, owner="worker", now=NOW, at_most_once=False
        )
        aide_rows.record_delivery(store, output, key, owner="worker", ok=ok, error=None, now=NOW)
    return aide, source, search, output


@pytest.mark.slow
def test_sources_and_outputs_are_listed_edited_and_removed_for_one_aide_only(
    tmp_path: Path, store: Store, store_url: str, settings: Settings, capsys: Any
) -> None:
    db = ("--db", store_url)
    aide, source, search, output = _seed(store, settings, "research", tmp_path / "research")
    other, other_source, other_search, other_output = _seed(
        store, settings, "other", tmp_path / "other"
    )
    untouched = _rows(store, other.row.id)
    folder = str((tmp_path / "research").resolve())

    # source list
    code, out, err = _run(capsys, "aide", "source", "list", "research", "--json", *db)
    assert code == 0, err
    listed = json.loads(out)
    assert [(s["id"], s["kind"], s["spec"]) for s in listed] == [
        (source, "dir", {"path": folder}),
        (search, "search", {"query": "research news"}),
    ]
    assert listed[0]["items"] == {"new": 1, "ingesting": 1, "done": 2, "failed": 1}
    assert listed[1]["items"] == {} and listed[1]["last_error"] is None
    code, out, _ = _run(capsys, "aide", "source", "list", "research", *db)
    assert out.splitlines() == [
        f"source {source}: dir {folder} (1 new, 1 ingesting, 2 done, 1 failed)",
        f"source {search}: search research news (no items yet)",
    ]

    # source remove: another aide's id, an unknown id, then its own
    _refused(
        _run(capsys, "aide", "source", "remove", "research", str(other_source), *db),
        f"aide 'research' has no source {other_source}; see its sources with "
        "`kgot aide source list research`",
    )
    _refused(_run(capsys, "aide", "source", "remove", "research", "999", *db), "no source 999")
    code, out, err = _run(capsys, "aide", "source", "remove", "research", str(source), *db)
    assert code == 0, err
    assert out.strip() == (
        f"removed source {source} (dir {folder}); 2 items it brought stay in the graph; "
        "2 pending or failed items dropped; 1 item being ingested is left to finish"
    )
    left = {row.item_id: row for row in aide_rows.items(store, aide.row, limit=100)}
    assert sorted((i, r.status, r.source_id) for i, r in left.items()) == [
        ("research/busy", "ingesting", None),
        ("research/done1", "done", None),
        ("research/done2", "done", None),
    ]
    assert aide_rows.pending_items(store, aide.row, None) == []
    # The item being ingested, its worker gone: it ends failed, never retried.
    assert aide_rows.reclaim_abandoned(store, aide.row, NOW + timedelta(days=1)) == 1
    [busy] = aide_rows.items(store, aide.row, "failed")
    assert busy.item_id == "research/busy" and "its source was removed" in busy.reason
    assert aide_rows.pending_items(store, aide.row, None) == []
    # A poll of the removed source that ends after the removal records nothing.
    late = SourceItem("research/late", "late", "Late.", "x", None, "dir")
    polled = {"path": folder}
    recorded = aide_rows.record_poll(
        store, aide.row, source, [late], cursor={}, error=None, now=NOW, spec=polled
    )
    assert recorded.added == 0 and aide_rows.items(store, aide.row, "new") == []

    # source set
    found = SourceItem(
        "https://acme.example/a", "a", "A.", "https://acme.example/a", None, "search"
    )
    aide_rows.record_poll(
        store, aide.row, search, [found], cursor={"seen": ["a"]}, error="HTTP 500", now=NOW
    )
    code, out, err = _run(
        capsys, "aide", "source", "set", "research", str(search), "--search", "acme  earnings", *db
    )
    assert code == 0, err
    assert out.startswith(
        f"source {search} now reads search acme earnings (was search research news); "
        "it is polled afresh, and the 1 item it has read is not ingested again"
    )
    [row] = [r for r in aide_rows.sources(store, aide.row) if r.id == search]
    assert (dict(row.spec), row.cursor, row.last_error, row.failures, row.polled_at) == (
        {"query": "acme earnings"},
        {},
        None,
        0,
        None,
    )
    code, out, _ = _run(
        capsys, "aide", "source", "set", "research", str(search), "--search", "acme earnings", *db
    )
    assert (code, out.strip()) == (0, f"source {search} (search acme earnings) is unchanged")
    # A poll of the old query that ends after the edit records nothing; one of the new
    # query finding the item the source read before records nothing new either.
    polled = {"query": "research news"}
    recorded = aide_rows.record_poll(
        store, aide.row, search, [late], cursor={}, error=None, now=NOW, spec=polled
    )
    assert recorded.added == 0
    recorded = aide_rows.record_poll(
        store, aide.row, search, [found], cursor={}, error=None, now=NOW, spec=row.spec
    )
    assert recorded.added == 0 and len(aide_rows.items(store, aide.row, "new")) == 1
    _refused(
        _run(capsys, "aide", "source", "set", "research", str(search), "--dir", folder, *db),
        f"source {search} of aide 'research' is a search source and keeps its kind; give "
        "--search, or remove it and add a new source with --dir",
    )
    third = aide.add_source("search", "globex")
    _refused(
        _run(
            capsys,
            "aide",
            "source",
            "set",
            "research",
            str(third),
            "--search",
            "acme earnings",
            *db,
        ),
        f"aide 'research' has this search source already (source {search})",
    )
    _refused(
        _run(capsys, "aide", "source", "set", "research", str(other_search), "--search", "x", *db),
        f"aide 'research' has no source {other_search}",
    )
    _refused(
        _run(capsys, "aide", "source", "set", "research", str(search), "--search", " ", *db),
        "--search needs a query",
    )
    _refused(
        _run(capsys, "aide", "source", "set", "research", str(search), *db),
        "give exactly one source",
    )
    _refused(
        _run(capsys, "aide", "source", "set", "research", "two", "--search", "x", *db),
        "Invalid value for 'ID'",
    )

    # output list, output remove
    code, out, err = _run(capsys, "aide", "output", "list", "research", "--json", *db)
    assert code == 0, err
    [listed_output] = json.loads(out)
    outbox = str((tmp_path / "research.jsonl").resolve())
    assert listed_output | {"created_at": None} == {
        "id": output,
        "kind": "jsonl",
        "spec": {"path": outbox},
        "delivered": 1,
        "undelivered": 1,
        "created_at": None,
    }
    code, out, _ = _run(capsys, "aide", "output", "list", "research", *db)
    assert out.strip() == f"output {output}: jsonl {outbox} (1 delivered, 1 not delivered)"
    _refused(
        _run(capsys, "aide", "output", "remove", "research", str(other_output), *db),
        f"aide 'research' has no output {other_output}; see its outputs with "
        "`kgot aide output list research`",
    )
    code, out, err = _run(capsys, "aide", "output", "remove", "research", str(output), *db)
    assert code == 0, err
    assert out.strip() == (
        f"removed output {output} (jsonl {outbox}); its delivery log (2 entries) was deleted "
        "with it"
    )
    assert _rows(store, aide.row.id)["aide_deliveries"] == []
    code, out, _ = _run(capsys, "aide", "output", "list", "research", *db)
    assert out.strip() == (
        "aide research has no outputs; add one with `kgot aide output add research --jsonl FILE`"
    )
    assert json.loads(_run(capsys, "aide", "output", "list", "research", "--json", *db)[1]) == []

    assert _rows(store, other.row.id) == untouched


@pytest.mark.slow
def test_a_removed_source_keeps_its_facts_and_a_feed_moved_elsewhere_reads_nothing_twice(
    tmp_path: Path, store: Store, store_url: str, capsys: Any
) -> None:
    db = ("--db", store_url)
    script = tmp_path / "script.json"
    code = (
        '```python\nG.add_node("acme", label="Organization", name="Acme Corp")\n'
        'G.add_node("zurich", label="Place", name="Zurich")\n'
        'G.add_edge("acme", "zurich", relationship="located_in")\n```'
    )
    script.write_text(
        json.dumps({"update_graph": [code], "query": [QUERY], "digest": ["- Acme [node:acme]"]})
    )
    run = ("aide", "run", "research", "--once", "--json", "--model", f"scripted:{script}", *db)
    folder = str(inbox(tmp_path / "inbox", ["acme.md", "globex.md"]))
    assert _run(capsys, "aide", "create", "research", "--entity", "acme", *db)[0] == 0
    code, out, err = _run(capsys, "aide", "source", "add", "research", "--dir", folder, *db)
    assert code == 0, err
    added = out.split()[3]  # "added dir source ID to aide research"

    cycle = json.loads(_run(capsys, *run, "--max-items", "1")[1])
    assert (cycle["new_items"], cycle["ingested"], cycle["backlog"]) == (2, 1, 1)
    version = store.session("acme").version
    code, out, err = _run(capsys, "aide", "source", "remove", "research", added, *db)
    assert code == 0, err
    assert out.strip().endswith(
        "1 item it brought stays in the graph; 1 pending or failed item dropped"
    )
    assert store.session("acme").version == version
    assert "acme" in store.session("acme").load_graph()

    # The dropped item is not ingested: nothing is left to do.
    cycle = json.loads(_run(capsys, *run)[1])
    assert (cycle["sources"], cycle["new_items"], cycle["ingested"], cycle["backlog"]) == (
        0,
        0,
        0,
        0,
    )
    code, out, _ = _run(capsys, "aide", "items", "research", "--json", *db)
    assert [item["status"] for item in json.loads(out)] == ["done"]

    # A feed moved to another place: a fresh cursor, but the entry read before is not new.
    # (--max-cost-usd 0: the cycles only poll.)
    first, both = tmp_path / "first.xml", tmp_path / "both.xml"
    first.write_text(rss(FIRST), encoding="utf-8")
    both.write_text(rss(SECOND, FIRST), encoding="utf-8")
    for written in (first, both):  # settled: a file written in the last seconds waits
        os.utime(written, (time.time() - 60, time.time() - 60))
    code, out, err = _run(capsys, "aide", "source", "add", "research", "--rss", str(first), *db)
    assert code == 0, err
    feed = out.split()[3]
    poll = (*run, "--max-cost-usd", "0")
    assert json.loads(_run(capsys, *poll)[1])["new_items"] == 1
    code, out, err = _run(
        capsys, "aide", "source", "set", "research", feed, "--rss", str(both), *db
    )
    assert code == 0 and "polled afresh" in out, err
    assert json.loads(_run(capsys, *poll)[1])["new_items"] == 1  # SECOND only


@pytest.mark.slow
def test_delete_asks_first_and_refuses_without_a_terminal(
    store_url: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = ("--db", store_url)
    _run(capsys, "aide", "create", "research", "--entity", "acme", *db)

    _refused(
        _run(capsys, "aide", "delete", "research", *db),  # stdin is not a terminal in tests
        "deleting aide 'research' (0 sources, 0 items, 0 outputs) cannot be undone; pass --yes "
        "to confirm",
    )

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, _ = _run(capsys, "aide", "delete", "research", *db)
    assert code != 0 and "Delete aide 'research' with 0 sources" in out
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, err = _run(capsys, "aide", "delete", "research", *db)
    assert code == 0 and "deleted aide research" in out, err
    assert json.loads(_run(capsys, "aide", "list", "--json", *db)[1]) == []

    _run(capsys, "aide", "create", "again", "--entity", "acme", *db)
    monkeypatch.setattr("sys.stdin", Terminal(""))  # --yes asks nothing
    code, out, err = _run(capsys, "aide", "delete", "again", "--yes", *db)
    assert code == 0 and "deleted aide again" in out, err


@pytest.mark.slow
def test_every_needs_a_unit(store_url: str, capsys: Any) -> None:
    _run(capsys, "aide", "create", "research", "--entity", "acme", "--db", store_url)

    _refused(
        _run(capsys, "aide", "run", "research", "--every", "15", "--db", store_url),
        "--every 15 needs a unit: 15s, 15m, 15h or 15d",
    )
    assert [parse_every(text) for text in ("15m", "1h", "30s", "1d", " 2 m ")] == [
        timedelta(minutes=15),
        timedelta(hours=1),
        timedelta(seconds=30),
        timedelta(days=1),
        timedelta(minutes=2),
    ]
    with pytest.raises(UsageError, match=r"^--every 1\.5 needs a unit: 1\.5s, 1\.5m"):
        parse_every("1.5")


@pytest.mark.slow
def test_no_aide_named_says_which_database_was_looked_in(
    tmp_path: Path, store: Store, store_url: str, capsys: Any
) -> None:
    for args in (("status", "nobody"), ("source", "list", "nobody"), ("delete", "nobody")):
        _refused(
            _run(capsys, "aide", *args, "--db", store_url),
            f"no aide named 'nobody' in {store.target.display}; list them with `kgot aide list`",
        )
    missing = tmp_path / "nowhere" / "kgot.db"
    _refused(
        _run(capsys, "aide", "output", "list", "nobody", "--db", str(missing)),
        f"no aide named 'nobody': there is no kgot database at {missing}",
    )
