"""`kgot tools list` and `kgot tools run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgot.cli.main import main


@pytest.fixture
def config(tmp_path: Path, server, monkeypatch) -> Path:
    """A config file that lets the tools reach the loopback server."""
    path = tmp_path / "kgot.toml"
    path.write_text(
        "[tools]\nallow_private_urls = true\ntimeout = 10\n"
        f'wikipedia_api = "{server.url("/w/api.php")}"\n'
    )
    monkeypatch.setenv("KGOT_CONFIG", str(path))
    for name in ("KGOT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return path


def test_list_as_json(config, capsys):
    assert main(["tools", "list", "--json"]) == 0
    tools = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert list(tools) == [
        "web_search",
        "visit_page",
        "wikipedia",
        "inspect_file",
        "python",
        "llm_query",
    ]
    assert tools["visit_page"]["enabled"]
    assert any("private and loopback" in note for note in tools["visit_page"]["notes"])
    url = tools["visit_page"]["arguments"][0]
    assert url == {
        "name": "url",
        "type": "string",
        "required": True,
        "description": "The full http(s) address of the page.",
        "default": None,
    }


def test_list_shows_disabled_tools_and_why(config, capsys):
    config.write_text(config.read_text() + 'disabled = ["python"]\n')
    assert main(["tools", "list"]) == 0
    out = capsys.readouterr().out
    assert "python" in out and "disabled" in out and "tools.disabled" in out


def test_unknown_name_in_configuration(config, capsys):
    config.write_text(config.read_text() + 'disabled = ["browser"]\n')
    assert main(["tools", "list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgot: error: tools.disabled names unknown tool(s) browser")
    assert err.count("\n") == 1


@pytest.mark.slow
def test_run_prints_the_result(config, server, capsys):
    server.page("/p", "<html><body><article><p>The answer is 42.</p></article></body></html>")
    assert main(["tools", "run", "visit_page", "--arg", f"url={server.url('/p')}"]) == 0
    assert "The answer is 42." in capsys.readouterr().out


@pytest.mark.slow
def test_run_json_outcome(config, server, capsys):
    server.page("/p", "<html><body><article><p>The answer is 42.</p></article></body></html>")
    code = main(
        [
            "tools",
            "run",
            "visit_page",
            "--arg",
            f"url={server.url('/p')}",
            "--arg",
            "page=1",
            "--json",
        ]
    )
    assert code == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["ok"] and outcome["args"] == {"url": server.url("/p"), "page": "1"}
    assert outcome["source_ref"] == server.url("/p")


def test_run_failure_is_one_line_and_nonzero(config, server, capsys):
    assert main(["tools", "run", "visit_page", "--arg", f"url={server.url('/gone')}"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("kgot: error: visit_page failed (not_found): ")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


@pytest.mark.slow
def test_inspect_file_reads_the_named_file(config, samples, capsys):
    assert main(["tools", "run", "inspect_file", "--arg", f"path={samples['people.csv']}"]) == 0
    assert "| Alan | 41 | Wilmslow |" in capsys.readouterr().out


def test_inspect_file_with_missing_file(config, tmp_path, capsys):
    missing = tmp_path / "nope.pdf"
    assert main(["tools", "run", "inspect_file", "--arg", f"path={missing}"]) == 1
    assert "inspect_file failed (input): no file" in capsys.readouterr().err


def test_value_from_a_file_and_attachments(config, samples, tmp_path, capsys):
    script = tmp_path / "snippet.py"
    script.write_text("print(open('/mnt/inputs/notes.txt').read().split()[2])")
    code = main(
        [
            "tools",
            "run",
            "python",
            "--arg",
            f"code=@{script}",
            "--attach",
            str(samples["notes.txt"]),
        ]
    )
    captured = capsys.readouterr()
    if code != 0 and "sandbox" in captured.err and "cannot run" in captured.err:
        pytest.skip(f"no sandbox here: {captured.err.strip()}")
    assert code == 0, captured.err
    assert captured.out.strip() == "to"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tools", "run", "browse"], "no tool named 'browse'"),
        (["tools", "run", "visit_page", "--arg", "url"], "is not key=value"),
        (["tools", "run", "visit_page", "--arg", "url=a", "--arg", "url=b"], "given twice"),
        (["tools", "run", "python", "--arg", "code=@/no/such/file.py"], "cannot read the file"),
        (
            ["tools", "run", "inspect_file", "--arg", "path=x", "--attach", "/no/such/file"],
            "no such",
        ),
        (["tools", "run", "visit_page", "--arg", "page=2"], "`url`: Field required"),
        (
            ["tools", "run", "web_search", "--arg", "query=x", "--arg", "engine=bing"],
            "unknown argument",
        ),
        (
            ["tools", "run", "visit_page", "--arg", "url=http://x", "--workspace", "/etc/passwd"],
            "not a",
        ),
    ],
)
def test_bad_command_lines(config, capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("kgot: error: ") and err.count("\n") == 1


def test_llm_query_without_a_model(config, capsys):
    assert main(["tools", "run", "llm_query", "--arg", "query=hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgot: error: ") and "model" in err.lower()


def test_bare_group_prints_help_without_an_empty_error(config, capsys):
    assert main(["tools"]) == 2
    captured = capsys.readouterr()
    assert "list" in captured.out and "run" in captured.out
    assert captured.err == ""


def test_at_at_escapes_a_literal_at_sign(config, server, wiki, capsys):
    assert main(["tools", "run", "wikipedia", "--arg", "query=@@home", "--arg", "search=true"]) == 0
    searched = [r.query.get("srsearch") for r in server.requests if "srsearch" in r.query]
    assert searched == ["@home"]


def test_workspace_keeps_downloads_for_a_later_command(config, server, samples, tmp_path, capsys):
    url = server.page("/dl/bundle.zip", samples["bundle.zip"].read_bytes(), "application/zip")
    kept = tmp_path / "kept"
    assert (
        main(["tools", "run", "visit_page", "--arg", f"url={url}", "--workspace", str(kept)]) == 0
    )
    assert (kept / "bundle.zip").is_file()
    assert "deleted" not in capsys.readouterr().err
    code = main(
        [
            "tools",
            "run",
            "inspect_file",
            "--arg",
            "path=workspace/bundle.zip",
            "--arg",
            "member=readme.txt",
            "--workspace",
            str(kept),
        ]
    )
    assert code == 0
    assert "This bundle holds a table and a report." in capsys.readouterr().out


def test_without_workspace_the_user_is_told_files_are_gone(config, server, samples, capsys):
    url = server.page("/dl/bundle.zip", samples["bundle.zip"].read_bytes(), "application/zip")
    assert main(["tools", "run", "visit_page", "--arg", f"url={url}"]) == 0
    err = capsys.readouterr().err
    assert "deleted at exit" in err and "--workspace DIR" in err


def test_model_option_runs_llm_query(config, tmp_path, capsys):
    script = tmp_path / "script.json"
    script.write_text('{"llm_query": ["Reiher"]}')
    assert (
        main(
            [
                "tools",
                "run",
                "llm_query",
                "--arg",
                "query=heron in German?",
                "--model",
                f"scripted:{script}",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() == "Reiher"


def test_sandbox_option_is_used(config, capsys):
    code = main(
        [
            "tools",
            "run",
            "python",
            "--arg",
            "code=print(6 * 7)",
            "--sandbox",
            "subprocess",
            "--json",
        ]
    )
    outcome = json.loads(capsys.readouterr().out)
    assert code == 0 and outcome["output"].strip() == "42"
    assert outcome["source_ref"] == "sandbox:subprocess"


def test_list_shows_what_is_missing(config, capsys, monkeypatch):
    monkeypatch.setenv("KGOT_SANDBOX", "docker")
    monkeypatch.setattr(
        "kgot.sandbox.docker_runner.docker_problem", lambda: "no engine in this test"
    )
    assert main(["tools", "list", "--json"]) == 0
    tools = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert not tools["llm_query"]["enabled"] and not tools["llm_query"]["available"]
    assert "no model configured" in tools["llm_query"]["reason"]
    assert not tools["python"]["enabled"] and "docker" in tools["python"]["reason"]
    assert "no engine in this test" in tools["python"]["reason"]
    assert tools["visit_page"]["enabled"] and tools["visit_page"]["available"]


def test_list_table_folds_instead_of_cutting(config, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["tools", "list"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert "unavailable" in out  # llm_query without a model


@pytest.mark.slow
def test_list_does_not_import_langchain(config):
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from kgot.cli.main import main\n"
        "main(['tools', 'list', '--json'])\n"
        "print('LOADED' if any(m.startswith('langchain') for m in sys.modules) else 'NOT')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("NOT")
