"""State the tools of one run share: HTTP settings, converted documents, files, the workspace.

:func:`kgot.tools.build_tools` makes one :class:`ToolSession` per call; every tool it returns
closes over it. Nothing here is global, so two runs in one process never see each other's
downloads or pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from kgot.config import SandboxSettings
from kgot.documents import ConverterPool, shared_pool
from kgot.sandbox import MOUNT_DIR
from kgot.tools.access import (
    WORKSPACE_MARKER,
    make_private_dir,
    make_workspace_dir,
    readable_by,
    sandbox_file_uid,
    share_with_sandbox,
    workspace_has_files,
    write_private,
)
from kgot.tools.base import ToolContext, ToolFailure
from kgot.tools.flight import SingleFlight, interrupted_from_outside
from kgot.tools.paging import Document, DocumentStore, find_in, render_page
from kgot.tools.workspace_owner import make_owned_temp_dir, remove_owned_temp_dir
from kgot.webclient import Http

WORKSPACE_NAME = "workspace"  # the python tool sees it at /mnt/inputs/workspace


class ToolSession:
    """The shared state behind one run's tools."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.http = Http(ctx.settings)
        self.documents = DocumentStore(ctx.settings.max_output_chars)
        # Documents are parsed in the project's sandbox, isolated as the python tool's is.
        sandbox_settings = getattr(ctx.sandbox, "settings", None)
        self.converter: ConverterPool = ctx.converter or shared_pool(
            ctx.settings.converter_memory_mb,
            sandbox_settings if isinstance(sandbox_settings, SandboxSettings) else None,
        )
        # Absolute, but links are not followed: an attachment keeps the name it was given (a
        # Hugging Face cache links `report.pdf` to a blob named by its hash).
        self.attachments = tuple(
            Path(os.path.abspath(Path(p).expanduser())) for p in ctx.attachments
        )
        self._workspace = Path(ctx.workspace).expanduser().resolve() if ctx.workspace else None
        self._private_root: Path | None = None
        self._loads: SingleFlight[Document] = SingleFlight()
        self._path_locks: dict[Path, threading.Lock] = {}
        self._path_locks_guard = threading.Lock()
        self._setup_lock = threading.RLock()
        self._attachment_copies: dict[Path, Path] = {}

    # -- workspace ------------------------------------------------------------------------------

    @property
    def workspace(self) -> Path:
        """A directory for downloads and extracted archive members, created on first use.

        By default a new private directory (``0700``, files ``0600``) removed with the session;
        ``ToolContext.workspace`` chooses a directory to keep instead.
        """
        with self._setup_lock:  # extractions run in threads: one of them creates it
            if self._workspace is None:
                self._workspace = self._private() / WORKSPACE_NAME
            if not self._workspace.is_dir():
                make_workspace_dir(self._workspace)
            return self._workspace

    def _private(self) -> Path:
        """This session's own temporary directory (mkdtemp makes it 0700), removed with it, or
        by a later kgot process if this one is killed (see :mod:`kgot.tools.workspace_owner`)."""
        with self._setup_lock:
            if self._private_root is None:
                self._private_root, lock = make_owned_temp_dir()
                weakref.finalize(self, remove_owned_temp_dir, self._private_root, lock)
            return self._private_root

    def has_workspace_files(self) -> bool:
        return self._workspace is not None and workspace_has_files(self._workspace)

    def save_bytes(self, name: str, data: bytes) -> Path:
        """Store ``data`` under a fresh workspace file name based on ``name`` (owner-only)."""
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name).strip("._")
        safe = safe[:120] or "download"
        stem, suffix = Path(safe).stem, Path(safe).suffix
        candidate = self.workspace / safe
        number = 2
        while True:
            try:
                write_private(candidate, data)
                return candidate
            except FileExistsError:
                candidate = self.workspace / f"{stem}-{number}{suffix}"
                number += 1

    @contextlib.contextmanager
    def path_lock(self, path: Path) -> Iterator[None]:
        """Hold the lock for ``path`` (one writer of a workspace file at a time)."""
        with self._path_locks_guard:
            lock = self._path_locks.setdefault(path, threading.Lock())
        with lock:
            yield

    def model_path(self, host_path: Path) -> str:
        """How the model names a file: ``workspace/…`` for workspace files, else the path."""
        if self._workspace is not None and host_path.is_relative_to(self._workspace):
            return f"{WORKSPACE_NAME}/{host_path.relative_to(self._workspace).as_posix()}"
        return str(host_path)

    def sandbox_mounts(self) -> tuple[Path, ...]:
        """Host paths the python tool mounts read-only under ``/mnt/inputs``.

        The workspace is shared with the sandbox user first (see :mod:`kgot.tools.access`),
        and always appears as ``/mnt/inputs/workspace`` whatever its directory is called.

        Attachments the sandbox's uid cannot read are mounted as private copies.

        Raises:
            ToolFailure: ``unavailable`` when the sandbox's uid cannot read a workspace the
                user chose (kgot leaves the permissions of such a directory alone), or when
                every job of the sandbox could see the workspace (the fallback run by root).
        """
        uid = sandbox_file_uid(self.ctx.sandbox)
        mounts = [self._readable_attachment(p, uid) for p in self.attachments if p.exists()]
        if self.has_workspace_files():
            hides = getattr(self.ctx.sandbox, "hides_from_jobs", None)
            if uid is not None and hides is not None and not hides(self.workspace):
                # Every run's jobs share that uid: the grant would open this run's files to
                # the jobs of all runs, which this sandbox lets see the host's directories.
                raise ToolFailure(
                    f"the workspace {self.workspace} lies where every sandbox job can see it, "
                    f"and sharing it with the sandbox's uid {uid} would let other runs' jobs "
                    "read it; choose a workspace under /home, /root, /srv or /mnt (hidden from "
                    "jobs), or install bubblewrap",
                    kind="unavailable",
                )
            share_with_sandbox(self.workspace, uid)
            mounts.append(self._workspace_mount())
        return tuple(mounts)

    def _readable_attachment(self, attachment: Path, uid: int | None) -> Path:
        """``attachment``, or a private copy of it (same name) that the sandbox's ``uid`` may
        read: the user attached a file only its owner can read (``0600`` as root), and kgot
        does not change the permissions of the user's files. Copied once per session."""
        if uid is None or readable_by(attachment, uid):
            return attachment
        with self._setup_lock:
            copy = self._attachment_copies.get(attachment)
            if copy is None or not copy.exists():
                folder = make_private_dir(
                    self._private() / "attachments" / str(len(self._attachment_copies))
                )
                copy = folder / attachment.name
                # Inside the 0700 folder kgot just made, so nobody else can reach the copy
                # while it is written; the folder's tree counts as kgot's for the grant.
                if attachment.is_dir():
                    shutil.copytree(attachment, copy, symlinks=True)
                else:
                    shutil.copyfile(attachment, copy)
                share_with_sandbox(folder, uid)
                self._attachment_copies[attachment] = copy
            return copy

    def _workspace_mount(self) -> Path:
        if self.workspace.name == WORKSPACE_NAME:
            return self.workspace
        # Sandboxes name a mount after its path: a link called "workspace" to a workspace
        # kept elsewhere (ToolContext.workspace) shows it where the tools say it is.
        link = self._private() / WORKSPACE_NAME
        if not link.is_symlink():
            link.symlink_to(self.workspace, target_is_directory=True)
        return link

    def sandbox_path(self, host_path: Path) -> str | None:
        """Where the python tool sees ``host_path``, if it sees it at all."""
        for attachment in self.attachments:
            if host_path == attachment:
                return f"{MOUNT_DIR}/{attachment.name}"
        if self._workspace is not None and host_path.is_relative_to(self._workspace):
            relative = host_path.relative_to(self._workspace)
            return f"{MOUNT_DIR}/{WORKSPACE_NAME}/{relative.as_posix()}"
        return None

    # -- files the model may read ---------------------------------------------------------------

    def allowed_roots(self) -> list[Path]:
        roots = [Path(r).expanduser().resolve() for r in self.settings.file_roots]
        if self._workspace is not None:
            roots.append(self._workspace.resolve())
        return roots

    def resolve_file(self, given: str) -> Path:
        """Map a path the model gave to a file it may read.

        Accepted: an attachment's full path or basename, ``/mnt/inputs/<name>`` (how the python
        tool sees it), a workspace path, or a path under a configured ``tools.file_roots``.

        Raises:
            ToolFailure: ``input`` when there is no such file or it is outside those places
                (one message for both: it must not tell which host paths exist).
        """
        text = given.strip().strip("'\"")
        if not text:
            raise ToolFailure("path is empty; " + self._available_files_hint(), kind="input")
        candidates: list[Path] = []
        if text.startswith(MOUNT_DIR + "/"):
            inner = text[len(MOUNT_DIR) + 1 :]
            first, _, rest = inner.partition("/")
            if first == WORKSPACE_NAME and self._workspace is not None:
                candidates.append(self._workspace / rest)
            candidates.extend(a for a in self.attachments if a.name == inner)
        path = Path(text).expanduser()
        if not path.is_absolute():
            candidates.extend(a for a in self.attachments if a.name == text)
            candidates.append(path)  # relative to the working directory (CLI use)
            if self._workspace is not None:
                relative = text.removeprefix(WORKSPACE_NAME + "/")
                candidates.append(self._workspace / relative)
            candidates.extend(root / text for root in self.allowed_roots())
        else:
            candidates.append(path)
        for candidate in candidates:
            attachment = self._attachment_for(candidate)
            if attachment is not None:
                return attachment
            resolved = candidate.resolve()
            if not self._permitted(resolved):
                continue
            if resolved.is_file():
                return resolved
            if resolved.is_dir():
                raise ToolFailure(
                    f"{given} is a directory; give one of its files. "
                    + self._available_files_hint(),
                    kind="input",
                    source_ref=str(resolved),
                )
        # One answer for a missing file and a host file outside the run's files alike: telling
        # them apart would let the model probe which paths exist on the machine.
        raise ToolFailure(
            f"no file {given!r} among the files of this run; " + self._available_files_hint(),
            kind="input",
        )

    def _attachment_for(self, candidate: Path) -> Path | None:
        """The attachment ``candidate`` names (directly or through a link), if any."""
        absolute = Path(os.path.abspath(candidate))
        if absolute in self.attachments:
            return absolute if absolute.is_file() else None
        try:
            if not candidate.exists():  # raises for a path under a directory kgot cannot enter
                return None
        except OSError:
            return None
        target = candidate.resolve()
        return next((a for a in self.attachments if a.resolve() == target and a.is_file()), None)

    def _permitted(self, path: Path) -> bool:
        if path in self.attachments or self._attachment_for(path) is not None:
            return True
        return any(path.is_relative_to(root) for root in self.allowed_roots())

    def _available_files_hint(self) -> str:
        names = [a.name for a in self.attachments]
        if self._workspace is not None and self._workspace.exists():
            names += [
                f"{WORKSPACE_NAME}/{p.relative_to(self._workspace)}"
                for p in sorted(self._workspace.rglob("*"))
                if p.is_file() and p.name != WORKSPACE_MARKER
            ][:30]
        if not names:
            return "this run has no files (no attachments, nothing downloaded yet)"
        return "files of this run: " + ", ".join(names)

    # -- converted documents --------------------------------------------------------------------

    async def document(
        self, key: str, load: Callable[[], Awaitable[Document]], *, again: str
    ) -> Document:
        """The document stored under ``key``, loaded once even under concurrent calls.

        Args:
            key: what identifies the document (its source and how it was read).
            load: reads it; runs as a task of the session, shared by every caller that asks
                for ``key`` meanwhile, so one caller's timeout never cancels another's read.
            again: the call that shows a page of it (``{page}`` for the number): pages are
                sized so that page, header and footer fit the output cap.

        Raises:
            ToolFailure: whatever ``load`` raised.
        """
        found = self.documents.get(key)
        if found is not None:
            return found

        async def read() -> Document:
            return self.documents.put(key, await load(), again=again)

        try:
            document, _ = await self._loads.run(key, read)
        except asyncio.CancelledError:
            if not interrupted_from_outside():
                raise
            raise ToolFailure(
                "reading the document was interrupted; try the call again", kind="network"
            ) from None
        return document

    def readers(self, key: str | None = None) -> int:
        """Calls waiting for the document ``key`` to load (for every load when ``None``)."""
        return self._loads.waiting(key)

    def show(self, document: Document, *, page: int, find: str | None, again: str) -> str:
        """A page of ``document`` or, with ``find``, the places a phrase occurs.

        Raises:
            ToolFailure: ``input`` for a page out of range or an empty ``find``.
        """
        try:
            if find is not None:
                return find_in(
                    document, find, again=again, max_chars=self.settings.max_output_chars
                )
            return render_page(document, page, again=again)
        except ValueError as error:
            raise ToolFailure(str(error), kind="input", source_ref=document.source_ref) from None

    async def convert(self, fmt: str, path: Path, options: dict[str, Any]) -> dict[str, Any]:
        return await self.converter.aconvert(fmt, path, options, timeout=self.settings.timeout)
