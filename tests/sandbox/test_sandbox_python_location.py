"""kgot run from a Python environment inside a directory the sandbox replaces (a virtual
environment under /tmp, common in CI images): jobs still run, and see of that directory only the
environment, read-only.

Each test starts kgot in a real virtual environment made under /tmp, in a child process (the
sandbox shows jobs the interpreter of the process that opens it).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import uuid
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgot.tests.sandbox.conftest import make_sandbox

# Run inside the sandbox by the child process: what a job sees of /tmp and of the environment.
_PROBE = """
import json, os, sys

def attempt(action):
    try:
        action()
    except OSError as error:
        return type(error).__name__
    return "allowed"

VENV, TOP, SECRET = {venv!r}, {top!r}, {secret!r}
report = {{
    "prefix": sys.prefix,
    "tmp": sorted(os.listdir("/tmp")),
    "top": sorted(os.listdir(TOP)),
    "secret_visible": os.path.lexists(SECRET),
    "write_venv": attempt(lambda: open(os.path.join(VENV, "planted"), "w").close()),
    "write_top": attempt(lambda: open(os.path.join(TOP, "planted"), "w").close()),
    "rename_top": attempt(lambda: os.rename(TOP, "/tmp/moved")),
}}
open("/tmp/left-by-a-job", "w").close()  # the wipe after the job removes it
print(json.dumps(report))
"""

# The child process: opens the sandbox from the environment under /tmp and runs the probe twice.
_CHILD = """
import json, sys
from kgot.config import SandboxSettings
from kgot.sandbox import Job, open_sandbox
from kgot.sandbox.fallback import FallbackLauncher
from kgot.sandbox.pool import PooledSandbox

kind, work, probe = sys.argv[1], sys.argv[2], sys.stdin.read()
settings = SandboxSettings(kind=kind, pool_size=1, preload=[], timeout=30, work_dir_mb=16)
if work:  # the fallback on a host without its work directory (a name the host lacks)
    box = PooledSandbox(FallbackLauncher(settings, None, work=work), settings)
else:
    box = open_sandbox(settings)
try:
    results = [box.run(Job(probe)) for _ in range(2)]
finally:
    box.close()
print(json.dumps([[r.exit_code, r.error, r.stdout, r.stderr] for r in results]))
"""


def _environment_under_tmp(directory: Path) -> Path:
    """A virtual environment at ``directory`` whose interpreter imports what this one does:
    the base installation's packages, plus this environment's (through ``site.addsitedir``,
    so their ``.pth`` files, an editable kgot's finder among them, work too)."""
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(directory)
    python = directory / "bin" / "python"
    ask = [str(python), "-c", "import site; print(site.getsitepackages()[0])"]
    packages = Path(subprocess.run(ask, capture_output=True, text=True, check=True).stdout.strip())
    lines = [f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()]
    (packages / "kgot-test-parent.pth").write_text("\n".join(lines) + "\n")
    return python


@pytest.fixture
def tmp_dirs() -> Iterator[list[Path]]:
    """Directories made directly in /tmp (not pytest's, which TMPDIR may move), removed after."""
    made: list[Path] = []
    yield made
    for directory in made:
        shutil.rmtree(directory, ignore_errors=True)


def _mkdtemp(made: list[Path]) -> Path:
    directory = Path(tempfile.mkdtemp(prefix="kgot-venv-test-", dir="/tmp"))  # mode 0700
    made.append(directory)
    return directory


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["in-tmp", "deep-in-tmp"])
@pytest.mark.parametrize("kind", ["bwrap", "fallback", "fallback-without-work"])
def test_a_python_environment_under_tmp_runs_jobs_that_see_only_it(
    tmp_dirs: list[Path], kind: str, layout: str
) -> None:
    sandbox_kind = kind.removesuffix("-without-work")
    make_sandbox(sandbox_kind).close()  # skips with the reason where this kind cannot run
    top = _mkdtemp(tmp_dirs)  # 0700: deep in it, the environment is out of others' reach
    environment = top if layout == "in-tmp" else top / "ci" / "venv"
    if layout == "in-tmp":
        top.chmod(0o755)  # as `python -m venv /tmp/venv` makes it
    python = _environment_under_tmp(environment)
    # Beside the environment (deep) or elsewhere in /tmp: the host's files a job must not see.
    secret = (top if layout == "deep-in-tmp" else _mkdtemp(tmp_dirs)) / "secret.txt"
    secret.write_text("host secret")
    work = f"/kgot-missing-{uuid.uuid4().hex[:8]}" if kind.endswith("-without-work") else ""
    probe = _PROBE.format(venv=str(environment), top=str(top), secret=str(secret))

    child = subprocess.run(
        [str(python), "-c", _CHILD, sandbox_kind, work],
        input=probe,
        capture_output=True,
        text=True,
        timeout=180,
        cwd="/",
        check=False,
    )

    assert child.returncode == 0, child.stderr[-2000:]
    results = json.loads(child.stdout.strip().splitlines()[-1])
    reports = []
    for exit_code, error, stdout, stderr in results:
        assert (exit_code, error) == (0, None), stderr
        reports.append(json.loads(stdout))
    first, second = reports
    assert first["prefix"] == str(environment)  # the job runs the environment's interpreter
    assert first["tmp"] == [top.name]  # nothing else of the host's /tmp
    assert not first["secret_visible"]
    assert first["write_venv"] != "allowed"
    if layout == "deep-in-tmp":
        assert first["top"] == ["ci"]  # the path down to the environment, nothing beside it
        assert first["write_top"] != "allowed"
    assert first["rename_top"] != "allowed"
    # The wipe after the first job removed its file and left the environment working.
    assert second == first
    if work:
        assert not os.path.lexists(work), "the work directory was created on the host"


@pytest.mark.parametrize("attribute", ["prefix", "base_prefix"])
def test_a_python_installation_that_is_the_whole_of_tmp_is_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, attribute: str
) -> None:
    """Showing it would show jobs everything in /tmp."""
    from kgot.config import SandboxSettings
    from kgot.errors import SandboxUnavailableError
    from kgot.sandbox import open_sandbox

    monkeypatch.setattr(sys, attribute, "/tmp")
    with pytest.raises(SandboxUnavailableError, match=r"at /tmp is the whole of /tmp.*of its own"):
        open_sandbox(SandboxSettings(kind="auto"))


@pytest.mark.slow
@pytest.mark.skipif(os.getuid() != 0, reason="only root runs jobs as another uid than its own")
def test_an_environment_only_its_owner_may_read_is_refused_with_the_fix(
    tmp_dirs: list[Path],
) -> None:
    """A venv made right in `mktemp -d`'s 0700 directory: jobs (sandbox.host_uid) cannot run it;
    bubblewrap used to fall back to running them as host root."""
    environment = _mkdtemp(tmp_dirs)
    python = _environment_under_tmp(environment)
    child = subprocess.run(
        [str(python), "-m", "kgot", "sandbox", "check"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        check=False,
    )
    assert child.returncode == 2, child.stdout + child.stderr
    assert child.stderr.strip().splitlines() == [
        f"kgot: error: the Python environment at {environment} (mode 0700) may be read only by "
        "its owner, and sandbox jobs run as an unprivileged uid: make it readable (chmod o+rx "
        f"{environment}), or pass --sandbox subprocess to accept running LLM-written code "
        "without isolation"
    ]
