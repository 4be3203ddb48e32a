"""Who may read the run's workspace: its owner, and the sandbox's user — nobody else.

Downloads and extracted attachments can be private documents, so kgot creates the workspace
0700 and its files 0600. The python tool's code must still read them. Where the sandbox maps its
user onto kgot's own (bubblewrap or the fallback started by an ordinary user, the subprocess
kind) nothing needs granting. Where jobs read files as another host uid (kgot running as root:
the local kinds' dedicated ``sandbox.host_uid``; Docker: 65534), that one uid gets read access
through a POSIX ACL entry rather than through the "other" permission bits, which would open the
files to every account on the machine. Where the file system has no ACLs, what kgot made is
opened with mode bits instead, and the private 0700 directory around the default workspace (the
sandbox mounts the workspace itself, not its parent) keeps other users out.

kgot changes the permissions only of what it made itself: what this process created, and the
tree of a workspace directory an earlier kgot process created (it holds a ``.kgot-workspace``
marker file, owned like the directory by kgot's user), so ``--workspace DIR`` can be used again
by a later command. A workspace the user chose that kgot did not create keeps its mode and ACL,
and so does every file in it that kgot did not write. Such a directory must already let the
sandbox's uid in; otherwise :func:`share_with_sandbox` refuses with the command that grants it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import threading
from pathlib import Path

from kgot.tools.base import ToolFailure

_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_UNDEFINED_ID = 0xFFFFFFFF
_NO_ACL = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL, errno.ENODATA})
_READ_ENTER = 0o5  # r-x: what the sandbox needs on a directory
WORKSPACE_MARKER = ".kgot-workspace"

# Paths kgot created in this process: the only ones whose permissions it may change.
_made: set[str] = set()
_made_lock = threading.Lock()


def sandbox_file_uid(sandbox: object) -> int | None:
    """The host uid ``sandbox``'s jobs read mounted files as, when it is not kgot's own."""
    uid = getattr(sandbox, "file_uid", None)
    return uid if isinstance(uid, int) and uid != os.getuid() else None


def make_private_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents, each accessible to its owner only."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:  # another thread made it meanwhile
            continue
        _remember(directory)
    return path


def make_workspace_dir(path: Path) -> Path:
    """Create the workspace ``path`` like :func:`make_private_dir` and mark it as kgot's, so a
    later kgot process may share it with the sandbox again (see the module's docstring)."""
    make_private_dir(path)
    marker = path / WORKSPACE_MARKER
    with contextlib.suppress(FileExistsError):
        write_private(marker, b"This directory was created by kgot as a tools workspace.\n")
    return path


def workspace_has_files(path: Path) -> bool:
    """Whether the workspace ``path`` holds anything besides kgot's marker."""
    return path.is_dir() and any(p.name != WORKSPACE_MARKER for p in path.iterdir())


def write_private(path: Path, data: bytes, *, exclusive: bool = True) -> None:
    """Write ``data`` to a new file readable by its owner only (``O_EXCL`` by default).

    Raises:
        FileExistsError: ``exclusive`` and the file already exists.
        OSError: the file cannot be written.
    """
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    descriptor = os.open(path, flags, 0o600)
    _remember(path)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def share_with_sandbox(root: Path, uid: int | None) -> None:
    """Let ``uid`` read what kgot made in the tree at ``root`` (directories also searchable),
    nobody else; ``None`` (the sandbox reads as kgot's own user) changes nothing.

    Safe to call repeatedly; new files are picked up on the next call.

    Raises:
        ToolFailure: ``root`` is not kgot's and ``uid`` may not enter and list it.
    """
    if uid is None or uid == os.getuid() or not root.exists():
        return
    root_made = _was_made(root)
    if not root_made and not _grants(root, uid, _READ_ENTER):
        raise ToolFailure(
            f"the sandbox (uid {uid}) cannot read the workspace {root}, and kgot does not "
            "change the permissions of a directory it did not create: grant it read access "
            f"(setfacl -R -m u:{uid}:rX {root}), or name a workspace directory that does not "
            "exist yet",
            kind="unavailable",
        )
    use_acl = True
    for path in [root, *root.rglob("*")]:
        # Under a root kgot made everything is its own (rglob does not enter linked
        # directories, and links are skipped below): no per-entry look-up up to /.
        if not root_made and not _was_made(path):
            continue
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:  # removed meanwhile
            continue
        if stat.S_ISLNK(mode):
            continue
        is_dir = stat.S_ISDIR(mode)
        if use_acl:
            try:
                os.setxattr(path, _ACL_XATTR, _acl(uid, directory=is_dir))
                continue
            except PermissionError:  # not ours after all: leave it as it is
                continue
            except OSError as error:
                if error.errno not in _NO_ACL:
                    raise
                use_acl = False
        with contextlib.suppress(PermissionError):
            path.chmod(0o755 if is_dir else 0o644)


def readable_by(path: Path, uid: int) -> bool:
    """Whether ``uid`` can read the file ``path``, or list and read everything in the
    directory ``path`` (what a read-only bind mount of it needs; the directories above do not
    matter there)."""
    try:
        if not path.is_dir():
            return _grants(path, uid, 0o4)
        return _grants(path, uid, _READ_ENTER) and all(
            _grants(p, uid, _READ_ENTER if p.is_dir() else 0o4)
            for p in path.rglob("*")
            if not p.is_symlink()
        )
    except OSError:
        return False


def _remember(path: Path) -> None:
    with _made_lock:
        _made.add(os.path.realpath(path))


def _was_made(path: Path) -> bool:
    """Whether kgot created ``path`` or a directory above it: in this process, or as a
    workspace marked by an earlier kgot process."""
    real = Path(os.path.realpath(path))
    with _made_lock:
        if any(str(p) in _made for p in (real, *real.parents)):
            return True
    return any(_is_marked_workspace(directory) for directory in (real, *real.parents))


def _is_marked_workspace(directory: Path) -> bool:
    """A directory holding kgot's workspace marker, both owned by kgot's user (a marker
    someone else planted, a symbolic or a hard link, does not count)."""
    try:
        marker = (directory / WORKSPACE_MARKER).lstat()
        owner = directory.lstat().st_uid
    except OSError:
        return False
    # One link only: a hard link to some file of kgot's user, planted by another user where
    # the kernel allows that (fs.protected_hardlinks=0), must not pass for a marker.
    return (
        stat.S_ISREG(marker.st_mode)
        and marker.st_nlink == 1
        and marker.st_uid == owner == os.getuid()
    )


def _grants(path: Path, uid: int, wanted: int) -> bool:
    """Whether ``uid`` (a user of no group: the sandbox's) has ``wanted`` rwx bits on
    ``path``, by its owner, ACL and other permissions."""
    info = path.stat()
    if info.st_uid == uid:
        return (info.st_mode >> 6) & wanted == wanted
    try:
        acl = os.getxattr(path, _ACL_XATTR)
    except OSError:
        acl = b""
    entries = [struct.unpack("<HHI", acl[i : i + 8]) for i in range(4, len(acl) - 7, 8)]
    named = [perm for tag, perm, ident in entries if tag == _USER and ident == uid]
    if named:
        mask = next((perm for tag, perm, _ in entries if tag == _MASK), 0o7)
        return named[0] & mask & wanted == wanted
    return info.st_mode & wanted == wanted  # the "other" bits


def _acl(uid: int, *, directory: bool) -> bytes:
    """An access ACL: owner rwx/rw-, ``uid`` r-x/r--, owning group and others nothing."""
    owner = 0o7 if directory else 0o6
    reader = 0o5 if directory else 0o4
    entries = [
        (_USER_OBJ, owner, _UNDEFINED_ID),
        (_USER, reader, uid),
        (_GROUP_OBJ, 0, _UNDEFINED_ID),
        (_MASK, reader, _UNDEFINED_ID),
        (_OTHER, 0, _UNDEFINED_ID),
    ]
    return struct.pack("<I", _ACL_VERSION) + b"".join(
        struct.pack("<HHI", tag, permissions, ident) for tag, permissions, ident in entries
    )
