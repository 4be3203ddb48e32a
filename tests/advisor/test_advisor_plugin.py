"""The advisor plugs into kgot the way any installed package would (issue 28, part 2): one
entry point per extension point, declared in kgot's ``pyproject.toml``, found by the
registries, and loaded only when asked for, so ``kgot --help`` imports the advisor's command
module and nothing else of it."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from kgot.aides.programs import AIDE_PROGRAMS, program_names
from kgot.benchmarks.run_all import PERF_AREAS, discover
from kgot.cli.extensions import COMMAND_EXTENSIONS
from kgot.controller.tool_providers import ENTITY_TOOL_PROVIDERS
from kgot.extension_points import AIDE_PROGRAMS as AIDE_PROGRAM_GROUP
from kgot.extension_points import CLI_COMMANDS, ENTITY_TOOLS, MCP_TOOLS
from kgot.extension_points import PERF_AREAS as PERF_AREA_GROUP
from kgot.mcp_server.extensions import MCP_TOOL_PROVIDERS

DECLARED = {
    ENTITY_TOOLS: "kgot.aides.advisor.agent:agent_tools",
    AIDE_PROGRAM_GROUP: "kgot.aides.advisor.program",
    CLI_COMMANDS: "kgot.aides.advisor.cli:register",
    MCP_TOOLS: "kgot.aides.advisor.mcp:register",
    PERF_AREA_GROUP: "kgot.aides.advisor.perf:run",
}


def test_the_installed_metadata_declares_the_advisor_in_each_group() -> None:
    """Fails when pyproject.toml changed and the editable install was not redone
    (``python -m pip install -e . --no-deps``)."""
    for group, value in DECLARED.items():
        [point] = [p for p in entry_points(group=group) if p.name == "advisor"]
        assert point.value == value, group


def test_each_registry_hands_out_the_advisors_part() -> None:
    from kgot.aides.advisor import agent, cli, mcp, perf, program

    assert ENTITY_TOOL_PROVIDERS.get("advisor") is agent.agent_tools
    assert AIDE_PROGRAMS.get("advisor") is program
    assert program_names()[:1] == ["digest"] and "advisor" in program_names()
    assert COMMAND_EXTENSIONS.get("advisor") is cli.register
    assert MCP_TOOL_PROVIDERS.get("advisor") is mcp.register
    assert PERF_AREAS.get("advisor") is perf.run and "advisor" in discover()


# `kgot ARGS…` through the entry point, then the advisor's modules it imported, on stderr.
# (-X importtime cannot tell: it does not see modules loaded by importlib.import_module,
# which is how entry points are loaded.)
_KGOT_THEN_MODULES = (
    "import sys\n"
    "from kgot.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "mine = sorted(m for m in sys.modules if m.startswith('kgot.aides.advisor'))\n"
    "print(*mine, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _loaded(tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    """``kgot ARGS…`` in a process of its own: what it printed and the advisor's modules it
    imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
    env.update(COLUMNS="100", XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run(
        [sys.executable, "-c", _KGOT_THEN_MODULES, *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout, set(done.stderr.split())


@pytest.mark.slow  # a kgot process or a whole run
def test_kgot_help_imports_only_the_advisors_command_module(tmp_path: Path) -> None:
    for args in (["--help"], ["aide", "--help"]):
        shown, loaded = _loaded(tmp_path, *args)
        assert loaded == {"kgot.aides.advisor", "kgot.aides.advisor.cli"}, (args, loaded)
    for command in ("briefing", "alerts", "quotes", "market-data", "user", "positions", "watch"):
        assert f" {command} " in shown, shown  # the advisor's commands are in `kgot aide`
