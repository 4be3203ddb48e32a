"""Reading GAIA and SimpleQA from their published files, and choosing which questions to run.

Every problem with a dataset is a :class:`~kgot.errors.DatasetError` whose one-line message
names the file and what is wrong with it, raised before any question is asked.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import hashlib
import json
import math
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgot.errors import DatasetError, UsageError

__all__ = [
    "GAIA_COLUMNS",
    "GAIA_SPLITS",
    "SIMPLEQA_COLUMNS",
    "BenchTask",
    "dataset_identity",
    "find_gaia_metadata",
    "gaia_split",
    "load_gaia",
    "load_simpleqa",
    "sample_tasks",
    "select_tasks",
]

GAIA_COLUMNS = ("task_id", "Question", "Level", "Final answer", "file_name")
SIMPLEQA_COLUMNS = ("metadata", "problem", "answer")
GAIA_SPLITS = ("validation", "test")
# The GAIA test split publishes "?" in place of every answer.
_HIDDEN_ANSWER = "?"
_ANNOTATOR = "Annotator Metadata"


@dataclass(frozen=True)
class BenchTask:
    """One benchmark question.

    Attributes:
        task_id: stable identifier; results are resumed by it. GAIA's own ``task_id``; for
            SimpleQA ``sqa-`` plus a hash of the question, so it survives re-ordered files.
        question: the question text.
        truth: the expected answer, ``None`` when the split hides it (GAIA test).
        index: 0-based position in the dataset file.
        level: GAIA difficulty level (1–3).
        attachment: absolute path of the file the question comes with, if any (as found in
            the dataset folder: a symbolic link there is kept, not resolved).
        topic, answer_type: SimpleQA metadata, for per-topic figures.
        annotator: GAIA's ``Annotator Metadata`` (the human solution's steps, tools and time),
            kept in each record for analysis; ``None`` when the file has none.
    """

    task_id: str
    question: str
    truth: str | None
    index: int
    level: int | None = None
    attachment: Path | None = None
    topic: str | None = None
    answer_type: str | None = None
    # A dict is not hashable; equality of tasks stays that of their identifying fields.
    annotator: dict[str, Any] | None = field(default=None, compare=False)


# ---------------------------------------------------------------- GAIA


def find_gaia_metadata(path: Path, split: str = "validation") -> Path:
    """Locate the metadata file for ``path``.

    ``path`` may be the metadata file itself (``.parquet`` or ``.jsonl``), a split folder
    holding ``metadata.parquet`` or ``metadata.jsonl``, or the dataset root holding
    ``2023/<split>/``.

    Raises:
        DatasetError: nothing usable there.
    """
    if not path.exists():
        raise DatasetError(f"GAIA dataset {path} does not exist (pass --data the metadata file)")
    if path.is_file():
        if path.suffix not in (".parquet", ".jsonl"):
            raise DatasetError(
                f"GAIA dataset {path} is neither .parquet nor .jsonl "
                "(pass metadata.parquet or metadata.jsonl)"
            )
        return path
    for folder in (path, path / "2023" / split):
        for name in ("metadata.parquet", "metadata.jsonl"):
            if (folder / name).is_file():
                return folder / name
    raise DatasetError(
        f"GAIA dataset folder {path} holds no metadata.parquet or metadata.jsonl "
        f"(nor 2023/{split}/metadata.*); pass --data the metadata file"
    )


def gaia_split(metadata: Path, data: Path, split: str | None) -> str:
    """The split ``metadata`` belongs to.

    When ``data`` is the dataset root, ``split`` chose the file and is its split. Otherwise the
    file's folder names the split (``2023/test/metadata.parquet``); a ``split`` saying
    otherwise is refused rather than recorded wrongly. A file in a folder of another name takes
    ``split`` as given (default ``validation``).

    Raises:
        UsageError: ``split`` contradicts the folder the metadata file is in.
    """
    folder = metadata.parent.name
    chosen_from_root = metadata.parent == data / "2023" / (split or "validation")
    if chosen_from_root or folder not in GAIA_SPLITS:
        return split or "validation"
    if split is not None and split != folder:
        raise UsageError(
            f"--split {split} does not match {metadata}, which is in the {folder} split; "
            "leave --split out, or pass --data the dataset root"
        )
    return folder


def load_gaia(
    path: Path,
    split: str = "validation",
    *,
    task_ids: Iterable[str] = (),
    levels: Iterable[int] = (),
    limit: int | None = None,
) -> list[BenchTask]:
    """Read GAIA questions, keep the selected ones and resolve their attachments.

    ``path`` is what :func:`find_gaia_metadata` accepts. Selection is that of
    :func:`select_tasks`; attachments are looked up (next to the metadata file, by ``file_name``
    or by the last part of ``file_path``, never outside that folder) only for the questions
    kept, so a missing file of a question not asked does not stop the run.

    Raises:
        DatasetError: unreadable file, missing columns, bad values, a duplicated ``task_id``,
            or an attachment of a selected question that is not there.
        UsageError: an unknown task id or a negative limit.
    """
    # `absolute`, not `resolve`: in the Hugging Face cache the metadata file is a symbolic link
    # to a blob without a suffix, and its attachments are links beside it, not in `blobs/`.
    metadata = find_gaia_metadata(path, split).absolute()
    rows = _read_parquet(metadata) if metadata.suffix == ".parquet" else _read_jsonl(metadata)
    if not rows:
        raise DatasetError(f"GAIA metadata {metadata} holds no questions")
    missing = [column for column in GAIA_COLUMNS if column not in rows[0]]
    if missing:
        raise DatasetError(
            f"GAIA metadata {metadata} lacks column(s) {', '.join(map(repr, missing))} "
            f"(expected {', '.join(GAIA_COLUMNS)})"
        )
    tasks: list[BenchTask] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        where = f"GAIA metadata {metadata} row {index + 1}"
        task_id = _required_text(row, "task_id", where)
        if task_id in seen:
            raise DatasetError(f"{where} repeats task_id {task_id!r} of row {seen[task_id] + 1}")
        seen[task_id] = index
        truth = _optional_text(row.get("Final answer"))
        annotator = row.get(_ANNOTATOR)
        tasks.append(
            BenchTask(
                task_id=task_id,
                question=_required_text(row, "Question", where),
                truth=None if truth in (None, _HIDDEN_ANSWER) else truth,
                index=index,
                level=_level(row.get("Level"), where),
                annotator=annotator if isinstance(annotator, dict) and annotator else None,
            )
        )
    selected = select_tasks(
        tasks, task_ids=task_ids, levels=levels, limit=limit, source=f"GAIA metadata {metadata}"
    )
    return [
        dataclasses.replace(
            task,
            attachment=_attachment(
                rows[task.index],
                metadata.parent,
                f"GAIA metadata {metadata} row {task.index + 1} (task {task.task_id})",
            ),
        )
        for task in selected
    ]


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as error:  # pyarrow raises several unrelated types for bad files
        raise DatasetError(
            f"GAIA metadata {path} is not a readable Parquet file: {_one_line(error)}"
        ) from None
    # Some exports flatten the annotator struct into "Annotator Metadata.<field>" columns.
    return [_nest_annotator(row) for row in rows]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        # utf-8-sig: a byte order mark (Windows editors, pandas' utf-8-sig) is not JSON.
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetError(f"GAIA metadata {path} cannot be read: {_one_line(error)}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(
                f"GAIA metadata {path} line {number} is not valid JSON: {error.msg}"
            ) from None
        if not isinstance(row, dict):
            raise DatasetError(f"GAIA metadata {path} line {number} is not a JSON object")
        rows.append(row)
    return rows


def _nest_annotator(row: dict[str, Any]) -> dict[str, Any]:
    prefix = _ANNOTATOR + "."
    flat = {k[len(prefix) :]: row.pop(k) for k in [k for k in row if k.startswith(prefix)]}
    if flat:
        nested = row.get(_ANNOTATOR)
        row[_ANNOTATOR] = {**(nested if isinstance(nested, dict) else {}), **flat}
    return row


def _level(value: Any, where: str) -> int:
    try:
        level = int(str(value).strip())
    except ValueError:
        raise DatasetError(f"{where} has Level {value!r}, expected 1, 2 or 3") from None
    if level not in (1, 2, 3):
        raise DatasetError(f"{where} has Level {value!r}, expected 1, 2 or 3")
    return level


def _attachment(row: Mapping[str, Any], folder: Path, where: str) -> Path | None:
    """The question's file, which both GAIA layouts keep beside the metadata file.

    Containment is checked on the path as written (``..`` removed lexically), not on where a
    symbolic link leads: dataset folders such as the Hugging Face cache are made of links into
    a blob store, and those are the dataset's own files.
    """
    name = _optional_text(row.get("file_name"))
    if not name:
        return None
    # `file_path` is relative to the dataset root ("2023/validation/x.pdf") in the current
    # layout, so its last part is the name inside the metadata folder.
    relative = _optional_text(row.get("file_path"))
    candidates = [folder / name]
    if relative:
        candidates += [folder / relative, folder / Path(relative).name]
    for candidate in candidates:
        normal = Path(os.path.normpath(candidate))
        if not normal.is_relative_to(folder) or normal == folder:
            raise DatasetError(
                f"{where}: attachment {candidate} points outside the dataset folder {folder}; "
                "fix its file_name/file_path"
            )
        if normal.is_file():
            return normal
    raise DatasetError(
        f"{where}: attachment {name!r} not found (looked for {candidates[0]}); download the "
        "attachments next to the metadata"
    )


# ---------------------------------------------------------------- SimpleQA


def load_simpleqa(path: Path) -> list[BenchTask]:
    """Read the SimpleQA CSV (columns ``metadata,problem,answer``, as OpenAI publishes it).

    Raises:
        DatasetError: missing or unreadable file, wrong columns, an empty question or
            answer, or a question asked twice.
    """
    if path.is_dir():
        raise DatasetError(
            f"SimpleQA dataset {path} is a folder; pass --data the CSV file "
            "(simple_qa_test_set.csv)"
        )
    if not path.is_file():
        raise DatasetError(f"SimpleQA dataset {path} does not exist (pass --data the CSV file)")
    try:
        # utf-8-sig: Excel's "CSV UTF-8" starts with a byte order mark, which would otherwise
        # become part of the first column's name.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            columns = reader.fieldnames or []
            missing = [column for column in SIMPLEQA_COLUMNS if column not in columns]
            if missing:
                found = ", ".join(map(repr, columns)) or "none"
                raise DatasetError(
                    f"SimpleQA dataset {path} lacks column(s) {', '.join(map(repr, missing))} "
                    f"(has {found}; expected {','.join(SIMPLEQA_COLUMNS)})"
                )
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DatasetError(f"SimpleQA dataset {path} cannot be read: {_one_line(error)}") from None
    if not rows:
        raise DatasetError(f"SimpleQA dataset {path} holds no questions")
    tasks: list[BenchTask] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        # Row numbers as a spreadsheet shows them: the header is row 1.
        where = f"SimpleQA dataset {path} row {index + 2}"
        question = _required_text(row, "problem", where)
        answer = _required_text(row, "answer", where)
        task_id = "sqa-" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:12]
        if task_id in seen:
            raise DatasetError(f"{where} repeats the question of row {seen[task_id] + 2}")
        seen[task_id] = index
        metadata = _literal_dict(row.get("metadata") or "")
        tasks.append(
            BenchTask(
                task_id=task_id,
                question=question,
                truth=answer,
                index=index,
                topic=_optional_text(metadata.get("topic")),
                answer_type=_optional_text(metadata.get("answer_type")),
            )
        )
    return tasks


def _literal_dict(text: str) -> dict[str, Any]:
    """SimpleQA's metadata column is a Python dict literal; anything else is ignored."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------- selection


def select_tasks(
    tasks: Sequence[BenchTask],
    *,
    task_ids: Iterable[str] = (),
    levels: Iterable[int] = (),
    limit: int | None = None,
    source: str = "the dataset",
) -> list[BenchTask]:
    """Filter by ``task_ids`` and ``levels`` (dataset order kept), then keep the first ``limit``.

    Raises:
        UsageError: a requested task id the dataset does not contain, or a negative limit.
    """
    wanted_ids = list(dict.fromkeys(task_ids))
    if wanted_ids:
        known = {task.task_id for task in tasks}
        unknown = [task_id for task_id in wanted_ids if task_id not in known]
        if unknown:
            raise UsageError(f"task id {unknown[0]!r} is not in {source} (check --task-id)")
        chosen = set(wanted_ids)
        tasks = [task for task in tasks if task.task_id in chosen]
    wanted_levels = set(levels)
    if wanted_levels:
        tasks = [task for task in tasks if task.level in wanted_levels]
    return _limited(list(tasks), limit)


def sample_tasks(
    tasks: Sequence[BenchTask], fraction: float, seed: int, *, limit: int | None = None
) -> list[BenchTask]:
    """A seeded random sample of ``ceil(len × fraction)`` questions (at least one).

    This draws exactly the questions KGoT's dataset script draws for the same fraction and
    seed (its protocol: 10 % with seed 123456), in the same order.

    Raises:
        UsageError: ``fraction`` outside (0, 1], or a negative limit.
    """
    if not 0 < fraction <= 1:
        raise UsageError(f"--sample-fraction must be in (0, 1], got {fraction:g}")
    size = min(len(tasks), max(1, math.ceil(len(tasks) * fraction)))
    # `random.sample` picks positions from the population's length alone, so sampling the
    # indices reproduces a sample drawn from the rows themselves with the same seed.
    picked = random.Random(seed).sample(range(len(tasks)), size)
    return _limited([tasks[i] for i in picked], limit)


def _limited(tasks: list[BenchTask], limit: int | None) -> list[BenchTask]:
    if limit is None:
        return tasks
    if limit < 0:
        raise UsageError(f"--limit must be 0 or more, got {limit}")
    return tasks[:limit]


# ---------------------------------------------------------------- helpers


def _optional_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):  # pandas-written empty cells
        return None
    text = str(value).strip()
    return text or None


def _required_text(row: Mapping[str, Any], column: str, where: str) -> str:
    text = _optional_text(row.get(column))
    if text is None:
        raise DatasetError(f"{where} has an empty {column!r}")
    return text


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def dataset_identity(path: Path) -> dict[str, str]:
    """Where a dataset file is and a digest of its content (to recognise it on resume)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"path": str(path.absolute()), "sha256": digest.hexdigest()[:16]}
