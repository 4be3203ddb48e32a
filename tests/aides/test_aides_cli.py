"""`kgot aide …` on a real store: create, add a folder source and a JSONL output, run once with
a scripted model, status, items, list, delete; bad input is one line and exit code 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.tests.aides.aide_scripts import BROKEN, NOTES, QUERY, inbox


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """A scripted model file: code for the Acme note, a fixed digest."""
    path = tmp_path / "script.json"
    code = (
        '```python\nG.add_node("acme", label="Organization", name="Acme Corp")\n'
        'G.add_node("zurich", label="Place", name="Zurich")\n'
        'G.add_edge("acme", "zurich", relationship="located_in")\n```'
    )
    path.write_text(
        json.dumps(
            {
                "update_graph": [code],
                "query": [QUERY],
                "digest": ["- Acme is in Zurich [node:acme]"],
            }
        ),
        encoding="utf-8",
    )
    return path


@pytest.mark.slow
def test_create_add_run_status_items_list_delete(
    tmp_path: Path, store_url: str, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--db", store_url)
    folder = inbox(tmp_path / "inbox", ["acme.md"])
    outbox = tmp_path / "outbox.jsonl"

    assert _run(capsys, "aide", "create", "research", "--entity", "acme", *db)[0] == 0
    code, out, err = _run(capsys, "aide", "source", "add", "research", "--dir", str(folder), *db)
    assert code == 0, err
    assert re.fullmatch(r"added dir source \d+ to aide research", out.strip())
    code, out, err = _run(capsys, "aide", "output", "add", "research", "--jsonl", str(outbox), *db)
    assert code == 0, err

    code, out, err = _run(
        capsys, "aide", "run", "research", "--once", "--model", f"scripted:{script}", "--json", *db
    )
    assert code == 0, err
    cycle = json.loads(out)
    assert (cycle["ingested"], cycle["failed"], cycle["digest"]["facts"]) == (1, 0, ["node:acme"])
    # One log line per item and per cycle, with timestamps, on stderr.
    lines = err.strip().splitlines()
    assert any("item" in line and " done " in line for line in lines)
    assert lines[-1].split(" ", 2)[2].startswith(f"cycle {cycle['cycle_id']} of research")
    assert json.loads(outbox.read_text(encoding="utf-8"))["digest"].startswith("- Acme")

    code, out, err = _run(capsys, "aide", "status", "research", "--json", *db)
    assert code == 0, err
    status = json.loads(out)
    assert status["items"] == {"done": 1} and status["backlog"] == 0
    assert status["cycles"][0]["items"] == 1 and status["cycles"][0]["status"] == "finished"

    code, out, err = _run(capsys, "aide", "items", "research", *db)
    assert code == 0, err
    assert out.startswith("done v1 (1 ingestion attempt) 'acme.md'")
    code, out, _ = _run(capsys, "aide", "items", "research", "--status", "failed", *db)
    assert out.strip() == "aide research has no failed items"

    code, out, _ = _run(capsys, "aide", "list", "--json", *db)
    assert json.loads(out) == [{"name": "research", "entity": "acme", "program": "digest"}]

    code, out, _ = _run(capsys, "aide", "delete", "research", "--yes", *db)
    assert code == 0 and "acme and its graph are kept" in out
    code, out, _ = _run(capsys, "entities", "list", "--json", *db)
    assert [row["name"] for row in json.loads(out)] == ["acme"]


@pytest.mark.slow
def test_failed_items_are_listed_with_their_reason(
    tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--db", store_url)
    script = tmp_path / "broken.json"
    script.write_text(json.dumps({"update_graph": [BROKEN], "fix_code": [BROKEN]}))
    folder = inbox(tmp_path / "inbox", ["acme.md"])
    _run(capsys, "aide", "create", "research", "--entity", "acme", *db)
    _run(capsys, "aide", "source", "add", "research", "--dir", str(folder), *db)

    code, _out, err = _run(
        capsys, "aide", "run", "research", "--once", "--model", f"scripted:{script}", *db
    )

    assert code == 0, err
    code, out, _ = _run(capsys, "aide", "items", "research", "--status", "failed", "--json", *db)
    [item] = json.loads(out)
    assert item["attempts"] == 1 and "gave up after" in item["reason"]
    assert NOTES["acme.md"] not in out  # the text is kept in the store, not printed


@pytest.mark.slow
def test_an_email_output_is_added_with_its_recipients(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--db", store_url)
    _run(capsys, "aide", "create", "research", "--entity", "acme", *db)
    mail = ("--smtp", "smtp://127.0.0.1:2525", "--to", "me@example.com,you@example.com")

    code, out, err = _run(
        capsys, "aide", "output", "add", "research", *mail, "--from", "k@example.com", *db
    )

    assert code == 0 and out.startswith("added smtp output"), err
    [output] = json.loads(_run(capsys, "aide", "status", "research", "--json", *db)[1])["outputs"]
    assert output["kind"] == "smtp"
    assert output["spec"]["to"] == ["me@example.com", "you@example.com"]
    assert output["spec"]["from"] == "k@example.com" and output["spec"]["tls"] == "none"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("aide", "run", "nobody", "--once"), "no aide named 'nobody'"),
        (
            ("aide", "source", "add", "research", "--dir", "/no/such/folder"),
            "not an existing folder",
        ),
        (("aide", "source", "add", "research", "--rss", "feed.xml"), "--rss needs the http(s) URL"),
        (("aide", "source", "add", "research", "--rss", "/no/feed.xml"), "no such file"),
        (("aide", "source", "add", "research", "--rss", "/"), "is a folder; add a folder"),
        (("aide", "source", "add", "research", "--rss", "file://h/f.xml"), "a file URL names"),
        (
            ("aide", "output", "add", "research", "--webhook", "ftp://x/y"),
            "--webhook needs an http(s) URL",
        ),
        (
            ("aide", "output", "add", "research", "--smtp", "mail.example.com"),
            "--smtp needs smtp://",
        ),
        (
            ("aide", "output", "add", "research", "--jsonl", "o.jsonl", "--to", "a@b.c"),
            "go with --smtp",
        ),
        (("aide", "run", "research", "--cron", "every monday"), "is not a cron expression"),
        (("aide", "run", "research", "--every", "soon"), "is not a duration"),
        (("aide", "run", "research"), "give exactly one of --once, --every"),
        (("aide", "source", "add", "research"), "give exactly one source"),
        (("aide", "create", "research", "--entity", "acme"), "exists already"),
        (("aide", "create", "other", "--entity", "acme", "--program", "poetry"), "unknown program"),
        (("aide", "items", "research", "--status", "lost"), "--status 'lost' is not one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    store_url: str, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    _run(capsys, "aide", "create", "research", "--entity", "acme", "--db", store_url)

    code, out, err = _run(capsys, *args, "--db", store_url)

    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("kgot: error: ")
    assert message in err
