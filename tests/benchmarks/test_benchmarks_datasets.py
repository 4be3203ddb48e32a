"""Reading GAIA (parquet and jsonl layouts) and SimpleQA, selection, sampling, bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kgot.benchmarks.datasets import (
    dataset_identity,
    find_gaia_metadata,
    gaia_split,
    load_gaia,
    load_simpleqa,
    sample_tasks,
    select_tasks,
)
from kgot.errors import DatasetError, UsageError
from kgot.tests.benchmarks.bench_fixtures import (
    ATTACHMENT_TEXT,
    GAIA_VALIDATION,
    gaia_rows,
    simpleqa_rows,
    write_csv,
    write_parquet,
)

# ---------------------------------------------------------------- GAIA


def test_gaia_parquet_from_root_split_folder_or_file(gaia_root: Path) -> None:
    metadata = gaia_root / "2023" / "validation" / "metadata.parquet"
    assert find_gaia_metadata(gaia_root) == metadata
    assert find_gaia_metadata(metadata.parent) == metadata
    assert find_gaia_metadata(metadata) == metadata
    assert find_gaia_metadata(gaia_root, "test") == gaia_root / "2023" / "test" / "metadata.parquet"

    tasks = load_gaia(gaia_root)
    assert [t.task_id for t in tasks] == [entry[0] for entry in GAIA_VALIDATION]
    first, with_file = tasks[0], tasks[1]
    assert (first.level, first.truth, first.attachment, first.index) == (1, "8", None, 0)
    assert with_file.attachment == metadata.parent / "notes.txt"
    assert with_file.attachment.read_text(encoding="utf-8") == ATTACHMENT_TEXT
    assert {t.level for t in tasks} == {1, 2, 3}


def test_gaia_test_split_hides_answers(gaia_root: Path) -> None:
    tasks = load_gaia(gaia_root, "test")
    assert [t.truth for t in tasks] == [None, None]


def test_gaia_older_jsonl_layout_resolves_attachments_by_file_name(tmp_path: Path) -> None:
    rows = gaia_rows(GAIA_VALIDATION, "validation")
    for row in rows:
        row.pop("file_path")
        row["Level"] = int(row["Level"])  # the jsonl files carry numbers
    folder = tmp_path / "2023" / "validation"
    folder.mkdir(parents=True)
    (folder / "metadata.jsonl").write_text(
        "\n".join(json.dumps(row) for row in rows) + "\n\n", encoding="utf-8"
    )
    (folder / "notes.txt").write_text(ATTACHMENT_TEXT, encoding="utf-8")
    tasks = load_gaia(tmp_path)
    assert len(tasks) == len(GAIA_VALIDATION)
    assert tasks[1].attachment == folder / "notes.txt"
    assert tasks[0].level == 1


def test_gaia_flattened_annotator_columns_are_accepted(tmp_path: Path) -> None:
    rows = gaia_rows(GAIA_VALIDATION[:1], "validation")
    for row in rows:
        annotator = row.pop("Annotator Metadata")
        row.update({f"Annotator Metadata.{key}": value for key, value in annotator.items()})
    path = write_parquet(tmp_path / "metadata.parquet", rows)
    assert [t.task_id for t in load_gaia(path)] == ["task-l1-a"]


def _gaia_error(path: Path, split: str = "validation") -> str:
    with pytest.raises(DatasetError) as caught:
        load_gaia(path, split)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_gaia_missing_or_unusable_paths(tmp_path: Path) -> None:
    message = _gaia_error(tmp_path / "nowhere")
    assert "nowhere" in message and "does not exist" in message
    (tmp_path / "metadata.csv").write_text("x", encoding="utf-8")
    assert "neither .parquet nor .jsonl" in _gaia_error(tmp_path / "metadata.csv")
    assert "holds no metadata.parquet" in _gaia_error(tmp_path)


@pytest.mark.slow
def test_gaia_malformed_parquet_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "metadata.parquet"
    path.write_bytes(b"PAR1 this is not really parquet")
    message = _gaia_error(path)
    assert str(path) in message and "not a readable Parquet file" in message


def test_gaia_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "metadata.jsonl"
    good = json.dumps(gaia_rows(GAIA_VALIDATION[:1], "validation")[0])
    path.write_text(good + "\n{not json\n", encoding="utf-8")
    message = _gaia_error(path)
    assert f"{path} line 2 is not valid JSON" in message
    path.write_text("[1, 2]\n", encoding="utf-8")
    assert "line 1 is not a JSON object" in _gaia_error(path)


def test_gaia_wrong_columns(tmp_path: Path) -> None:
    rows = [
        {k: v for k, v in row.items() if k != "Final answer"}
        for row in gaia_rows(GAIA_VALIDATION, "validation")
    ]
    path = write_parquet(tmp_path / "metadata.parquet", rows)
    message = _gaia_error(path)
    assert "lacks column(s) 'Final answer'" in message and str(path) in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"Level": "7"}, "has Level '7', expected 1, 2 or 3"),
        ({"Level": "hard"}, "has Level 'hard'"),
        ({"Question": "  "}, "has an empty 'Question'"),
        ({"task_id": None}, "has an empty 'task_id'"),
    ],
)
def test_gaia_bad_values(tmp_path: Path, change: dict, expected: str) -> None:
    rows = gaia_rows(GAIA_VALIDATION[:2], "validation")
    rows[1].update(change)
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    message = _gaia_error(write_parquet(tmp_path / "metadata.parquet", rows))
    assert "row 2" in message and expected in message


def test_gaia_duplicate_task_id(tmp_path: Path) -> None:
    rows = gaia_rows(GAIA_VALIDATION[:1], "validation") * 2
    message = _gaia_error(write_parquet(tmp_path / "metadata.parquet", rows))
    assert "row 2 repeats task_id 'task-l1-a' of row 1" in message


def test_gaia_missing_attachment_names_task_and_file(gaia_root: Path) -> None:
    (gaia_root / "2023" / "validation" / "notes.txt").unlink()
    message = _gaia_error(gaia_root)
    assert "task task-l1-b" in message and "attachment 'notes.txt' not found" in message
    assert "download the attachments" in message


def test_gaia_attachment_outside_the_dataset_is_refused(tmp_path: Path) -> None:
    rows = gaia_rows(GAIA_VALIDATION[:1], "validation")
    rows[0]["file_name"] = "../../secret.txt"
    (tmp_path / "secret.txt").write_text("x", encoding="utf-8")
    path = write_parquet(tmp_path / "data" / "metadata.parquet", rows)
    assert "points outside the dataset folder" in _gaia_error(path)


def test_gaia_selection(gaia_root: Path) -> None:
    tasks = load_gaia(gaia_root)
    assert [t.task_id for t in select_tasks(tasks, levels=[2])] == ["task-l2-a", "task-l2-b"]
    picked = select_tasks(tasks, task_ids=["task-l3-b", "task-l1-a"])
    assert [t.task_id for t in picked] == ["task-l1-a", "task-l3-b"]  # dataset order
    assert len(select_tasks(tasks, levels=[1, 3], limit=3)) == 3
    assert select_tasks(tasks, limit=0) == []
    with pytest.raises(UsageError, match="task id 'nope' is not in"):
        select_tasks(tasks, task_ids=["nope"])
    with pytest.raises(UsageError, match="--limit"):
        select_tasks(tasks, limit=-1)


# ---------------------------------------------------------------- SimpleQA


def test_simpleqa_csv(simpleqa_csv: Path) -> None:
    tasks = load_simpleqa(simpleqa_csv)
    assert len(tasks) == 20
    assert tasks[0].question.startswith("Synthetic question number 0")
    assert tasks[0].truth == "answer 0"
    assert (tasks[1].topic, tasks[1].answer_type) == ("Geography", "Number")
    assert len({t.task_id for t in tasks}) == 20
    assert all(t.task_id.startswith("sqa-") for t in tasks)


def test_simpleqa_task_ids_follow_the_question_not_the_row(tmp_path: Path) -> None:
    rows = simpleqa_rows(5)
    columns = ("metadata", "problem", "answer")
    forward = load_simpleqa(write_csv(tmp_path / "a.csv", rows, columns))
    backward = load_simpleqa(write_csv(tmp_path / "b.csv", rows[::-1], columns))
    assert {t.task_id: t.question for t in forward} == {t.task_id: t.question for t in backward}


def _simpleqa_error(path: Path) -> str:
    with pytest.raises(DatasetError) as caught:
        load_simpleqa(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


def test_simpleqa_bad_files(tmp_path: Path) -> None:
    assert "does not exist" in _simpleqa_error(tmp_path / "missing.csv")
    wrong = write_csv(tmp_path / "wrong.csv", simpleqa_rows(3), ("metadata", "question", "answer"))
    message = _simpleqa_error(wrong)
    assert "lacks column(s) 'problem'" in message and "expected metadata,problem,answer" in message
    empty = tmp_path / "empty.csv"
    empty.write_text("metadata,problem,answer\n", encoding="utf-8")
    assert "holds no questions" in _simpleqa_error(empty)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage\x00")
    assert "cannot be read" in _simpleqa_error(binary)


def test_simpleqa_bad_rows(tmp_path: Path) -> None:
    columns = ("metadata", "problem", "answer")
    rows = simpleqa_rows(3)
    rows[2]["answer"] = ""
    assert "row 4 has an empty 'answer'" in _simpleqa_error(
        write_csv(tmp_path / "a.csv", rows, columns)
    )
    rows = simpleqa_rows(3)
    rows[2]["problem"] = rows[0]["problem"]
    message = _simpleqa_error(write_csv(tmp_path / "b.csv", rows, columns))
    assert "row 4 repeats the question of row 2" in message


def test_simpleqa_unparsable_metadata_is_ignored(tmp_path: Path) -> None:
    rows = simpleqa_rows(2)
    rows[0]["metadata"] = "not a dict literal {"
    tasks = load_simpleqa(write_csv(tmp_path / "a.csv", rows, ("metadata", "problem", "answer")))
    assert tasks[0].topic is None and tasks[1].topic == "Geography"


def test_files_saved_with_a_byte_order_mark_read_like_the_originals(
    tmp_path: Path, simpleqa_csv: Path
) -> None:
    # Excel's "CSV UTF-8" and pandas' utf-8-sig put a BOM before the first column name.
    with_bom = tmp_path / "excel.csv"
    with_bom.write_bytes(b"\xef\xbb\xbf" + simpleqa_csv.read_bytes())
    assert load_simpleqa(with_bom) == load_simpleqa(simpleqa_csv)

    folder = tmp_path / "2023" / "validation"
    folder.mkdir(parents=True)
    rows = [row for row in gaia_rows(GAIA_VALIDATION, "validation") if not row["file_name"]]
    text = "\n".join(json.dumps(row) for row in rows) + "\n"
    (folder / "metadata.jsonl").write_text("\ufeff" + text, encoding="utf-8")
    assert [task.task_id for task in load_gaia(tmp_path)] == [row["task_id"] for row in rows]


# ---------------------------------------------------------------- sampling


def test_sampling_matches_kgots_procedure(simpleqa_csv: Path) -> None:
    tasks = load_simpleqa(simpleqa_csv)
    sample = sample_tasks(tasks, 0.1, 123456)
    # KGoT's script: random.seed(seed); random.sample(rows, ceil(len(rows) * fraction)).
    random.seed(123456)
    expected = random.sample(tasks, 2)
    assert sample == expected
    assert sample_tasks(tasks, 0.1, 123456) == sample  # reproducible
    assert sample_tasks(tasks, 0.1, 7) != sample
    assert len(sample_tasks(tasks, 0.001, 1)) == 1  # at least one question
    assert len(sample_tasks(tasks, 1.0, 1)) == 20
    assert sample_tasks(tasks, 0.5, 123456, limit=3) == sample_tasks(tasks, 0.5, 123456)[:3]
    for fraction in (0.0, -0.1, 1.5):
        with pytest.raises(UsageError, match="--sample-fraction"):
            sample_tasks(tasks, fraction, 1)


def test_official_simpleqa_and_kgots_ten_percent(official_simpleqa: Path) -> None:
    tasks = load_simpleqa(official_simpleqa)
    assert len(tasks) == 4326
    assert len({t.task_id for t in tasks}) == 4326
    assert tasks[0].truth == "Michio Sugeno"
    assert tasks[0].topic == "Science and technology"
    sample = sample_tasks(tasks, 0.1, 123456)
    assert len(sample) == 433
    random.seed(123456)
    assert [t.question for t in sample] == [t.question for t in random.sample(tasks, 433)]


def test_dataset_identity_follows_content(tmp_path: Path, simpleqa_csv: Path) -> None:
    copy = tmp_path / "moved.csv"
    copy.write_bytes(simpleqa_csv.read_bytes())
    assert dataset_identity(copy)["sha256"] == dataset_identity(simpleqa_csv)["sha256"]
    assert dataset_identity(copy)["path"] == str(copy.absolute())
    copy.write_bytes(simpleqa_csv.read_bytes() + b"\n")
    assert dataset_identity(copy)["sha256"] != dataset_identity(simpleqa_csv)["sha256"]


# ---------------------------------------------------------------- review fixes


def hugging_face_cache(tmp_path: Path) -> Path:
    """GAIA as `huggingface_hub` stores it: snapshot files are links into a blob store whose
    files have content hashes for names (no suffix)."""
    cache = tmp_path / "datasets--gaia-benchmark--GAIA"
    blobs = cache / "blobs"
    snapshot = cache / "snapshots" / "0123abcd"
    validation = snapshot / "2023" / "validation"
    validation.mkdir(parents=True)
    write_parquet(blobs / "9f2c41", gaia_rows(GAIA_VALIDATION, "validation"))
    (blobs / "77e0aa").write_text(ATTACHMENT_TEXT, encoding="utf-8")
    (validation / "metadata.parquet").symlink_to("../../../../blobs/9f2c41")
    (validation / "notes.txt").symlink_to("../../../../blobs/77e0aa")
    return snapshot


def test_gaia_in_the_hugging_face_cache(tmp_path: Path) -> None:
    snapshot = hugging_face_cache(tmp_path)
    metadata = snapshot / "2023" / "validation" / "metadata.parquet"
    for data in (snapshot, metadata.parent, metadata):
        tasks = load_gaia(data)
        assert len(tasks) == len(GAIA_VALIDATION)
        # The attachment is the link beside the metadata (with its real name and suffix),
        # not the blob it points to.
        assert tasks[1].attachment == metadata.parent / "notes.txt"
        assert tasks[1].attachment.read_text(encoding="utf-8") == ATTACHMENT_TEXT


def test_a_link_does_not_let_file_name_escape(tmp_path: Path) -> None:
    snapshot = hugging_face_cache(tmp_path)
    rows = gaia_rows(GAIA_VALIDATION[:1], "validation")
    rows[0]["file_name"] = "../../../../blobs/77e0aa"  # the blob, reached by a path that climbs
    path = write_parquet(snapshot / "2023" / "other" / "metadata.parquet", rows)
    assert "points outside the dataset folder" in _gaia_error(path)


def test_only_selected_questions_need_their_attachment(gaia_root: Path) -> None:
    (gaia_root / "2023" / "validation" / "notes.txt").unlink()
    tasks = load_gaia(gaia_root, levels=[2, 3])
    assert [t.level for t in tasks] == [2, 2, 3, 3]
    assert [t.task_id for t in load_gaia(gaia_root, task_ids=["task-l1-a"])] == ["task-l1-a"]
    assert len(load_gaia(gaia_root, limit=1)) == 1
    with pytest.raises(DatasetError, match=r"attachment 'notes\.txt' not found"):
        load_gaia(gaia_root, task_ids=["task-l1-b"])


def test_gaia_split_follows_the_metadata_folder(gaia_root: Path) -> None:
    test_file = gaia_root / "2023" / "test" / "metadata.parquet"
    assert gaia_split(test_file, test_file, None) == "test"
    assert gaia_split(test_file, test_file.parent, "test") == "test"
    assert gaia_split(test_file, gaia_root, "test") == "test"
    root_default = find_gaia_metadata(gaia_root)
    assert gaia_split(root_default, gaia_root, None) == "validation"
    with pytest.raises(UsageError, match=r"--split validation does not match .*in the test split"):
        gaia_split(test_file, test_file, "validation")
    elsewhere = Path("/data/my-gaia/metadata.jsonl")
    assert gaia_split(elsewhere, elsewhere, None) == "validation"
    assert gaia_split(elsewhere, elsewhere, "test") == "test"


def test_simpleqa_folder_instead_of_the_csv(tmp_path: Path) -> None:
    message = _simpleqa_error(tmp_path)
    assert "is a folder" in message and "pass --data the CSV file" in message


def test_gaia_tasks_keep_their_annotator_metadata(gaia_root: Path, tmp_path: Path) -> None:
    [task] = load_gaia(gaia_root, limit=1)
    assert task.annotator == {"Steps": "1. Think", "Number of steps": "1", "Tools": "None"}
    rows = gaia_rows(GAIA_VALIDATION[:1], "validation")
    for row in rows:  # the flattened form some exports use
        annotator = row.pop("Annotator Metadata")
        row.update({f"Annotator Metadata.{key}": value for key, value in annotator.items()})
    [flat] = load_gaia(write_parquet(tmp_path / "flat" / "metadata.parquet", rows))
    assert flat.annotator == task.annotator
