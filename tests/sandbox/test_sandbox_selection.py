"""Choosing the isolation, the Docker kind, the package allow-list and the `kgot sandbox` CLI."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from pathlib import Path

import pytest

from kgot.cli.main import main
from kgot.config import SandboxSettings
from kgot.errors import ConfigError, SandboxUnavailableError
from kgot.sandbox import Job, Limits, open_sandbox
from kgot.sandbox import bwrap as bwrap_module
from kgot.sandbox import fallback as fallback_module
from kgot.sandbox.bwrap import bwrap_problem, find_bwrap
from kgot.sandbox.docker_runner import container_config, docker_problem
from kgot.sandbox.packages import PackageCache, PackageRefused
from kgot.tests.sandbox.wheels import build_wheel
from kgot.tests.support.sandbox_probe import machine_problem

# Whether this machine can run bubblewrap is asked of the machine, not of kgot's own check.
needs_bwrap = pytest.mark.skipif(
    machine_problem("bwrap") is not None, reason=f"bwrap: {machine_problem('bwrap')}"
)


# ----------------------------------------------------------------------------- selection


@needs_bwrap
def test_auto_prefers_bwrap() -> None:
    box = open_sandbox(SandboxSettings(kind="auto", pool_size=0))
    try:
        assert box.name == "bwrap+seccomp"
    finally:
        box.close()


def test_auto_falls_back_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if machine_problem("fallback") is not None:
        pytest.skip(f"fallback unavailable: {machine_problem('fallback')}")
    monkeypatch.setattr(bwrap_module, "bwrap_problem", lambda _path: "bwrap disabled for test")
    with caplog.at_level("WARNING", logger="kgot.sandbox"):
        box = open_sandbox(SandboxSettings(kind="auto", pool_size=0))
    try:
        assert box.name.startswith("fallback")
        assert "weaker" in caplog.text
        assert box.run(Job("print('ok')")).stdout == "ok\n"
    finally:
        box.close()


def test_auto_never_degrades_to_no_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_module, "bwrap_problem", lambda _path: "no bwrap")
    monkeypatch.setattr(fallback_module, "fallback_problem", lambda: "no unshare")
    with pytest.raises(SandboxUnavailableError) as caught:
        open_sandbox(SandboxSettings(kind="auto"))
    message = str(caught.value)
    assert "\n" not in message
    assert "install bubblewrap" in message and "--sandbox subprocess" in message


def test_explicit_bwrap_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_module, "bwrap_problem", lambda _path: "bubblewrap is not installed")
    with pytest.raises(SandboxUnavailableError, match="bubblewrap is not installed"):
        open_sandbox(SandboxSettings(kind="bwrap"))


@needs_bwrap
def test_the_dry_run_uses_the_real_sandbox_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bubblewrap lacking an option the real plan uses must fail the dry run (and so fall
    back), not every job: the probe runs the exact plan with a trivial command."""
    bwrap = find_bwrap()
    assert bwrap is not None
    launch = bwrap_module.choose_launch(bwrap)
    launcher = bwrap_module.BwrapLauncher(SandboxSettings(), bwrap, None, method=launch.method)
    real = launcher.plan(preload=[], mounts=())
    probe = launcher.plan(preload=[], mounts=(), probe=True)
    argvs = []
    for plan in (real, probe):
        for action in plan.cleanup:
            action()
        fds = {str(fd): f"<fd {n}>" for n, fd in enumerate(plan.pass_fds)}  # memfd numbers
        argvs.append([fds.get(arg, arg) for arg in plan.argv])
    real_argv, probe_argv = argvs
    options = probe_argv[: probe_argv.index("--", probe_argv.index("--as-pid-1"))]
    for option in ("--seccomp", "--size", "--perms", "--uid", "--ro-bind-data", "--as-pid-1"):
        assert option in options, option
    assert real_argv[: len(options)] == options
    # A filter bubblewrap rejects makes the dry run, and so the choice of sandbox, fail.
    monkeypatch.setattr(bwrap_module, "compiled_filter", lambda: b"not a filter")
    bwrap_module.choose_launch.cache_clear()
    try:
        assert "seccomp" in (bwrap_problem(bwrap) or "")
    finally:
        bwrap_module.choose_launch.cache_clear()


def test_auto_warns_loudly_without_a_process_cap(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from kgot.sandbox import cgroups

    monkeypatch.setattr(bwrap_module, "bwrap_problem", lambda _path: None)
    monkeypatch.setattr(
        bwrap_module,
        "choose_launch",
        lambda _path: bwrap_module.Launch(bwrap_module.AS_ROOT, note="setpriv not found"),
    )
    monkeypatch.setattr(cgroups, "cgroup_support", lambda: None)
    with caplog.at_level("WARNING", logger="kgot.sandbox"):
        box = open_sandbox(SandboxSettings(kind="auto", pool_size=0))
    box.close()
    assert box.launcher.process_cap == "none"  # type: ignore[attr-defined]
    assert "cannot cap how many processes a job starts" in caplog.text
    assert "setpriv not found" in caplog.text


def test_subprocess_kind_is_explicit_opt_in() -> None:
    box = open_sandbox(SandboxSettings(kind="subprocess"))
    assert box.name == "subprocess"
    result = box.run(Job("open('out/r.txt', 'w').write('x')\nprint('ran')"))
    assert result.ok and result.outputs == {"r.txt": b"x"}


# ----------------------------------------------------------------------------- docker


def test_docker_without_an_engine_is_a_clear_error() -> None:
    reason = docker_problem()
    if reason is None:
        pytest.skip("a Docker engine is reachable; the error path cannot be observed")
    with pytest.raises(SandboxUnavailableError) as caught:
        open_sandbox(SandboxSettings(kind="docker"))
    assert "no Docker engine is reachable" in str(caught.value)
    assert reason.split("(")[0] in str(caught.value)


def test_docker_container_is_locked_down(tmp_path: Path) -> None:
    attachment = tmp_path / "in.pdf"
    attachment.write_bytes(b"%PDF")
    settings = SandboxSettings(kind="docker", docker_image="python:3.11-slim", memory_mb=512)
    job = Job("print(1)", mounts=(attachment,))
    config = container_config(job, Limits(memory_mb=512, max_processes=32), settings, "pass")
    assert config["network_mode"] == "none"
    assert config["read_only"] is True
    assert config["cap_drop"] == ["ALL"]
    assert "no-new-privileges" in config["security_opt"]
    assert config["user"] == "65534:65534"
    assert config["pids_limit"] == 34
    assert config["mem_limit"] == config["memswap_limit"] == "640m"
    assert config["volumes"] == {str(attachment): {"bind": "/mnt/inputs/in.pdf", "mode": "ro"}}
    assert set(config["tmpfs"]) == {"/work", "/tmp"}


@pytest.mark.docker
def test_docker_runs_a_job() -> None:
    reason = docker_problem()
    if reason is not None:
        pytest.skip(f"no Docker engine: {reason}")
    box = open_sandbox(SandboxSettings(kind="docker"))
    try:
        result = box.run(Job("import socket\nprint('ok')"))
        assert result.ok and result.stdout == "ok\n"
    finally:
        box.close()


# ----------------------------------------------------------------------------- packages


def test_invalid_allow_list_entry_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="allow_packages"):
        PackageCache(SandboxSettings(allow_packages=["not a requirement!!"]))


@pytest.mark.slow
def test_two_processes_installing_into_one_cache_take_turns(tmp_path: Path) -> None:
    wheels = build_wheel(tmp_path)
    settings = SandboxSettings(
        allow_packages=["kgot-tinypkg"],
        packages_dir=str(tmp_path / "cache"),
        pip_args=["--no-index", "--find-links", str(wheels)],
    )
    cache = PackageCache(settings)
    cache.prepare()
    # Another process holds the install lock (flock locks are per open file, so this stands in
    # for a second kgot process exactly).
    holder = os.open(tmp_path / "cache" / ".kgot-install.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    installer = threading.Thread(target=cache.ensure, args=(["kgot-tinypkg"],))
    installer.start()
    installer.join(timeout=0.5)
    try:
        assert installer.is_alive()  # waits for the other process
        assert "kgot-tinypkg" not in cache.installed()
    finally:
        os.close(holder)
    installer.join(timeout=120)
    assert not installer.is_alive()
    assert "kgot-tinypkg" in cache.installed()


def test_packages_not_allowed_are_refused(tmp_path: Path) -> None:
    cache = PackageCache(SandboxSettings(allow_packages=["tinypkg"], packages_dir=str(tmp_path)))
    with pytest.raises(PackageRefused, match="'requests' is not allowed"):
        cache.ensure(["requests"])


@pytest.mark.slow
def test_cached_version_the_allow_list_no_longer_accepts_is_replaced(tmp_path: Path) -> None:
    old, new = build_wheel(tmp_path), build_wheel(tmp_path, version="2.0", answer=43)
    cache_dir = tmp_path / "cache"

    def cache(requirement: str) -> PackageCache:
        links = ["--find-links", str(old), "--find-links", str(new)]
        return PackageCache(
            SandboxSettings(
                allow_packages=[requirement],
                packages_dir=str(cache_dir),
                pip_args=["--no-index", *links],
            )
        )

    cache("kgot-tinypkg==1.0").ensure(["kgot-tinypkg"])
    assert cache("kgot-tinypkg").installed() == {"kgot-tinypkg": "1.0"}
    cache("kgot-tinypkg").ensure(["kgot-tinypkg"])  # any version accepted: kept
    assert cache("kgot-tinypkg").installed() == {"kgot-tinypkg": "1.0"}
    cache("kgot-tinypkg>=2").ensure(["kgot-tinypkg"])
    assert cache("kgot-tinypkg").installed() == {"kgot-tinypkg": "2.0"}
    assert (cache_dir / "kgot_tinypkg" / "__init__.py").read_text() == "ANSWER = 43\n"


@pytest.mark.slow
def test_cli_packages_lists_and_clears_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = build_wheel(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text(
        "[sandbox]\n"
        'allow_packages = ["kgot-tinypkg>=1", "other-pkg"]\n'
        f"packages_dir = {json.dumps(str(tmp_path / 'cache'))}\n"
        f"pip_args = {json.dumps(['--no-index', '--find-links', str(wheels)])}\n"
    )
    monkeypatch.setenv("KGOT_CONFIG", str(config))
    settings = SandboxSettings(
        allow_packages=["kgot-tinypkg"],
        packages_dir=str(tmp_path / "cache"),
        pip_args=["--no-index", "--find-links", str(wheels)],
    )
    PackageCache(settings).ensure(["kgot-tinypkg"])

    assert main(["sandbox", "packages", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    states = {row["requirement"]: (row["version"], row["state"]) for row in listing["allowed"]}
    assert states["kgot-tinypkg>=1"] == ("1.0", "installed")
    assert states["other-pkg"][0] is None and states["other-pkg"][1].startswith("not installed")

    assert main(["sandbox", "packages", "--clear"]) == 0
    assert "removed 1 package(s)" in capsys.readouterr().out
    assert PackageCache(settings).installed() == {}
    assert (tmp_path / "cache" / ".kgot-install.lock").exists()  # the lock others may hold


@pytest.mark.slow
def test_cli_packages_clear_leaves_a_directory_that_is_not_only_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """packages_dir pointed at a directory of the user's own: --clear removes nothing."""
    wheels = build_wheel(tmp_path)
    cache = tmp_path / "my-project"
    (cache / "notes").mkdir(parents=True)
    (cache / "notes" / "draft.txt").write_text("precious")
    (cache / "thesis.tex").write_text("precious too")
    config = tmp_path / "config.toml"
    config.write_text(
        "[sandbox]\n"
        'allow_packages = ["kgot-tinypkg"]\n'
        f"packages_dir = {json.dumps(str(cache))}\n"
        f"pip_args = {json.dumps(['--no-index', '--find-links', str(wheels)])}\n"
    )
    monkeypatch.setenv("KGOT_CONFIG", str(config))
    settings = SandboxSettings(
        allow_packages=["kgot-tinypkg"],
        packages_dir=str(cache),
        pip_args=["--no-index", "--find-links", str(wheels)],
    )
    PackageCache(settings).ensure(["kgot-tinypkg"])

    assert main(["sandbox", "packages", "--clear"]) == 2
    error = capsys.readouterr().err
    assert "'notes', 'thesis.tex'" in error and "removed nothing" in error
    assert (cache / "notes" / "draft.txt").read_text() == "precious"
    assert (cache / "thesis.tex").exists()
    assert PackageCache(settings).installed() == {"kgot-tinypkg": "1.0"}


@needs_bwrap
@pytest.mark.slow
def test_allowed_package_is_installed_on_the_host_and_importable(tmp_path: Path) -> None:
    wheels = build_wheel(tmp_path)
    settings = SandboxSettings(
        kind="bwrap",
        pool_size=1,
        preload=[],
        allow_packages=["kgot-tinypkg"],
        packages_dir=str(tmp_path / "cache"),
        pip_args=["--no-index", "--find-links", str(wheels)],
    )
    box = open_sandbox(settings)
    try:
        before = box.run(Job("import kgot_tinypkg"))
        assert "ModuleNotFoundError" in before.stderr  # not there until a job asks for it
        code = "import kgot_tinypkg\nprint(kgot_tinypkg.ANSWER)"
        result = box.run(Job(code, packages=("kgot-tinypkg",)))
        assert result.ok, result
        assert result.stdout.strip() == "42"
        tamper = box.run(Job("open('/opt/kgot/packages/kgot_tinypkg/__init__.py', 'a').write('x')"))
        assert "PermissionError" in tamper.stderr or "Read-only" in tamper.stderr
    finally:
        box.close()


# ----------------------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_exec_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "job.py"
    script.write_text("import sys\nprint('hello')\nprint('warn', file=sys.stderr)\nsys.exit(4)\n")
    code = main(["sandbox", "exec", "--file", str(script), "--json", "--timeout", "20"])
    assert code == 4
    payload = json.loads(capsys.readouterr().out)
    assert payload["stdout"] == "hello\n" and payload["stderr"] == "warn\n"
    assert payload["exit_code"] == 4 and payload["timed_out"] is False
    assert payload["error"] is None and payload["duration_ms"] > 0
    assert payload["outputs"] == []


def test_cli_exec_mounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        "import os\nprint(sorted(os.listdir('/mnt/inputs')))\n"
        "open('/work/out/seen.txt', 'w').write('x')\n"
    )
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    monkeypatch.chdir(data)
    code = main(["sandbox", "exec", "--file", str(script), "--mount", ".", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0, payload
    assert payload["stdout"] == "['data']\n"  # `.` is shown under its own name
    assert payload["outputs"] == ["seen.txt"]  # names only; the content stays in /work/out


@pytest.mark.parametrize(
    ("mounts", "message"),
    [
        (["/"], "has no name to show under /mnt/inputs"),
        (["{a}/x.csv", "{b}/x.csv"], "two mounts are both named 'x.csv'"),
    ],
)
def test_cli_exec_refuses_unusable_mounts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mounts: list[str], message: str
) -> None:
    script = tmp_path / "job.py"
    script.write_text("print('ran')\n")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.csv").write_text("1")
    args = ["sandbox", "exec", "--file", str(script)]
    for mount in mounts:
        args += ["--mount", mount.format(a=tmp_path / "a", b=tmp_path / "b")]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 2
    assert message in captured.err and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err and "ran" not in captured.out


def test_cli_exec_directory_as_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sandbox", "exec", "--file", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "is a directory" in err and "does not exist" not in err and err.count("\n") == 1


@pytest.mark.slow
def test_cli_exec_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "spin.py"
    script.write_text("while True:\n    pass\n")
    code = main(["sandbox", "exec", "--file", str(script), "--timeout", "1", "--memory-mb", "128"])
    assert code == 124
    assert "timed out after 1 s" in capsys.readouterr().err


def test_cli_exec_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sandbox", "exec", "--file", "/nonexistent/job.py"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err and "Traceback" not in err


@pytest.mark.slow
@needs_bwrap
def test_cli_check_passes_on_bwrap(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sandbox", "check", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["isolation"] == "bwrap+seccomp"
    failed = [c for c in payload["checks"] if not c["passed"]]
    assert code == (1 if failed else 0)
    assert failed == [], failed


@pytest.mark.slow
@needs_bwrap
def test_cli_check_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sandbox", "check"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    assert lines[0] == "isolation: bwrap+seccomp"
    assert lines[1].startswith("process cap: ") and "NOT ENFORCED" not in lines[1]
    assert lines[2].startswith("tool: ") and "bubblewrap as" in lines[2]
    checks = [line for line in lines if line.startswith(("PASS", "FAIL"))]
    assert len(checks) == 10 and all(line.startswith("PASS  ") for line in checks), checks
    assert lines[-1] == "10/10 guarantees hold"


def _check_leftovers() -> list[str]:
    found = []
    for directory in ("/usr", "/etc", "/"):
        with contextlib.suppress(OSError):
            found += [f"{directory}/{n}" for n in os.listdir(directory) if "kgot-check" in n]
    return found


@pytest.mark.slow
def test_cli_check_fails_for_the_unisolated_kind(capsys: pytest.CaptureFixture[str]) -> None:
    before = _check_leftovers()
    code = main(["sandbox", "check", "--sandbox", "subprocess"])
    out = capsys.readouterr().out
    assert code == 1
    assert "isolation: subprocess" in out
    assert "FAIL  host files hidden" in out
    assert "FAIL  no network" in out
    # The write probe may succeed here (no isolation), but it leaves nothing behind.
    assert _check_leftovers() == before


def test_the_subprocess_kind_says_it_is_not_isolated(caplog: pytest.LogCaptureFixture) -> None:
    from kgot.config import SandboxSettings
    from kgot.sandbox import open_sandbox

    with caplog.at_level("WARNING", logger="kgot.sandbox"):
        open_sandbox(SandboxSettings(kind="subprocess")).close()
    assert any("does NOT isolate" in r.getMessage() for r in caplog.records), caplog.records
