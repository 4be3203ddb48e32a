"""The files a benchmark run leaves in its output folder, written so an interruption loses nothing.

* ``results.jsonl`` — one JSON object per finished task. Each line goes to the file in a single
  ``write`` on an append-only descriptor and is flushed to disk before the next task is
  counted, so Ctrl-C (or a crash) never leaves half a record. A torn last line (a power cut)
  is cut off when a run, holding the folder's lock, next opens the file; readers leave it
  alone, since for them it may be a record being written. A task run again
  (``--retry-errors``) appends a new line; the last line for a ``task_id`` is the one that
  counts.
* ``run.json`` — what the folder holds (benchmark, mode, models, dataset, the settings that
  change answers), checked on resume so two different experiments never share one results file.
* ``.lock`` — held (``flock``) by the run writing the folder, so a second run on the same folder
  is refused instead of interleaving with the first.
* every other file (summary, report, chart, submission) is replaced atomically, with the
  permissions an ordinary new file gets (``0666`` minus the umask).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kgot.atomic_file import current_umask, replace_file
from kgot.errors import DatasetError, UsageError

__all__ = [
    "IDENTITY_FIELDS",
    "LOCK_FILE",
    "MANIFEST_FILE",
    "RESULTS_FILE",
    "ResultsLog",
    "check_manifest",
    "check_out_dir",
    "folder_lock",
    "read_manifest",
    "write_atomic",
]

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "run.json"
LOCK_FILE = ".lock"
# What must match for a folder to be resumed: everything that changes the answers. The dataset
# is compared by content, so a moved copy is fine; `--limit`, `--level` and `--task-id` are not
# here because they choose questions from the same experiment (a later run may extend it).
IDENTITY_FIELDS = (
    "benchmark",
    "mode",
    "models",
    "dataset.sha256",
    "dataset.split",
    "sample",
    "gaia_format",
    "controller",
    "tools",
)
# New files get what `open()` would give them: read/write for everyone, minus the umask.
_FILE_MODE = 0o666


class ResultsLog:
    """Append-only JSONL of per-task records, keyed by ``task_id``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, *, repair: bool = True) -> dict[str, dict[str, Any]]:
        """The latest record of every task in the file (empty when there is no file).

        A last line without its newline (a write torn by a crash, or one being written right
        now) is ignored and, with ``repair``, cut from the file so the next record starts on a
        line of its own. Only the run holding the folder (:func:`folder_lock`) may repair.

        Raises:
            DatasetError: a complete line that is not a JSON object with a ``task_id``.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise DatasetError(f"results file {self.path} cannot be read: {error}") from None
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data) and repair:
            sys.stderr.write(
                f"kgot: warning: {self.path} ended in a partly written record; it was dropped "
                "and that task will run again\n"
            )
            with self.path.open("r+b") as handle:
                handle.truncate(len(complete))
        records: dict[str, dict[str, Any]] = {}
        for number, line in enumerate(complete.decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if not isinstance(record, dict) or not isinstance(record.get("task_id"), str):
                raise DatasetError(
                    f"results file {self.path} line {number} is not a task record; "
                    "remove that line or choose another --out"
                )
            records[record["task_id"]] = record
        return records

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one record durably: a single write of the whole line, then fsync."""
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
        try:
            view = memoryview(line)
            while view:  # a regular file takes it in one go unless the disk is full
                written = os.write(descriptor, view)
                view = view[written:]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def write_atomic(path: Path, content: str | bytes) -> None:
    """Replace ``path`` with ``content`` so readers see the old file or the new, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    # The mode any other new file in the folder gets.
    replace_file(path, data, _FILE_MODE & ~current_umask())


def check_out_dir(out_dir: Path) -> None:
    """Refuse an output folder path that is not (and cannot become) a folder.

    Raises:
        UsageError: it is an existing file, or a path inside a file.
    """
    for path in (out_dir, *out_dir.parents):
        if path.exists():
            if not path.is_dir():
                raise UsageError(
                    f"--out {out_dir} is not a folder ({path} is a file); pass a folder path"
                )
            return


@contextlib.contextmanager
def folder_lock(out_dir: Path) -> Iterator[None]:
    """Hold ``out_dir/.lock`` for as long as a run writes the folder.

    The lock is an ``flock`` on an open descriptor, so the kernel drops it when the process
    ends, however it ends: a crashed run never leaves a folder locked.

    Raises:
        UsageError: another process holds the folder.
    """
    descriptor = os.open(out_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"{out_dir} is in use by another kgot bench run; wait for it to finish or pass "
                "another --out"
            ) from None
        yield
    finally:
        os.close(descriptor)  # releases the lock


def check_manifest(out_dir: Path, manifest: Mapping[str, Any], *, has_records: bool = True) -> None:
    """Record what ``out_dir`` holds, or refuse when it already holds a different experiment.

    Args:
        out_dir: the output folder.
        manifest: this run's ``run.json`` content.
        has_records: whether the folder holds results; without any, an earlier manifest (say,
            of an invocation that failed before its first question) is simply replaced.

    Raises:
        UsageError: the folder's ``run.json`` disagrees on a field of :data:`IDENTITY_FIELDS`.
        DatasetError: its ``run.json`` is unreadable.
    """
    existing = read_manifest(out_dir) if has_records else {}
    if existing:
        for field in IDENTITY_FIELDS:
            difference = _difference(field, _lookup(existing, field), _lookup(manifest, field))
            if difference is not None:
                name, before, now = difference
                raise UsageError(
                    f"{out_dir} already holds a run with {name} {_show(before)} "
                    f"(this run: {_show(now)}); pass another --out to keep experiments apart"
                )
        manifest = {**existing, **manifest, "created_at": existing.get("created_at")}
    write_atomic(out_dir / MANIFEST_FILE, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """The folder's ``run.json`` (empty when there is none).

    Raises:
        DatasetError: it exists but is not a JSON object.
    """
    path = out_dir / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"{path} cannot be read ({error}); remove it to start over") from None
    if not isinstance(manifest, dict):
        raise DatasetError(f"{path} is not a JSON object; remove it to start over")
    return manifest


def _lookup(data: Mapping[str, Any], dotted: str) -> Any:
    value: Any = data
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _difference(name: str, before: Any, now: Any) -> tuple[str, Any, Any] | None:
    """The first disagreement between two values, named down to the innermost differing key
    (``controller.votes`` rather than the whole ``controller`` table)."""
    if before == now:
        return None
    if isinstance(before, Mapping) and isinstance(now, Mapping):
        for key in sorted({*before, *now}):
            found = _difference(f"{name}.{key}", before.get(key), now.get(key))
            if found is not None:
                return found
    return name, before, now


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
