"""The fallback isolation for machines where bubblewrap cannot run: unshare + setpriv.

``unshare`` gives the worker new pid, mount, network, IPC, UTS and cgroup namespaces (plus a user
namespace when kgot is not root). Inside the new mount namespace a short setup script, still
privileged there, hides the writable and socket-bearing parts of the host (``/tmp``, ``/var/tmp``,
``/dev/shm``, ``/run``, ``/home``, ``/root``, ``/srv``, ``/mnt``, ``/work`` and kgot's own source
tree become empty tmpfs, read-only but for the scratch directories and ``/work``, which the
worker wipes after every job; the Python installation is put back read-only where it was) and
shows ``Job.mounts`` read-only under ``/mnt/inputs``. A host without ``/work`` gets a new root
holding one (see :func:`_new_root_lines`). ``setpriv`` then drops, as root, to the unprivileged
``sandbox.host_uid`` (a uid of no account, see :mod:`kgot.sandbox.staging`) with no
capabilities and
``no_new_privs``, and the worker installs the same seccomp filter bubblewrap would have
loaded. Limits are the same rlimits and cgroups as the bwrap kind. The worker starts with an
environment of :data:`~kgot.sandbox.common.JOB_ENV` only.

Every other mount of the namespace (the host's root, ``/dev``, ``/sys``…) is then remounted
read-only, so a directory of the host that anyone may write (``/var/crash``, ``/dev/mqueue``)
takes nothing from a job.

**Weaker than bwrap**: the rest of the host file system stays visible (it runs as an
unprivileged uid, so world-readable files are readable), and the host's ``/proc`` details of
other namespaces are hidden only by the pid namespace. Use it when bubblewrap is impossible,
and prefer bwrap everywhere else.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from kgot.config import SandboxSettings
from kgot.sandbox import cgroups, staging
from kgot.sandbox import worker as worker_module
from kgot.sandbox.base import SCRATCH_DIRS, WORK_DIR
from kgot.sandbox.bwrap import python_roots, reshown_python
from kgot.sandbox.cgroups import Cgroup
from kgot.sandbox.common import JOB_ENV
from kgot.sandbox.pool import LaunchPlan
from kgot.sandbox.seccomp_filter import compiled_filter

FALLBACK_WARNING = (
    "using the unshare+setpriv fallback sandbox: its file-system isolation is weaker than "
    "bubblewrap's (world-readable host files outside /tmp, /home, /root, /run, /work are "
    "visible to LLM-written code); install bubblewrap for full isolation"
)
# Covered by an empty tmpfs: the scratch directories (writable, wiped after every job) and the
# places that hold users' files or sockets (read-only).
_HIDDEN_DIRS = (*SCRATCH_DIRS, "/run", "/home", "/root", "/srv", "/mnt")
_PACKAGES_STAGE = "/mnt/.kgot-packages"  # /mnt is hidden by a read-only tmpfs
# Where the new root is assembled when the work directory does not exist on the host: inside
# the private tmpfs that already covers /tmp, so nothing is written to the host's disks.
_NEW_ROOT = "/tmp/.kgot-root"


@functools.cache
def fallback_problem() -> str | None:
    """Why the fallback cannot run here (``None`` when it can), from a dry run."""
    missing = [tool for tool in ("unshare", "setpriv", "mount") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (apt-get install util-linux mount)"
    argv = [*_unshare_prefix(), "--", "/bin/sh", "-c", "mount -t tmpfs kgot /tmp && true"]
    try:
        done = subprocess.run(argv, env=_launch_env(), capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare failed to run ({error})"
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        return f"unshare cannot create namespaces here: {lines[-1] if lines else done.returncode}"
    return None


def _unshare_prefix() -> list[str]:
    argv = ["unshare", "--fork", "--kill-child", "--pid", "--mount-proc", "--mount", "--net"]
    argv += ["--ipc", "--uts", "--cgroup"]
    if os.getuid() != 0:
        argv += ["--user", "--map-root-user"]
    return argv


def _launch_env() -> dict[str, str]:
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


@functools.cache
def _worker_source() -> str:
    return inspect.getsource(worker_module)


class FallbackLauncher:
    """Builds unshare+setpriv command lines for :class:`~kgot.sandbox.pool.PooledSandbox`."""

    name = "fallback (unshare+setpriv+seccomp)"

    def __init__(
        self, settings: SandboxSettings, packages_dir: Path | None, *, work: str = WORK_DIR
    ) -> None:
        """``work`` is the job's working directory: ``/work`` (tests name a directory the host
        lacks to exercise the path every host without ``/work`` takes)."""
        if Path(work).parent != Path("/") or Path(work).name in ("", ".", ".."):
            raise ValueError(f"the work directory must be a top-level directory, not {work!r}")
        self.settings = settings
        self.packages_dir = packages_dir
        has_cgroups = cgroups.cgroup_support() is not None
        # As root, workers run as sandbox.host_uid; otherwise as the caller, mapped to root of a
        # user namespace of their own. Either way RLIMIT_NPROC binds (it only exempts root).
        self.userns_per_worker = os.getuid() != 0
        self.process_cap = "cgroup+rlimit" if has_cgroups else "rlimit"
        self.work = work
        # The uid jobs have on the host, for reading mounted files: ours, unless kgot is root.
        self.file_uid = staging.host_uid(settings) if os.getuid() == 0 else None

    def hides_from_jobs(self, path: Path) -> bool:
        """Whether jobs cannot see ``path`` on the host (it lies under a directory this
        launcher covers), apart from what a job gets mounted."""
        real = os.path.realpath(path)
        roots = python_roots()
        if any(staging.is_under(real, root) for _, root in reshown_python(roots)):
            return False  # the Python environment is shown again inside /tmp or /work
        return any(staging.is_under(real, d) for d in self._covered_dirs(roots))

    def _covered_dirs(self, roots: list[str]) -> list[str]:
        """Host directories jobs get an empty tmpfs over: the hidden ones the host has, the
        work directories and kgot's own source tree (a checkout, for an editable install, holds
        the project's files and often its data: hidden like home directories, wherever it
        lives)."""
        covered = [d for d in (*_HIDDEN_DIRS, WORK_DIR, self.work) if _is_real_dir(d)]
        covered = list(dict.fromkeys(covered))
        source = _kgot_source_tree(roots)
        if source is not None and not any(staging.is_under(source, d) for d in covered):
            covered.append(source)
        return covered

    def plan(
        self,
        *,
        preload: list[str],
        mounts: tuple[Path, ...],
        cgroup: Cgroup | None = None,
        resident: bool = False,
    ) -> LaunchPlan:
        seccomp_fd = os.memfd_create("kgot-seccomp", 0)
        os.write(seccomp_fd, compiled_filter())
        os.lseek(seccomp_fd, 0, os.SEEK_SET)
        extra_paths = []
        if self.packages_dir is not None and self.packages_dir.is_dir():
            extra_paths.append(_PACKAGES_STAGE)
        config = {
            "work": self.work,
            "scratch": list(SCRATCH_DIRS),
            "env": {**JOB_ENV, "KGOT_WORK": self.work},
            "preload": preload,
            "resident": resident,
            "extra_paths": extra_paths,
            "seccomp_fd": seccomp_fd,
        }
        host_uid = self.file_uid if self.file_uid is not None else os.getuid()
        drop = [staging.tool("setpriv") or "setpriv"]
        if os.getuid() == 0:
            drop += [f"--reuid={host_uid}", f"--regid={host_uid}", "--clear-groups"]
        drop += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        python = [_python(), "-I", "-B"]
        env_tool = staging.tool("env") or "/usr/bin/env"
        job_env = [f"{name}={value}" for name, value in JOB_ENV.items()]
        argv = [
            *_unshare_prefix(),
            "--",
            "/bin/sh",
            "-c",
            self._setup_script(mounts, host_uid),
            "kgot-fallback",
            env_tool,
            "-i",
            *job_env,  # the zygote's own environment: nothing of the host's
            *drop,
            *python,
            "-c",
            _worker_source(),
            json.dumps(config),
        ]
        if cgroup is not None:
            script = "\n".join([*staging.join_cgroup_lines(cgroup.procs_files), 'exec "$@"'])
            argv = ["/bin/sh", "-c", script, "kgot-launch", *argv]
        return LaunchPlan(
            argv=argv,
            env=_launch_env(),
            pass_fds=(seccomp_fd,),
            cleanup=[functools.partial(os.close, seccomp_fd)],
            host_uid=host_uid,
        )

    def _setup_script(self, mounts: tuple[Path, ...], host_uid: int) -> str:
        """Shell run as (namespace) root before privileges are dropped; ends by exec'ing "$@"."""
        size = self.settings.work_dir_mb * 1024 * 1024
        q = shlex.quote
        roots = python_roots()
        # The host's /work (often project files) is covered whichever directory jobs work in.
        hidden = self._covered_dirs(roots)
        # A work directory the host has is covered like the others; one it lacks is made in a
        # new root (below), never on the host's disk.
        work_on_host = self.work in hidden
        keep: list[tuple[str, str]] = []
        packages = None
        if self.packages_dir is not None and self.packages_dir.is_dir():
            packages = str(self.packages_dir.resolve())
            keep.append((packages, _PACKAGES_STAGE))
        # Job mounts may live under hidden directories too (a checkout under /work).
        for mount in mounts:
            keep.append((os.path.realpath(mount), f"/mnt/inputs/{Path(mount).name}"))
        # The interpreter must stay reachable for the unprivileged uid: directories above it
        # that others may not enter (pyenv under /root) are hidden too, and it is put back.
        hidden += staging.hidden_ancestors(roots)
        # A Python environment inside /tmp or /work is put back too, each in its top entry
        # there made a mount point (a read-only tmpfs holding the path down to it): a job
        # can neither rename nor fill it, and the worker's wipe passes it by.
        reshown = reshown_python(roots)
        hidden += [top for top, root in reshown if top != root]
        # Parents before the directories inside them (each is covered inside its parent's
        # fresh tmpfs).
        hidden = sorted(dict.fromkeys(hidden), key=lambda d: len(Path(d).parts))
        keep += [(r, r) for r in roots if any(staging.is_under(r, h) for h in hidden)]
        modes = {d: "1777" for d in SCRATCH_DIRS}
        modes[self.work] = "0755"
        lines = staging.staging_script(keep, hidden, size_bytes=size, modes=modes)
        # Ordinary permissions are not enough: a host directory anyone may write (Ubuntu's
        # /var/crash, systemd's /dev/mqueue of the host's IPC namespace) would take a job's
        # files, outlive it and reach the host. Every other mount ends read-only.
        lines += _read_only_lines(skip=[*hidden, "/proc"])
        if not work_on_host:
            lines += _new_root_lines(self.work, size, [top for top, _ in reshown])
        if os.getuid() == 0:
            lines.append(f"chown {host_uid}:{host_uid} {q(self.work)}")
        lines.append("cd /")
        lines.append('exec "$@"')
        return "\n".join(lines)


def _read_only_lines(skip: list[str]) -> list[str]:
    """Shell lines remounting read-only every mount of this namespace but those at or under
    ``skip`` (covered directories get their own modes; /proc must stay writable for the
    worker's own settings). Flags a mount already has are kept: in a user namespace a
    remount that drops an inherited nosuid, nodev or noexec is refused."""
    mount = staging.tool("mount") or "mount"
    lines = []
    for point, options in _mounts():
        if any(staging.is_under(point, directory) for directory in skip):
            continue
        kept = [o for o in options if o not in {"rw", "ro"}]
        flags = ",".join(["remount", "bind", "ro", *kept])
        lines.append(f"{mount} -o {flags} {shlex.quote(point)}")
    return lines


def _mounts() -> list[tuple[str, list[str]]]:
    """Each mount point of this process's namespace (once, outermost first) with its
    per-mount options, from /proc/self/mountinfo."""
    found: dict[str, list[str]] = {}
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
        for line in table:
            fields = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            found[point] = fields[5].split(",")  # a later mount on the same point is on top
    return sorted(found.items(), key=lambda item: len(Path(item[0]).parts))


def _is_real_dir(path: str) -> bool:
    return Path(path).is_dir() and not Path(path).is_symlink()


def _new_root_lines(work: str, size: int, python_tops: list[str]) -> list[str]:
    """Shell lines that switch to a new root showing everything the namespace shows now, plus
    the top-level ``work`` directory the host lacks (a private tmpfs). ``python_tops`` are
    the mount points in ``/tmp`` that show the Python environment (see
    :func:`~kgot.sandbox.bwrap.reshown_python`): bound again into the new root's fresh
    ``/tmp``.

    The host's root cannot gain a directory without writing to its disk, so a small tmpfs
    becomes the root instead: each top-level entry is bound (recursively, so every cover and
    read-only bind made so far comes along) or re-linked into it, then ``pivot_root`` and a
    lazy unmount leave the old root unreachable. The new root ends read-only.
    """
    q = shlex.quote
    mount = staging.tool("mount") or "mount"
    root = _NEW_ROOT
    lines = [
        f"mkdir {root}",
        f"{mount} -t tmpfs -o size=1m,mode=0755,nosuid,nodev kgot-root {root}",
    ]
    for name in sorted(os.listdir("/")):
        host, inside = f"/{name}", q(f"{root}/{name}")
        if host == work:
            continue  # a file or link of that name on the host is replaced by the work dir
        if os.path.islink(host):
            lines.append(f"ln -s {q(os.readlink(host))} {inside}")
        elif host == "/tmp":  # holds the new root itself: a fresh scratch tmpfs instead
            lines.append(f"mkdir {inside}")
            lines.append(
                f"{mount} -t tmpfs -o size={size},mode=1777,nosuid,nodev kgot-hide {inside}"
            )
            for top in sorted(set(python_tops)):  # read-only mounts: rbind keeps them so
                if staging.is_under(top, "/tmp"):
                    spot = q(root + top)
                    lines.append(f"mkdir {spot} && {mount} --rbind {q(top)} {spot}")
        elif os.path.isdir(host):
            lines.append(f"mkdir {inside} && {mount} --rbind {q(host)} {inside}")
        elif os.path.exists(host):
            lines.append(f"touch {inside} && {mount} --bind {q(host)} {inside}")
    lines += [
        f"mkdir {q(root + work)} {root}/.kgot-old",
        f"{mount} -t tmpfs -o size={size},mode=0755,nosuid,nodev kgot-work {q(root + work)}",
        f"{mount} -o remount,bind,ro {root}",
        f"cd {root}",
        f"{staging.tool('pivot_root') or 'pivot_root'} . .kgot-old",
        f"{staging.tool('umount') or 'umount'} -l /.kgot-old",
    ]
    return lines


# The kgot package's directory (this module lives one level below it).
_KGOT_DIR = Path(__file__).resolve().parent.parent


def _python() -> str:
    return sys.executable


def _kgot_source_tree(roots: list[str]) -> str | None:
    """The directory kgot runs from, unless it is part of the Python installation (a regular
    install in site-packages holds only library code, and the interpreter needs it)."""
    tree = os.path.realpath(_KGOT_DIR)
    if any(staging.is_under(tree, root) for root in roots) or tree in ("/", "/usr"):
        return None
    return tree
