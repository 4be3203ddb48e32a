"""`kgot mcp serve` and `kgot mcp token`: bad input gets one clear line and exit code 2 before
anything is served or written; tokens are shown once and stored only as hashes."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.mcp_server.tokens import hash_token, read_token_file
from kgot.persistence import open_store
from kgot.tests.mcp_server.mcp_support import free_port


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = str(tmp_path / "kgot.db")
    with open_store(url) as store:
        store.create_entity("acme")
    return url


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.slow
def test_token_add_list_revoke_keeps_only_hashes(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(db) as store:
        store.create_entity("beta")
    tokens = tmp_path / "tokens.toml"
    args = ["mcp", "token", "add", "claude", "--entity", "acme,beta", "--scope", "read,write"]
    assert main([*args, "--tokens", str(tokens), "--db", db]) == 0
    token = capsys.readouterr().out.strip()
    assert token.startswith("kgot_mcp_") and len(token) > 40
    text = tokens.read_text()
    assert token not in text and hash_token(token) in text
    assert tokens.stat().st_mode & 0o077 == 0
    assert main(["mcp", "token", "list", "--tokens", str(tokens), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == [
        {
            "label": "claude",
            "entities": ["acme", "beta"],
            "scopes": ["read", "write"],
            "created_at": listed[0]["created_at"],
        }
    ]
    again = ["mcp", "token", "add", "claude", "--entity", "acme", "--tokens", str(tokens)]
    assert main([*again, "--db", db]) == 2
    assert "exists" in _one_line(capsys.readouterr().err)
    assert main(["mcp", "token", "revoke", "claude", "--tokens", str(tokens)]) == 0
    assert read_token_file(tokens).records == ()
    assert main(["mcp", "token", "revoke", "claude", "--tokens", str(tokens)]) == 2
    assert "no token labelled 'claude'" in _one_line(capsys.readouterr().err)


def test_bad_scope_and_label_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.toml"
    code = main(
        ["mcp", "token", "add", "x", "-e", "acme", "--scope", "root", "--tokens", str(tokens)]
    )
    assert code == 2 and "unknown scope 'root'" in _one_line(capsys.readouterr().err)
    code = main(["mcp", "token", "add", "bad label", "-e", "acme", "--tokens", str(tokens)])
    assert code == 2 and "label" in _one_line(capsys.readouterr().err)
    assert not tokens.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("this is = not [toml", "is not valid TOML"),
        ('[[tokens]]\nlabel = "a"\nsha256 = "abc"\nentities = []\nscopes = ["fly"]\n', "sha256"),
        ("", "holds no token"),
    ],
)
def test_serve_refuses_a_malformed_or_empty_tokens_file(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(content)
    tokens.chmod(0o600)
    code = main(["mcp", "serve", "--http", "127.0.0.1:8765", "--tokens", str(tokens), "--db", db])
    line = _one_line(capsys.readouterr().err)
    assert code == 2 and expected in line and str(tokens) in line


@pytest.mark.slow
def test_malformed_entries_are_grouped_in_one_line(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[tokens]]\nlabel = "a"\nsha256 = "abc"\nentities = []\nscopes = ["fly"]\n')
    main(["mcp", "serve", "--http", "127.0.0.1:8765", "--tokens", str(tokens), "--db", db])
    line = _one_line(capsys.readouterr().err)
    assert "sha256" in line and "entities" in line and "unknown scope fly" in line


@pytest.mark.slow
def test_serve_refuses_a_port_in_use(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.toml"
    assert (
        main(["mcp", "token", "add", "x", "-e", "acme", "--tokens", str(tokens), "--db", db]) == 0
    )
    capsys.readouterr()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code = main(
            ["mcp", "serve", "--http", f"127.0.0.1:{port}", "--tokens", str(tokens), "--db", db]
        )
    line = _one_line(capsys.readouterr().err)
    assert code == 2 and f"port {port} on 127.0.0.1 is in use" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--entity", "nope"], "no entity named 'nope'"),
        ([], "give --entity NAME for stdio"),
        (["--entity", "acme", "--label", "not a label"], "--label 'not a label' must be"),
        (["--http", "127.0.0.1:8765", "--label", "x"], "drop --label"),
        (["--http", "localhost"], "--http takes HOST:PORT"),
        (["--http", ":8765"], "--http takes HOST:PORT"),
        (["--http", "127.0.0.1:99999"], "--http takes HOST:PORT"),
        (["--http", "127.0.0.1:http"], "--http takes HOST:PORT"),
        (["--http", "127.0.0.1:8765"], "--http needs --tokens"),
        (["--http", "127.0.0.1:8765", "--tokens", "/nonexistent/t.toml"], "does not exist"),
    ],
)
def test_serve_bad_command_lines(
    db: str, capsys: pytest.CaptureFixture[str], arguments: list[str], expected: str
) -> None:
    code = main(["mcp", "serve", *arguments, "--db", db])
    line = _one_line(capsys.readouterr().err)
    assert code == 2 and expected in line


@pytest.mark.slow
@pytest.mark.parametrize("mode", [0o644, 0o620, 0o604, 0o640])
def test_serve_refuses_a_tokens_file_other_users_may_read_or_change(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: int
) -> None:
    tokens = tmp_path / "tokens.toml"
    assert (
        main(["mcp", "token", "add", "x", "-e", "acme", "--tokens", str(tokens), "--db", db]) == 0
    )
    capsys.readouterr()
    tokens.chmod(mode)
    code = main(["mcp", "serve", "--http", "127.0.0.1:8765", "--tokens", str(tokens), "--db", db])
    line = _one_line(capsys.readouterr().err)
    assert code == 2 and f"has mode {mode:04o}" in line and f"chmod 600 {tokens}" in line


@pytest.mark.slow
def test_allow_query_refuses_a_sandbox_that_does_not_isolate(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGOT_SANDBOX", "subprocess")
    tokens = tmp_path / "tokens.toml"
    assert (
        main(["mcp", "token", "add", "x", "-e", "acme", "--tokens", str(tokens), "--db", db]) == 0
    )
    capsys.readouterr()
    address = f"127.0.0.1:{free_port()}"
    for transport in (["--entity", "acme"], ["--http", address, "--tokens", str(tokens)]):
        code = main(["mcp", "serve", *transport, "--allow-query", "--db", db])
        line = _one_line(capsys.readouterr().err)
        assert code == 2 and "--allow-query needs an isolating sandbox" in line
