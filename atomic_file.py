"""Replacing a file so readers see the old content or the new, never a mix or a torn write."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def current_umask() -> int:
    """The process umask, read without changing it where Linux reports it (``os.umask`` can
    only swap it, which races with threads creating files meanwhile)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not atomic, hence the last resort)
    os.umask(mask)
    return mask


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a temporary file beside ``path`` with ``mode``, fsync it, and rename it
    over ``path``. On any failure the temporary file is removed and ``path`` is left as it was.

    Raises:
        OSError: the directory is missing or not writable, the disk is full, …
    """
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(descriptor, mode)  # mkstemp creates 0600
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
