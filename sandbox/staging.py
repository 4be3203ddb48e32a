"""Who jobs run as on the host, and how the paths a sandbox needs are shown to that user.

When kgot runs as root, neither local kind lets job processes be host root: they run as the
unprivileged ``sandbox.host_uid`` (see :func:`host_uid`), a uid and gid that belong to no account.
Not ``nobody``: files and processes of ``nobody`` (other sandboxes, daemons, NFS squashing) would
be within a job's reach, and a job's within theirs. That makes ``RLIMIT_NPROC`` a real process
cap (the kernel exempts only root from it), and a process that escaped every other layer would
hold no privilege on the host.

An unprivileged uid cannot reach files under a directory only root may enter (a Python
installed under ``/root/.pyenv``, the package cache under ``/root/.local``). The launch
therefore starts as root in a private mount namespace, covers each such directory with an empty
tmpfs, puts back read-only exactly the paths the sandbox needs, and only then drops to the
dedicated uid. Nothing of this touches the host's own mount table or its disks.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shlex
import shutil
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from kgot.config import SandboxSettings
from kgot.errors import SandboxUnavailableError

TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Where the bind mounts wait while the directories above them are being covered.
_STAGE_CANDIDATES = ("/mnt", "/srv", "/media", "/opt", "/var/tmp", "/tmp", "/dev/shm", "/run")
_NEVER_COVERED = ("/", "/usr", "/etc", "/proc", "/dev", "/sys", "/bin", "/lib", "/lib64")


def host_uid(settings: SandboxSettings) -> int:
    """The uid (also used as gid) jobs run as on the host when kgot is root.

    Raises:
        SandboxUnavailableError: an account or group already has it (naming the fix).
    """
    uid = settings.host_uid
    owner = _account_name(uid)
    if owner is not None:
        raise SandboxUnavailableError(
            f"sandbox.host_uid {uid} belongs to {owner}; jobs must run as a uid and gid of their "
            "own: set [sandbox] host_uid in the config file to one no account or group uses "
            f"(default {SandboxSettings.model_fields['host_uid'].default})"
        )
    return uid


def _account_name(uid: int) -> str | None:
    with contextlib.suppress(KeyError):
        return f"the account {pwd.getpwuid(uid).pw_name!r}"
    with contextlib.suppress(KeyError):
        return f"the group {grp.getgrgid(uid).gr_name!r}"
    return None


def tool(name: str) -> str | None:
    """Absolute path of a system tool (launch scripts run with an empty environment)."""
    return shutil.which(name, path=TOOL_PATH)


def hidden_ancestors(paths: Iterable[str]) -> list[str]:
    """The outermost directories above ``paths`` that other users may not enter (no o+x)."""
    found: set[str] = set()
    for path in paths:
        current = Path("/")
        for part in Path(path).parts[1:-1]:
            current = current / part
            with contextlib.suppress(OSError):
                if not os.stat(current).st_mode & stat.S_IXOTH:
                    if str(current) not in _NEVER_COVERED:
                        found.add(str(current))
                    break
    return sorted(found)


def is_under(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies below it (plain string paths)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def staging_script(
    keep: Sequence[tuple[str, str]],
    hide: Sequence[str],
    *,
    size_bytes: int,
    modes: dict[str, str] | None = None,
) -> list[str]:
    """Shell lines, run as root in a fresh mount namespace, that cover each ``hide`` directory
    with an empty tmpfs and show each ``(source, target)`` of ``keep`` read-only at ``target``.
    A directory of ``hide`` inside another one follows it (it is covered inside the fresh
    tmpfs of the other).

    Sources are bound aside first (sources may lie under a directory about to be covered), the
    directories are covered, then each bind is moved to its target. A covered directory named
    in ``modes`` stays writable with that mode (a scratch directory the worker wipes); every
    other one ends read-only, since nothing empties it between jobs (and a job that is root of
    its user namespace owns the tmpfs).

    Raises:
        SandboxUnavailableError: no directory can hold the binds while they wait.
    """
    mount = tool("mount") or "mount"
    q = shlex.quote
    modes = modes or {}
    sources = [source for source, _ in keep]
    targets = [target for _, target in keep]
    stage = _stage_root(hide, sources, targets)
    stage_mode = modes.get(stage, "0755") if stage in hide else "0700"
    lines = [
        "set -e",
        "umask 022",
        f"{mount} --make-rprivate /",
        f"{mount} -t tmpfs -o size={size_bytes},mode={stage_mode},nosuid,nodev kgot-hide {stage}",
    ]
    for index, source in enumerate(sources):
        make = "mkdir" if os.path.isdir(source) else "touch"
        spot = f"{stage}/.kgot-{index}"
        lines.append(f"{make} {spot} && {mount} --bind {q(source)} {spot}")
    for directory in hide:
        if directory != stage:
            mode = modes.get(directory, "0755")
            # A directory inside another covered one exists only once made in its tmpfs.
            make = f"mkdir -p {q(directory)} && " if _inside_another(directory, hide) else ""
            lines.append(
                f"{make}{mount} -t tmpfs -o size={size_bytes},mode={mode},nosuid,nodev "
                f"kgot-hide {q(directory)}"
            )
    for index, (source, target) in enumerate(keep):
        make = f"mkdir -p {q(target)}" if os.path.isdir(source) else f"touch {q(target)}"
        lines.append(f"mkdir -p {q(os.path.dirname(target))} && {make}")
        lines.append(f"{mount} --move {stage}/.kgot-{index} {q(target)}")
        lines.append(f"{mount} -o remount,bind,ro {q(target)}")
        lines.append(f"rm -rf {stage}/.kgot-{index}")
    if stage not in hide:
        lines.append(f"umount {stage}")
    for directory in hide:
        if directory not in modes:
            lines.append(f"{mount} -o remount,bind,ro {q(directory)}")
    return lines


def _inside_another(directory: str, hide: Sequence[str]) -> bool:
    return any(is_under(directory, other) for other in hide if other != directory)


def _stage_root(hide: Sequence[str], sources: Sequence[str], targets: Sequence[str]) -> str:
    """A directory that may be covered for a moment: no source below it, not itself under a
    covered directory, and (unless it stays covered) no target below it."""
    for candidate in (*hide, *_STAGE_CANDIDATES):
        if not os.path.isdir(candidate) or os.path.islink(candidate):
            continue
        if any(is_under(source, candidate) for source in sources):
            continue
        if any(is_under(candidate, h) for h in hide if h != candidate):
            continue
        if candidate not in hide and any(is_under(target, candidate) for target in targets):
            continue
        return candidate
    raise SandboxUnavailableError(
        "no directory can hold the sandbox's bind mounts while it starts "
        f"(tried {', '.join(_STAGE_CANDIDATES)}); create /mnt"
    )


def join_cgroup_lines(procs_files: Sequence[Path]) -> list[str]:
    """Shell lines that move the running shell (and so everything it execs) into a cgroup."""
    return [f"echo $$ > {shlex.quote(str(path))} || exit 125" for path in procs_files]
