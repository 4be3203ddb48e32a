"""`kgot memory resolve|suggestions|accept|reject` on real stores: the JSON of the issue, bad
input as one line with exit code 2 and nothing written."""

from __future__ import annotations

import json

import pytest

from kgot.cli.main import main
from kgot.persistence import open_store
from kgot.tests.memory.test_memory_api import _seed


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_resolve_json_then_apply_then_decide(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url) as store:
        _seed(store)
        version = store.session("fund").version
    db = ("--db", store_url)

    code, out, err = _run(capsys, "memory", "resolve", "--entity", "fund", "--json", *db)
    assert code == 0, err
    assert json.loads(out) == {
        "merges": [
            {
                "canonical": "apple",
                "aliases": ["apple_old"],
                "type": "Company",
                "score": 1.0,
                "reason": "same name 'apple'",
            }
        ],
        "suggestions": [
            {"id": None, "nodes": ["meta", "meta_fin"], "type": "Company", "score": 0.611}
        ],
    }
    with open_store(store_url) as store:
        assert store.session("fund").version == version

    code, out, err = _run(capsys, "memory", "resolve", "-e", "fund", "--apply", "--json", *db)
    assert code == 0, err
    [row] = json.loads(out)["suggestions"]
    assert isinstance(row["id"], int)

    code, out, err = _run(capsys, "memory", "suggestions", "--entity", "fund", *db)
    assert code == 0, err
    assert out.startswith(f"{row['id']}  merge  meta and meta_fin may be one Company")

    code, out, err = _run(capsys, "memory", "reject", "--entity", "fund", str(row["id"]), *db)
    assert (code, err) == (0, "")
    code, out, err = _run(capsys, "memory", "suggestions", "--entity", "fund", "--json", *db)
    assert json.loads(out) == []


@pytest.mark.slow
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url) as store:
        _seed(store, "fund")
        _seed(store, "other")
    db = ("--db", store_url)
    code, out, err = _run(capsys, "memory", "resolve", "-e", "other", "--apply", "--json", *db)
    [foreign] = [row["id"] for row in json.loads(out)["suggestions"]]
    with open_store(store_url) as store:
        before = store.session("fund").version

    cases = {
        ("memory", "resolve", "--entity", "nobody", *db): "no entity named 'nobody'",
        ("memory", "suggestions", "--entity", "nobody", *db): "no entity named 'nobody'",
        ("memory", "accept", "--entity", "fund", "4242", *db): "no suggestion 4242 in entity",
        ("memory", "reject", "--entity", "fund", "4242", *db): "no suggestion 4242 in entity",
        ("memory", "accept", "--entity", "fund", str(foreign), *db): (
            f"no suggestion {foreign} in entity 'fund'"
        ),
        ("memory", "suggestions", "--entity", "fund", "--status", "maybe", *db): "maybe",
    }
    for args, expected in cases.items():
        code, out, err = _run(capsys, *args)
        assert code == 2, (args, err)
        assert err.startswith("kgot: error: ") and err.count("\n") == 1, err
        assert expected in err, err
    with open_store(store_url) as store:
        assert store.session("fund").version == before
        assert store.session("fund").suggestions("open") == []
        assert [s.id for s in store.session("other").suggestions("open")] == [foreign]
