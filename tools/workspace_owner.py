"""Temporary tool directories whose process is gone: found and removed by a later kgot.

Each run's tools get a private temporary directory (``$TMPDIR/kgot-tools-*``), removed when the
run's tools are done or the process exits. A process that is killed (SIGKILL, a crash) removes
nothing. So the process holds an exclusive ``flock`` on a lock file inside its directory for as
long as it lives: the kernel drops the lock when the process dies, however it dies. A later
process that can take the lock knows the owner is gone and removes the directory; a directory
whose lock is held, or that has no lock file yet, is left alone. Locks are the process's own,
not its pid's, so a reused pid can never keep a dead run's directory, nor can a guess about
pids remove a live one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "kgot-tools-"
LOCK_NAME = ".kgot-owner.lock"


def make_owned_temp_dir() -> tuple[Path, int]:
    """A new private temporary directory (``0700``) and the descriptor of the lock that marks
    it as this process's; close the descriptor after removing the directory."""
    root = Path(tempfile.mkdtemp(prefix=PREFIX))
    # Locked before it gets its name, so a cleaner never finds the lock file unlocked.
    pending = root / f"{LOCK_NAME}.new"
    descriptor = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(descriptor, f"kgot process {os.getpid()}\n".encode())
        pending.rename(root / LOCK_NAME)
    except OSError:
        os.close(descriptor)
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root, descriptor


def remove_owned_temp_dir(root: Path, descriptor: int) -> None:
    """Remove a directory :func:`make_owned_temp_dir` made, then let go of its lock."""
    shutil.rmtree(root, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.close(descriptor)


def remove_stale_workspaces(directory: Path | None = None) -> list[Path]:
    """Remove the tool directories in ``directory`` (default: the temporary directory) whose
    owning process has ended; return what was removed. Only this user's directories are
    looked at."""
    base = Path(directory or tempfile.gettempdir())
    try:
        candidates = [p for p in base.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return []
    return [root for root in candidates if _remove_if_orphaned(root)]


def _remove_if_orphaned(root: Path) -> bool:
    try:
        info = root.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    try:
        descriptor = os.open(root / LOCK_NAME, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return False  # no lock file: made by an older kgot, or not yet set up
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its process is alive
        shutil.rmtree(root, ignore_errors=True)
        return not root.exists()
    finally:
        os.close(descriptor)
