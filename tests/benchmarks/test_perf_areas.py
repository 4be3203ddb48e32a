"""Perf areas: kgot's own ``perf_<area>`` scripts and those other packages declare in the
``kgot.perf_areas`` entry-point group, run by ``kgot bench perf`` and ``run_all`` alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kgot.benchmarks.figures import Figure
from kgot.benchmarks.run_all import PERF_AREAS, discover, run_all
from kgot.cli.main import main
from kgot.errors import ConfigError, UsageError

OWN = {
    *("aides", "controller", "harness", "mcp", "memory", "resolution", "sandbox", "store"),
    *("tools", "views"),
}


def _quick_only(quick: bool = False) -> list[Figure]:
    return [Figure("plugged", "answer", 1.0 if quick else 2.0, "ms", target=5)]


def _in_sandbox(quick: bool = False, sandbox: str = "auto") -> list[Figure]:
    return [Figure("boxed", f"kind {sandbox}", 3.0, "ms", target=1)]


def _broken(quick: bool = False) -> list[Figure]:
    raise RuntimeError("no data\nhere")


@pytest.fixture
def plugged() -> Iterator[None]:
    """Three areas added in-process, as an installed package's entry points would add them."""
    added = {"plugged": _quick_only, "boxed": _in_sandbox, "broken": _broken}
    for name, run in added.items():
        PERF_AREAS.register(name, run)
    yield
    for name in added:
        PERF_AREAS.unregister(name)


def test_the_areas_are_kgots_scripts_and_the_installed_ones(plugged: None) -> None:
    areas = discover()
    assert set(areas) >= OWN and {"plugged", "boxed", "broken"} <= set(areas)
    assert "advisor" in areas  # declared in kgot's pyproject.toml, as another package would
    assert areas == sorted(areas)


def test_an_installed_area_runs_with_the_options_its_run_takes(plugged: None) -> None:
    started: list[str] = []
    report = run_all(quick=True, only=["plugged", "boxed"], on_start=started.append, sandbox="x")
    assert started == ["boxed", "plugged"]
    assert [(f.area, f.name, f.value) for f in report.figures] == [
        ("boxed", "kind x", 3.0),
        ("plugged", "answer", 1.0),
    ]
    assert [f.area for f in report.missed] == ["boxed"] and report.failures == {}
    assert set(report.seconds) == {"boxed", "plugged"}


def test_a_failing_area_is_reported_on_one_line(plugged: None) -> None:
    report = run_all(only=["broken", "plugged"])
    assert report.failures == {"broken": "RuntimeError: no data here"}
    assert [f.area for f in report.figures] == ["plugged"]


def test_an_unknown_area_is_refused_naming_every_area(plugged: None) -> None:
    with pytest.raises(UsageError, match="no perf area 'nowhere' is installed") as refused:
        run_all(only=["nowhere"])
    for area in (*OWN, "advisor", "plugged"):
        assert area in str(refused.value)


def test_an_installed_area_may_not_take_the_name_of_one_of_kgots() -> None:
    PERF_AREAS.register("store", _quick_only)
    try:
        with pytest.raises(ConfigError, match=r"perf area 'store'.*one of kgot's own"):
            discover()
    finally:
        PERF_AREAS.unregister("store")


def test_the_help_names_each_of_kgots_areas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "perf", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    own = set(discover()) - set(PERF_AREAS.names())
    missing = sorted(area for area in own if area not in shown)
    assert missing == []  # a new perf_<area> script: name it in `kgot bench perf --only`'s help


def test_kgot_bench_perf_runs_an_installed_area(
    plugged: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["bench", "perf", "--only", "plugged", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert '"area": "plugged"' in out and "running plugged" in err
    assert main(["bench", "perf", "--only", "nowhere"]) == 2
    assert "no perf area 'nowhere' is installed" in capsys.readouterr().err
