"""Configuration problems exit 2 with one line, as the README promises: a sandbox kind that
cannot run here, an entity name kgot does not accept, a store location it cannot use."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.sandbox.docker_runner import docker_problem


def _one_line_config_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("kgot: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return err


@pytest.mark.parametrize(
    "argv",
    [
        ["sandbox", "check", "--sandbox", "docker"],
        ["sandbox", "exec", "--sandbox", "docker", "--file", "JOB"],
        ["ask", "--model", "MODEL", "--sandbox", "docker", "What is 2+2?"],
    ],
)
def test_a_sandbox_that_cannot_run_here_exits_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if docker_problem() is None:
        pytest.skip("a Docker engine is reachable here: the docker sandbox can run")
    job = tmp_path / "job.py"
    job.write_text("print('hi')\n", encoding="utf-8")
    model = Path(__file__).resolve().parents[2] / "examples" / "quickstart.json"
    replaced = {"JOB": str(job), "MODEL": f"scripted:{model}"}
    err = _one_line_config_error(capsys, [replaced.get(arg, arg) for arg in argv])
    assert "no Docker engine is reachable" in err


@pytest.mark.slow
@pytest.mark.parametrize("name", ["two  spaces", ".leading-dot", "x" * 129])
def test_an_invalid_entity_name_exits_2(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _one_line_config_error(
        capsys, ["entities", "create", name, "--db", str(tmp_path / "kgot.db")]
    )
    assert "invalid entity name" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("mysql://user@host/db", "unsupported store URL scheme 'mysql'"),
        ("sqlite://", "has no file path"),
        (":memory:", "in-memory store cannot be shared"),
        ("postgresql://host/db?schema=1bad", "invalid PostgreSQL schema name"),
    ],
)
def test_an_unusable_store_location_exits_2(
    location: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ["entities", "list", "--db", location],
        ["entities", "create", "acme", "--db", location],
        ["runs", "list", "--db", location],
    ):
        assert message in _one_line_config_error(capsys, argv)
