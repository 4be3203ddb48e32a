"""Extension points (issue 28, part 2): a separately installed distribution plugs into kgot by
declaring entry points, with no change to kgot.

The distribution is real as far as Python can tell: a module and a ``.dist-info`` folder with
``METADATA`` and ``entry_points.txt`` in a folder on ``sys.path`` (``PYTHONPATH`` for the
``kgot`` processes), which is what ``pip install`` leaves behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgot.errors import ConfigError
from kgot.extension_points import Registry

MODULE = '''
import sys

import typer

greet = typer.Typer(help="Demo commands.", no_args_is_help=True)


@greet.command("hello")
def hello() -> None:
    """Say hello."""
    typer.echo("hello from the demo")


def register(groups):
    groups.root.add_typer(greet, name="demo")
    groups.group("aide").command("wave", help="Wave.")(lambda: typer.echo("waving"))


def elsewhere(groups):
    groups.group("nowhere")


def tools(store, entity):
    return []


NOT_A_FUNCTION = 3
'''


def _distribution(root: Path, name: str, points: dict[str, dict[str, str]]) -> Path:
    """Install (by hand, as pip would) a distribution ``name`` with the module above and
    ``points``: ``{group: {entry point: value}}``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "kgot_demo_ext.py").write_text(MODULE, encoding="utf-8")
    info = root / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8"
    )
    declared = "".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in names.items()) + "\n"
        for group, names in points.items()
    )
    (info / "entry_points.txt").write_text(declared, encoding="utf-8")
    return root


def _kgot(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    env.update(PYTHONPATH=os.pathsep.join([str(site), *inherited]), COLUMNS="100")
    return subprocess.run(
        [sys.executable, "-m", "kgot", *args],
        capture_output=True, text=True, env=env, cwd=site, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.slow  # a kgot process or a whole run
def test_a_distribution_adds_a_command_group_and_a_command(tmp_path: Path) -> None:
    site = _distribution(
        tmp_path / "site", "kgot-demo-ext", {"kgot.cli": {"demo": "kgot_demo_ext:register"}}
    )
    done = _kgot(site, "demo", "hello")
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello from the demo\n", "")
    done = _kgot(site, "aide", "wave")
    assert (done.returncode, done.stdout) == (0, "waving\n"), done.stderr
    shown = _kgot(site, "--help").stdout
    assert " demo " in shown and "Demo commands." in shown, shown
    # kgot's own advisor registers through the same group, beside it
    assert " briefing " in _kgot(site, "aide", "--help").stdout


@pytest.mark.slow  # a kgot process or a whole run
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("kgot_demo_ext:missing", "AttributeError"),
        ("kgot_demo_ext_gone:register", "ModuleNotFoundError"),
        ("kgot_demo_ext:NOT_A_FUNCTION", "expected a function register(groups)"),
        ("kgot_demo_ext:elsewhere", "kgot has no `kgot nowhere` command group to extend"),
    ],
)
def test_a_broken_command_extension_stops_kgot_with_one_line(
    tmp_path: Path, value: str, said: str
) -> None:
    site = _distribution(tmp_path / "site", "kgot-demo-ext", {"kgot.cli": {"demo": value}})
    for args in (["--help"], ["config", "show"]):
        done = _kgot(site, *args)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("kgot: error: "), done
        assert said in done.stderr and "'demo'" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_a_registry_reads_names_without_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _distribution(
        tmp_path / "site",
        "kgot-demo-ext",
        {"kgot.test_registry": {"tools": "kgot_demo_ext:tools", "bad": "kgot_demo_ext:NOPE"}},
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "kgot_demo_ext", raising=False)
    registry: Registry[object] = Registry("kgot.test_registry", "test extension", _function)
    assert registry.names() == ["bad", "tools"]
    assert "kgot_demo_ext" not in sys.modules
    assert registry.get("unknown") is None
    tools = registry.get("tools")
    assert callable(tools) and tools.__module__ == "kgot_demo_ext"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as bad:
        registry.items()
    assert str(bad.value).startswith(
        "the test extension 'bad' of distribution kgot-demo-ext (kgot_demo_ext:NOPE) cannot "
        "be loaded: AttributeError"
    )
    # registered in-process: replaces a declared one, and goes again
    registry.register("bad", print)
    assert dict(registry.items())["bad"] is print
    registry.unregister("bad")
    assert registry.get("tools") is tools


def test_two_distributions_with_one_name_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = {"kgot.test_clash": {"tools": "kgot_demo_ext:tools"}}
    monkeypatch.syspath_prepend(str(_distribution(tmp_path / "one", "kgot-demo-one", group)))
    monkeypatch.syspath_prepend(str(_distribution(tmp_path / "two", "kgot-demo-two", group)))
    registry: Registry[object] = Registry("kgot.test_clash", "test extension", _function)
    assert registry.names() == ["tools"]
    with pytest.raises(ConfigError, match="2 installed distributions declare the test extension"):
        registry.get("tools")


def _function(found: object) -> object:
    if not callable(found):
        raise TypeError(f"expected a function, found {found!r}")
    return found
