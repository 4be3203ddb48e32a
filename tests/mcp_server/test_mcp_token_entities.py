"""`kgot mcp token add` grants only entities that exist (issue 27, item 12): the tokens file
names entities, not a store, so they are checked in the store the command is given (`--db`,
else KGOT_DB / the configuration), the one `serve --http` serves. An unknown entity (a typo,
the wrong store) is refused in one line saying how to create it first, and the file is not
touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgot.mcp_server.tokens import read_token_file
from kgot.persistence import open_store
from kgot.tests.support.command_line import refused, run_cli


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = str(tmp_path / "kgot.db")
    with open_store(url) as store:
        store.create_entity("acme")
    return url


@pytest.mark.slow
def test_a_token_for_an_entity_that_does_not_exist_is_refused(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.toml"
    add = ("mcp", "token", "add", "claude", "--tokens", str(tokens), "--db", db)

    refused(
        run_cli(capsys, *add, "--entity", "nobody"),
        f"no entity named 'nobody'; create it first with `kgot entities create nobody --db {db}`"
        f", or see `kgot entities list --db {db}`",
    )
    # One unknown among known ones refuses the whole grant.
    refused(run_cli(capsys, *add, "--entity", "acme,nobdy"), "no entity named 'nobdy'")
    assert not tokens.exists()

    assert run_cli(capsys, "entities", "create", "nobody", "--db", db)[0] == 0
    code, out, err = run_cli(capsys, *add, "--entity", "acme,nobody")
    assert code == 0 and out.startswith("kgot_mcp_"), err
    [record] = read_token_file(tokens).records
    assert record.entities == ("acme", "nobody")


@pytest.mark.slow
def test_the_store_checked_is_the_configured_one_without_db(
    db: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tokens = tmp_path / "tokens.toml"
    add = ("mcp", "token", "add", "claude", "--tokens", str(tokens), "--entity", "acme")
    monkeypatch.setenv("KGOT_DB", str(tmp_path / "other.db"))  # a store without acme, or at all
    refused(run_cli(capsys, *add), "no entity named 'acme'")
    assert not (tmp_path / "other.db").exists()  # not created by the check
    monkeypatch.setenv("KGOT_DB", db)
    code, _, err = run_cli(capsys, *add)
    assert code == 0, err
    assert [r.label for r in read_token_file(tokens).records] == ["claude"]


@pytest.mark.slow
def test_a_bad_label_or_scope_is_refused_before_the_store_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.toml"
    nowhere = ("--db", str(tmp_path / "missing" / "kgot.db"), "--tokens", str(tokens))
    refused(
        run_cli(capsys, "mcp", "token", "add", "bad label", "-e", "acme", *nowhere),
        "label",
    )
    refused(
        run_cli(capsys, "mcp", "token", "add", "x", "-e", "acme", "--scope", "root", *nowhere),
        "unknown scope 'root'",
    )
    assert not tokens.exists() and not (tmp_path / "missing").exists()
