"""Clients kgot did not write: the official TypeScript SDK (``@modelcontextprotocol/sdk``)
drives ``kgot mcp serve`` over stdio and over Streamable HTTP with a bearer token, through
``ts_client.mjs`` beside this file; the MCP Inspector's CLI starts the server from the
configuration ``kgot mcp config`` prints.

The npm packages are installed once into ``~/.cache/kgot-tests/`` (``$XDG_CACHE_HOME`` if set),
one folder per package and version, reused by later runs; parallel workers wait on a file lock
and only a finished install is renamed into place. Without ``node``/``npm``, or when the
registry cannot be reached, the tests are skipped with the reason; any other install failure
(a pinned version that does not exist, say) fails them.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kgot.cli.main import main
from kgot.tests.mcp_server.conftest import Deployment
from kgot.tests.mcp_server.mcp_support import free_port, kgot_command, seed

SDK = ("@modelcontextprotocol/sdk", "1.32.2")
# The newest Inspector whose `engines` admits Node 20: from 0.16.0 on it asks for Node >= 22.7.5
# (2.x for >= 22.19.0). Its CLI has no --header yet, so it is used over stdio only.
INSPECTOR = ("@modelcontextprotocol/inspector", "0.15.0")
NODE_MINIMUM = (18, 0)  # the SDK's engines field
CLIENT_SCRIPT = Path(__file__).with_name("ts_client.mjs")

READ_TOOLS = {"search_memory", "get_node", "traverse", "verify_claim", "list_types", "history"}
WRITE_TOOLS = {"save_facts", "remember", "propose_type"}
TEMPLATES = [
    "kgot://entities/{name}/nodes/{node_id}",
    "kgot://entities/{name}/stats",
    "kgot://entities/{name}/types",
]

# How npm reports a registry it cannot reach (DNS, refused or reset connections, timeouts,
# proxies and registries answering 5xx, --offline without the package cached).
_UNREACHABLE = re.compile(
    r"\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ESOCKETTIMEDOUT|ENETUNREACH"
    r"|EHOSTUNREACH|ERR_SOCKET_TIMEOUT|ENOTCACHED|E50[0-4])\b|npm (?:error|ERR!) network"
)


# ------------------------------------------------------------------------- installing clients


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kgot-tests"


def _node_problem() -> str | None:
    """Why node/npm cannot run the clients here (``None`` when they can)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing = " and ".join(name for name, path in (("node", node), ("npm", npm)) if not path)
        return f"the TypeScript MCP client needs node and npm; {missing} is not on PATH"
    version = subprocess.run(
        [node, "--version"], check=False, capture_output=True, text=True, timeout=30
    )
    found = re.match(r"v(\d+)\.(\d+)", version.stdout.strip())
    if found is None or (int(found[1]), int(found[2])) < NODE_MINIMUM:
        wanted = ".".join(map(str, NODE_MINIMUM))
        return f"the MCP SDK needs Node >= {wanted}, this is {version.stdout.strip() or '?'}"
    return None


def npm_install(
    package: str,
    version: str,
    *,
    root: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
) -> Path:
    """The folder whose ``node_modules`` holds ``package@version``, installed on first use.

    Skips the calling test when node/npm are missing or the registry cannot be reached.
    """
    problem = _node_problem()
    if problem:
        pytest.skip(problem)
    root = root or _cache_root()
    slug = package.lstrip("@").replace("/", "-")
    target = root / f"npm-{slug}-{version}"
    if (target / "node_modules" / package / "package.json").is_file():
        return target  # renamed into place only once complete
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be installing it right now
        if (target / "node_modules" / package / "package.json").is_file():
            return target
        staging = root / f"{target.name}.partial-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        manifest = {"private": True, "dependencies": {package: version}}
        (staging / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
        command = [
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",  # nothing of theirs runs at install time
            "--prefer-offline",  # npm's own cache first: a reinstall needs no registry
            "--fetch-timeout=20000",  # short: an unreachable registry skips within a minute
            "--fetch-retries=1",
            "--fetch-retry-mintimeout=2000",  # npm waits 10 s before a retry by default
            "--fetch-retry-maxtimeout=10000",
            "--loglevel=error",
        ]
        try:
            done = subprocess.run(
                command,
                check=False,
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=dict(os.environ if env is None else env),
            )
        except subprocess.TimeoutExpired:
            shutil.rmtree(staging, ignore_errors=True)
            pytest.skip(f"npm install {package}@{version} took over {timeout:.0f} s")
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            output = (done.stderr + done.stdout).strip()
            last = " | ".join(output.splitlines()[-3:])
            if _UNREACHABLE.search(output):
                pytest.skip(f"cannot reach the npm registry for {package}@{version}: {last}")
            pytest.fail(f"npm install {package}@{version} failed: {output[-3000:]}")
        staging.rename(target)
    return target


@pytest.fixture(scope="session")
def sdk_modules() -> Path:
    return npm_install(*SDK)


@pytest.fixture(scope="session")
def inspector() -> Path:
    folder = npm_install(*INSPECTOR)
    return folder / "node_modules" / ".bin" / "mcp-inspector"


# ------------------------------------------------------------------------------ the TS client


def run_ts_client(
    sdk: Path, workdir: Path, spec: Mapping[str, Any]
) -> subprocess.CompletedProcess[str]:
    """``node ts_client.mjs SPEC``, from a folder whose ``node_modules`` links to the cached SDK
    (an ES module finds packages beside itself, never through NODE_PATH)."""
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / CLIENT_SCRIPT.name
    shutil.copyfile(CLIENT_SCRIPT, script)
    (workdir / "node_modules").symlink_to(sdk / "node_modules", target_is_directory=True)
    return subprocess.run(
        ["node", str(script), json.dumps(dict(spec))],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ),
    )


def _output(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout))


def _check_session(found: dict[str, Any], *, entity: str, writer: str, new_id: str) -> None:
    """What the TS client saw of a read-write session on a seeded entity."""
    tools = found["tools"]
    assert set(tools) >= READ_TOOLS | WRITE_TOOLS
    # Schemas as a foreign client reads them; true before and after the schemas gain
    # `additionalProperties: false`, titles and length limits.
    for name, tool in tools.items():
        assert tool["inputType"] == "object" and tool["described"], name
        assert tool["hasOutputSchema"], name
    assert tools["search_memory"]["required"] == ["query"]
    assert {"query", "limit", "type", "min_confidence", "as_of"} <= set(
        tools["search_memory"]["properties"]
    )
    assert tools["get_node"]["required"] == ["id"]
    assert tools["verify_claim"]["required"] == ["subject"]
    assert {"property", "value", "relation", "object"} <= set(tools["verify_claim"]["properties"])
    assert "nodes" in tools["save_facts"]["required"]
    assert {"edges", "source_ref", "confidence"} <= set(tools["save_facts"]["properties"])
    assert found["templates"] == TEMPLATES
    assert {"tools", "resources"} <= set(found["capabilities"])

    # The SDK checked each structured result against the tool's output schema (callTool
    # throws on a mismatch), so reaching here also means kgot keeps its own schemas.
    calls = found["calls"]
    assert not any(calls[name]["isError"] for name in ("search", "node", "verify", "save", "saved"))
    hits = calls["search"]["structured"]["hits"]
    assert (hits[0]["id"], hits[0]["name"], hits[0]["kind"]) == ("apple", "Apple Inc.", "node")
    node = calls["node"]["structured"]
    assert (node["id"], node["requested_id"]) == ("apple", "apple_old")  # merged id followed
    assert node["properties"]["ceo"] == "Tim Cook"
    assert [edge["target"] for edge in node["edges_out"]] == ["cupertino"]
    assert calls["missing"]["isError"]
    assert f"no node 'no_such_node' in entity '{entity}'" in calls["missing"]["text"]
    verify = calls["verify"]["structured"]
    assert (verify["verdict"], verify["subject_id"]) == ("corroborated", "apple")
    assert calls["save"]["structured"]["inserted"] == [new_id]
    saved = calls["saved"]["structured"]
    assert saved["properties"] == {"name": "Fremantle"}
    provenance = saved["provenance"]
    assert (provenance["run_id"], provenance["step"]) == (writer, "mcp:save_facts")
    assert provenance["source_ref"] == "test:ts-client"

    (stats,) = found["resources"]["stats"]
    assert stats["uri"] == f"kgot://entities/{entity}/stats"
    assert stats["mimeType"] == "application/json"
    assert stats["json"]["entity"] == entity and stats["json"]["nodes"] >= 3
    (resource,) = found["resources"]["node"]
    assert resource["json"]["id"] == "apple" and resource["json"]["properties"]["symbol"] == "AAPL"


@pytest.mark.slow
def test_typescript_sdk_over_stdio(sdk_modules: Path, tmp_path: Path) -> None:
    store_url = str(tmp_path / "kgot.db")
    seed(store_url, "a")
    seed(store_url, "b", own_company=True)
    command = kgot_command("mcp", "serve", "--entity", "a", "--label", "ts-desk", "--db", store_url)
    spec = {
        "transport": "stdio",
        "command": command[0],
        "args": command[1:],
        "entity": "a",
        "newId": "fremantle",
    }
    found = _output(run_ts_client(sdk_modules, tmp_path / "client", spec))
    _check_session(found, entity="a", writer="mcp:ts-desk", new_id="fremantle")
    assert "query" not in found["tools"]  # stdio never offers the raw query tool


@pytest.mark.slow
def test_typescript_sdk_over_http_with_a_bearer_token(
    sdk_modules: Path, deployment: Deployment, tmp_path: Path
) -> None:
    new_id = f"ts_{uuid.uuid4().hex[:8]}"
    spec = {
        "transport": "http",
        "url": deployment.url,
        "token": deployment.token_a,
        "entity": "a",
        "newId": new_id,
    }
    found = _output(run_ts_client(sdk_modules, tmp_path / "client", spec))
    _check_session(found, entity="a", writer="mcp:client-a", new_id=new_id)
    # Over HTTP a token may grant several entities, so every tool takes one.
    assert all("entity" in tool["properties"] for tool in found["tools"].values())


@pytest.mark.slow
def test_typescript_sdk_without_a_token_is_refused(
    sdk_modules: Path, deployment: Deployment, tmp_path: Path
) -> None:
    spec = {"transport": "http", "url": deployment.url, "listOnly": True}
    done = run_ts_client(sdk_modules, tmp_path / "client", spec)
    assert done.returncode == 1 and done.stdout == ""
    assert "invalid_token" in done.stderr


@pytest.mark.slow
def test_read_only_token_hides_write_tools_from_ts_client(
    sdk_modules: Path, deployment: Deployment, tmp_path: Path
) -> None:
    """A ``read`` token's client is not offered the tools it may not call. Depends on the
    server listing tools per scope (a change in progress beside this test)."""
    spec = {"transport": "http", "url": deployment.url, "token": deployment.token_a_read}
    done = run_ts_client(sdk_modules, tmp_path / "client", {**spec, "listOnly": True})
    tools = set(_output(done)["tools"])
    assert tools >= READ_TOOLS
    assert not tools & (WRITE_TOOLS | {"ask", "query"})


@pytest.mark.slow
def test_npm_install_skips_when_the_registry_is_unreachable(tmp_path: Path) -> None:
    """The install's skip path, against a port nothing listens on (and an empty npm cache, which
    would otherwise answer from earlier downloads)."""
    if _node_problem():
        pytest.skip(_node_problem() or "")
    env = {
        **os.environ,
        "npm_config_registry": f"http://127.0.0.1:{free_port()}/",
        "npm_config_cache": str(tmp_path / "npm-cache"),
    }
    with pytest.raises(pytest.skip.Exception, match="cannot reach the npm registry"):
        npm_install(*SDK, root=tmp_path / "cache", env=env, timeout=120)
    assert not list((tmp_path / "cache").glob("npm-*-*[0-9]"))  # nothing half-installed kept


# ---------------------------------------------------------------------------- the Inspector


@pytest.mark.slow
def test_inspector_cli_runs_the_printed_claude_desktop_config(
    inspector: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_url = str(tmp_path / "kgot.db")
    seed(store_url, "a")
    assert main(["mcp", "config", "claude-desktop", "--entity", "a", "--db", store_url]) == 0
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(capsys.readouterr().out)

    def inspect(*method: str) -> dict[str, Any]:
        command = [str(inspector), "--cli", "--config", str(config), "--server", "kgot", *method]
        done = subprocess.run(
            command, check=False, capture_output=True, text=True, timeout=240, env=dict(os.environ)
        )
        assert done.returncode == 0, done.stderr[-4000:]
        return dict(json.loads(done.stdout))

    listed = {tool["name"]: tool for tool in inspect("--method", "tools/list")["tools"]}
    assert set(listed) >= READ_TOOLS | WRITE_TOOLS
    assert "query" in listed["search_memory"]["inputSchema"]["properties"]
    searched = inspect(
        "--method", "tools/call", "--tool-name", "search_memory", "--tool-arg", "query=Cupertino"
    )
    assert not searched.get("isError")
    assert searched["structuredContent"]["hits"][0]["id"] == "cupertino"
    uri = "kgot://entities/a/nodes/apple"
    read = inspect("--method", "resources/read", "--uri", uri)
    assert json.loads(read["contents"][0]["text"])["properties"]["name"] == "Apple Inc."
