"""`kgot mcp config CLIENT`: the JSON each client wants, with absolute paths and no secret, and
one line with exit code 2 for bad input. The printed stdio configuration is started as a client
would start it (another folder, a bare environment) and answers a search."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from kgot.cli.main import main
from kgot.mcp_server import client_config
from kgot.mcp_server.client_config import Launch, kgot_launch, store_argument
from kgot.persistence import open_store
from kgot.tests.mcp_server.mcp_support import run, seed


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding a seeded store ``kgot.db`` (entity ``a``), made the working folder so
    that a relative ``--db`` can be checked to come out absolute."""
    seed(str(tmp_path / "kgot.db"), "a")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _config(capsys: pytest.CaptureFixture[str], *arguments: str) -> dict[str, Any]:
    assert main(["mcp", "config", *arguments]) == 0
    captured = capsys.readouterr()
    return dict(json.loads(captured.out))


def _refused(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    assert main(["mcp", "config", *arguments]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and captured.out == "", captured
    return lines[0]


@pytest.mark.slow
def test_claude_desktop_config_starts_a_working_server(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = _config(capsys, "claude-desktop", "--entity", "a", "--db", "kgot.db")
    server = printed["mcpServers"]["kgot"]
    assert set(printed) == {"mcpServers"} and set(server) == {"command", "args"}
    assert Path(server["command"]).is_absolute() and os.access(server["command"], os.X_OK)
    db = str((workdir / "kgot.db").resolve())
    tail = ["mcp", "serve", "--entity", "a", "--label", "claude-desktop", "--db", db]
    assert server["args"][-len(tail) :] == tail

    # As Claude Desktop would: its own folder and environment (no virtual environment on PATH,
    # no KGOT_DB); only the isolated XDG folders are kept so no developer settings are read.
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()
    bare = {name: os.environ[name] for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")}

    async def search() -> dict[str, Any]:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        parameters = StdioServerParameters(
            command=server["command"],
            args=server["args"],
            env={"PATH": "/usr/bin:/bin", **bare},
            cwd=str(elsewhere),
        )
        with open(os.devnull, "w") as quiet:
            async with (
                stdio_client(parameters, errlog=quiet) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("search_memory", {"query": "Apple"})
                return dict(result.structured_content or {})

    hits = run(search)["hits"]
    assert hits and hits[0]["id"] == "apple"


@pytest.mark.slow
def test_vscode_and_cursor_stdio_shapes(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = workdir / "settings.toml"
    config.write_text("")
    arguments = ("--entity", "a", "--db", str(workdir / "kgot.db"), "--name", "memory")
    assert main(["--config", "settings.toml", "mcp", "config", "vscode", *arguments]) == 0
    vscode = json.loads(capsys.readouterr().out)
    server = vscode["servers"]["memory"]
    assert set(vscode) == {"servers"} and server["type"] == "stdio"
    # The settings file the command was given is passed on, by absolute path, before `mcp`.
    start = server["args"].index("--config")
    assert server["args"][start : start + 3] == ["--config", str(config), "mcp"]
    assert server["args"][-4:-2] == ["--label", "vscode"]

    cursor = _config(capsys, "cursor", *arguments, "--label", "ide.1")
    assert set(cursor["mcpServers"]["memory"]) == {"command", "args"}
    assert cursor["mcpServers"]["memory"]["args"][-4:-2] == ["--label", "ide.1"]


@pytest.mark.slow
def test_http_configs_hold_placeholders_not_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    vscode = _config(capsys, "vscode", "--http", "127.0.0.1:8765")
    assert vscode == {
        "servers": {
            "kgot": {
                "type": "http",
                "url": "http://127.0.0.1:8765/mcp",
                "headers": {"Authorization": "Bearer ${input:kgot-token}"},
            }
        },
        "inputs": [
            {
                "type": "promptString",
                "id": "kgot-token",
                "description": vscode["inputs"][0]["description"],
                "password": True,
            }
        ],
    }
    cursor = _config(capsys, "cursor", "--http", "https://kg.example.org/mcp")
    assert cursor == {
        "mcpServers": {
            "kgot": {
                "url": "https://kg.example.org/mcp",
                "headers": {"Authorization": "Bearer ${env:KGOT_MCP_TOKEN}"},
            }
        }
    }
    named = _config(capsys, "cursor", "--http", "[::1]:9000", "--token-env", "KG_TOKEN")
    assert named["mcpServers"]["kgot"] == {
        "url": "http://[::1]:9000/mcp",
        "headers": {"Authorization": "Bearer ${env:KG_TOKEN}"},
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (("slack", "--entity", "a"), "unknown client 'slack'; choose one of: claude-desktop"),
        (("vscode", "--entity", "zz"), "no entity named 'zz'"),
        (("vscode",), "give --entity NAME"),
        (("vscode", "--entity", "a", "--label", "two words"), "--label"),
        (("vscode", "--entity", "a", "--name", "9lives"), "--name"),
        (("claude-desktop", "--http", "127.0.0.1:8765"), "only stdio servers"),
        (("vscode", "--http", "127.0.0.1:8765", "--entity", "a"), "drop --entity"),
        (("vscode", "--http", "127.0.0.1:8765", "--token-env", "T"), "drop --token-env"),
        (("cursor", "--http", "127.0.0.1:8765", "--token-env", "not a name"), "--token-env"),
        (("cursor", "--http", "ftp://host/mcp"), "--http takes"),
        (("cursor", "--http", "https://me:hunter2@host/mcp"), "must not carry a user"),
        (("cursor", "--entity", "a", "--token-env", "T"), "--token-env belongs to --http"),
    ],
)
def test_bad_input_gets_one_line_and_exit_2(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    arguments: tuple[str, ...],
    expected: str,
) -> None:
    line = _refused(capsys, *arguments, *(() if "--http" in arguments else ("--db", "kgot.db")))
    assert expected in line and "hunter2" not in line


def test_no_store_is_refused_without_creating_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.db"
    line = _refused(capsys, "cursor", "--entity", "a", "--db", str(missing))
    assert "no entity named 'a'" in line and not missing.exists()


def test_a_store_password_is_left_out() -> None:
    url = "postgresql://kg:s3cret@db.example.org:5432/kgot?schema=acme"
    argument = store_argument(url)
    assert argument.password_dropped
    assert argument.value == "postgresql://kg@db.example.org:5432/kgot?schema=acme"
    plain = store_argument("postgresql://kg@db.example.org/kgot")
    assert plain == client_config.StoreArgument("postgresql://kg@db.example.org/kgot")


def test_the_launch_falls_back_to_python_dash_m(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)  # a virtual environment's link, kept as it is
    monkeypatch.setattr(client_config.shutil, "which", lambda name: None)
    assert kgot_launch(str(python)) == Launch(str(python), ("-m", "kgot"))

    monkeypatch.setattr(client_config.shutil, "which", lambda name: "/opt/tools/kgot")
    assert kgot_launch(str(python)) == Launch("/opt/tools/kgot")

    script = bin_dir / "kgot"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert kgot_launch(str(python)) == Launch(str(script))


@pytest.mark.postgres
def test_a_postgres_store_is_named_without_its_password(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(postgres_url) as store:
        store.create_entity("a")
    # The test server trusts local connections, so the password is never checked; it only has
    # to stay out of what is printed.
    with_password = postgres_url.replace("postgres@", "postgres:hunter2@", 1)
    assert with_password != postgres_url
    assert main(["mcp", "config", "cursor", "--entity", "a", "--db", with_password]) == 0
    captured = capsys.readouterr()
    args = json.loads(captured.out)["mcpServers"]["kgot"]["args"]
    assert args[-1] == postgres_url and "hunter2" not in captured.out + captured.err
    assert "PGPASSWORD" in captured.err
