"""inspect_file on every supported format, archives, media, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgot.config import SandboxSettings
from kgot.documents.convert_pool import ConverterPool
from kgot.llm.scripted import ScriptedChatModel
from kgot.tests.tools.tool_fixtures import (
    FixtureServer,
    Response,
    call,
    make_runner,
    tools_settings,
)
from kgot.tools import ToolContext
from kgot.tools.base import ToolFailure


@pytest.fixture
def runner_for(samples: dict[str, Path]):
    def make(*names: str, **overrides):
        settings = tools_settings(**overrides.pop("settings", {}))
        ctx = ToolContext(
            settings=settings, attachments=tuple(samples[n] for n in names), **overrides
        )
        return make_runner(ctx)

    return make


def test_pdf_text_with_page_markers(runner_for):
    outcome = call(runner_for("report.pdf"), "inspect_file", path="report.pdf")
    assert outcome.ok, outcome.output
    assert "[PDF page 1]" in outcome.output and "[PDF page 2]" in outcome.output
    assert "heron count was 17" in outcome.output and "egret count was 5" in outcome.output
    assert outcome.source_ref and outcome.source_ref.endswith("report.pdf")


def test_docx_keeps_its_table(runner_for):
    outcome = call(runner_for("report.docx"), "inspect_file", path="report.docx")
    assert outcome.ok, outcome.output
    assert "Quarterly Report" in outcome.output
    assert "| Region | Revenue |" in outcome.output
    assert "| North | 80 |" in outcome.output


def test_xlsx_every_sheet_as_a_table(runner_for):
    output = call(runner_for("sales.xlsx"), "inspect_file", path="sales.xlsx").output
    assert "## Sales" in output and "## Staff" in output
    assert "| Widget | 12 | 2.5 |" in output
    assert "| Ada | Engines | 1843-07-01 |" in output
    assert "3 rows × 3 columns" in output  # Sales: header + 2 rows


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("birds.xls", ["## Birds", "| Heron | 17 |", "| Egret | 5 |"]),
        ("macros.xlsm", ["## Sales", "| Widget | 12 | 2.5 |", "## Staff"]),
        ("marsh.epub", ["Birds of the Marsh", "# Chapter 1", "The bittern booms at dusk."]),
        ("counts.ipynb", ["# Heron counts", "```python", "total = 17 + 5"]),
        ("records.jsonl", ['{"bird": "heron", "n": 3}\n{"bird": "egret", "n": 5}']),
    ],
)
def test_other_documented_formats(runner_for, name, expected):
    outcome = call(runner_for(name), "inspect_file", path=name)
    assert outcome.ok, outcome.output
    for words in expected:
        assert words in outcome.output


def test_csv_and_tsv_as_tables(runner_for):
    runner = runner_for("people.csv", "data.tsv")
    csv_output = call(runner, "inspect_file", path="people.csv").output
    assert "2 data rows × 3 columns" in csv_output
    assert "| name | age | city |" in csv_output and "| Alan | 41 | Wilmslow |" in csv_output
    assert "| beta | 2 |" in call(runner, "inspect_file", path="data.tsv").output


def test_pptx_slides(runner_for):
    output = call(runner_for("plan.pptx"), "inspect_file", path="plan.pptx").output
    assert "Migration Plan" in output and "cold storage in March" in output
    assert "Tape drives are slow" in output


def test_html_json_xml_text_and_code(runner_for):
    runner = runner_for("page.html", "config.json", "feed.xml", "notes.txt", "script.py")
    assert "Herons" in call(runner, "inspect_file", path="page.html").output
    json_output = call(runner, "inspect_file", path="config.json").output
    assert '"tools": [\n    "web_search"' in json_output  # pretty-printed
    assert '<book id="b1">' in call(runner, "inspect_file", path="feed.xml").output
    assert "Meeting moved to Thursday." in call(runner, "inspect_file", path="notes.txt").output
    code = call(runner, "inspect_file", path="script.py").output
    assert "```python\ndef answer():" in code


def test_long_file_is_paged_and_searchable(runner_for):
    runner = runner_for("long.txt", settings={"max_output_chars": 3000})
    first = call(runner, "inspect_file", path="long.txt")
    assert first.ok and first.truncated_chars == 0  # pages fit the cap; nothing is cut
    assert "Page 1 of" in first.output and "Paragraph 1." in first.output
    assert "page=2" in first.output and "next page" in first.output
    second = call(runner, "inspect_file", path="long.txt", page=2)
    assert "Page 2 of" in second.output and "Paragraph 1." not in second.output
    found = call(runner, "inspect_file", path="long.txt", find="Paragraph 97.")
    assert "1 match(es)" in found.output
    pages = int(first.output.split("Page 1 of ")[1].split()[0])
    where = int(found.output.split("1. [page ")[1].split("]")[0])
    on_that_page = call(runner, "inspect_file", path="long.txt", page=where)
    assert "Paragraph 97." in on_that_page.output  # find points at the right page
    assert 1 < where <= pages
    beyond = call(runner, "inspect_file", path="long.txt", page=999)
    assert not beyond.ok and beyond.error_kind == "input"
    assert f"pages 1 to {pages}" in beyond.output


def test_zip_listing_and_member(runner_for):
    runner = runner_for("bundle.zip")
    listing = call(runner, "inspect_file", path="bundle.zip")
    assert listing.ok, listing.output
    assert "tables/people.csv" in listing.output and "readme.txt" in listing.output
    member = call(runner, "inspect_file", path="bundle.zip", member="tables/people.csv")
    assert member.ok, member.output
    assert "| Ada | 36 | London |" in member.output
    assert "Extracted from bundle.zip" in member.output
    pdf = call(runner, "inspect_file", path="bundle.zip", member="report.pdf")
    assert "heron count was 17" in pdf.output
    # The extracted file is now a workspace file other tools can name.
    extracted = Path(member.source_ref)
    assert extracted.parts[-4] == "workspace" and extracted.parts[-2] == "tables"
    assert extracted.parts[-3].startswith("bundle-unzipped-")
    named = f"workspace/{extracted.parts[-3]}/tables/people.csv"
    assert f"to {named}" in member.output  # the header names it as other tools accept it
    again = call(runner, "inspect_file", path=named)
    assert again.ok and "Wilmslow" in again.output


def test_zip_member_names_cannot_escape(runner_for):
    runner = runner_for("bundle.zip")
    outcome = call(runner, "inspect_file", path="bundle.zip", member="../../evil.txt")
    assert outcome.ok, outcome.output
    target = Path(outcome.source_ref)
    assert "path traversal attempt" in outcome.output
    assert target.parent.name.startswith("bundle-unzipped-")
    assert target.parent.parent.name == "workspace"


@pytest.fixture
def slash_zip(tmp_path) -> Path:
    """An archive whose member names start with "/" (some tools write them so)."""
    import zipfile

    path = tmp_path / "rooted.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("/data/counts.csv", "bird,count\nheron,17\n")
        archive.writestr("//twice.txt", "two leading slashes")
    return path


def test_a_member_named_with_a_leading_slash_is_readable(slash_zip):
    runner = make_runner(ToolContext(settings=tools_settings(), attachments=(slash_zip,)))
    listing = call(runner, "inspect_file", path="rooted.zip")
    assert "- /data/counts.csv" in listing.output, listing.output
    for given in ("/data/counts.csv", "data/counts.csv"):  # as listed, or without the slash
        outcome = call(runner, "inspect_file", path="rooted.zip", member=given)
        assert outcome.ok, outcome.output
        assert "| heron | 17 |" in outcome.output
        target = Path(outcome.source_ref)
        assert target.parts[-2:] == ("data", "counts.csv")  # inside the extraction folder
        assert target.parent.parent.name.startswith("rooted-unzipped-")
    twice = call(runner, "inspect_file", path="rooted.zip", member="//twice.txt")
    assert twice.ok and "two leading slashes" in twice.output, twice.output
    assert Path(twice.source_ref).parent.name.startswith("rooted-unzipped-")


def test_the_suggested_member_name_works(slash_zip):
    runner = make_runner(ToolContext(settings=tools_settings(), attachments=(slash_zip,)))
    wrong = call(runner, "inspect_file", path="rooted.zip", member="counts.csv")
    assert not wrong.ok and "did you mean '/data/counts.csv'" in wrong.output, wrong.output
    right = call(runner, "inspect_file", path="rooted.zip", member="/data/counts.csv")
    assert right.ok, right.output


def test_nested_zip(runner_for):
    runner = runner_for("nested.zip")
    inner = call(runner, "inspect_file", path="nested.zip", member="inner.zip")
    assert inner.ok and "deep.txt" in inner.output
    inner_path = Path(inner.source_ref)
    deep = call(runner, "inspect_file", path=str(inner_path), member="deep.txt")
    assert deep.ok and "the nested secret is 9" in deep.output


def test_missing_member_names_the_fix(runner_for):
    outcome = call(runner_for("bundle.zip"), "inspect_file", path="bundle.zip", member="people.csv")
    assert not outcome.ok and outcome.error_kind == "input"
    assert "did you mean 'tables/people.csv'" in outcome.output


def test_a_member_of_a_file_that_is_no_archive_is_an_input_error(runner_for):
    # The file is fine: calling it a damaged archive would send the model to fetch it again.
    outcome = call(runner_for("notes.txt"), "inspect_file", path="notes.txt", member="x.csv")
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert "notes.txt is not a ZIP archive" in outcome.output
    assert "without member=" in outcome.output and "damaged" not in outcome.output
    # A damaged archive is still reported as one.
    broken = call(runner_for("broken.zip"), "inspect_file", path="broken.zip", member="x.csv")
    assert not broken.ok and broken.error_kind == "corrupt", broken.output


@pytest.mark.parametrize(
    ("name", "kind", "words", "next_step"),
    [
        ("broken.pdf", "corrupt", "not a readable PDF", "another copy"),
        ("broken.zip", "corrupt", "not a readable ZIP", "another copy"),
        ("blob.bin", "unsupported", "cannot read", "python tool"),
    ],
)
def test_bad_files_become_error_strings(runner_for, name, kind, words, next_step):
    outcome = call(runner_for(name), "inspect_file", path=name)
    assert not outcome.ok
    assert outcome.error_kind == kind, outcome.output
    assert words in outcome.output and next_step in outcome.output
    assert outcome.output.startswith("Error: ")


def test_missing_and_forbidden_paths(runner_for, tmp_path):
    runner = runner_for("notes.txt")
    missing = call(runner, "inspect_file", path="nothing-here.pdf")
    assert not missing.ok and missing.error_kind == "input"
    assert "notes.txt" in missing.output  # lists what does exist
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    forbidden = call(runner, "inspect_file", path=str(secret))
    assert not forbidden.ok and forbidden.error_kind == "input"
    assert "among the files of this run" in forbidden.output and "notes.txt" in forbidden.output
    assert "do not read" not in forbidden.output
    assert not call(runner, "inspect_file", path="/etc/passwd").ok


def test_a_host_path_outside_the_run_gets_the_same_answer_whether_it_exists_or_not(
    runner_for, tmp_path
):
    # Different answers would let the model map the machine's files (an existence oracle).
    runner = runner_for("notes.txt")
    (tmp_path / "exists.txt").write_text("private")
    (tmp_path / "folder").mkdir()
    answers = {
        name: call(runner, "inspect_file", path=str(tmp_path / name))
        for name in ("exists.txt", "missing.txt", "folder", "missing/deeper.txt")
    }
    for name, outcome in answers.items():
        assert not outcome.ok and outcome.error_kind == "input", outcome.output
        assert outcome.output.replace(str(tmp_path / name), "PATH") == answers[
            "missing.txt"
        ].output.replace(str(tmp_path / "missing.txt"), "PATH"), name


def test_a_path_under_a_directory_kgot_cannot_enter_is_just_not_a_run_file(
    runner_for, tmp_path, monkeypatch
):
    # As an ordinary user, looking at /root/x raises PermissionError where /nowhere/x is simply
    # missing; a crash there would tell the model the directory exists. (Tests run as root,
    # where nothing is denied, so the denial is simulated.)
    import pathlib

    locked = tmp_path / "locked"
    real_exists = pathlib.Path.exists

    def exists(self, *args, **kwargs):
        if self.is_relative_to(locked) and self != locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_exists(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "exists", exists)
    outcome = call(runner_for("notes.txt"), "inspect_file", path=str(locked / "secret.txt"))
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert "among the files of this run" in outcome.output


def test_file_roots_allow_a_directory(samples):
    root = samples["notes.txt"].parent
    settings = tools_settings(file_roots=[str(root)])
    runner = make_runner(ToolContext(settings=settings))
    outcome = call(runner, "inspect_file", path=str(samples["notes.txt"]))
    assert outcome.ok and "Thursday" in outcome.output


def test_mnt_inputs_path_resolves_to_attachment(runner_for):
    outcome = call(runner_for("notes.txt"), "inspect_file", path="/mnt/inputs/notes.txt")
    assert outcome.ok and "Thursday" in outcome.output


def test_empty_file(runner_for):
    outcome = call(runner_for("empty.txt"), "inspect_file", path="empty.txt")
    assert outcome.ok and "(this page has no text)" in outcome.output


def test_image_through_vision_model(runner_for):
    vision = ScriptedChatModel(script={"inspect_image": ["A red square next to the number 42."]})
    runner = runner_for("chart.png", vision_model=vision)
    outcome = call(runner, "inspect_file", path="chart.png", question="What number is shown?")
    assert outcome.ok, outcome.output
    assert "320×200" in outcome.output and "number 42" in outcome.output
    sent = vision.calls_for("inspect_image")[0].messages[0].content
    assert sent[0]["text"] == "What number is shown?"
    assert sent[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_image_without_vision_model_says_how_to_enable(runner_for):
    outcome = call(runner_for("chart.png"), "inspect_file", path="chart.png")
    assert not outcome.ok and outcome.error_kind == "unavailable"
    assert "tools.vision_model" in outcome.output and "320×200" in outcome.output
    assert "/mnt/inputs/chart.png" in outcome.output


def test_audio_without_transcription_model(runner_for):
    outcome = call(runner_for("clip.wav"), "inspect_file", path="clip.wav")
    assert not outcome.ok and outcome.error_kind == "unavailable"
    assert "tools.transcription_model" in outcome.output


def test_audio_through_openai_compatible_endpoint(runner_for, server: FixtureServer):
    def transcribe(request):
        assert request.headers["content-type"].startswith("multipart/form-data")
        assert b"whisper-test" in request.body and b"RIFF" in request.body
        return Response(200, json.dumps({"text": "hello from the fixture"}), "application/json")

    server.route("/v1/audio/transcriptions", transcribe)
    runner = runner_for(
        "clip.wav",
        settings={
            "transcription_model": "whisper-test",
            "transcription_base_url": server.url("/v1"),
        },
    )
    outcome = call(runner, "inspect_file", path="clip.wav")
    assert outcome.ok, outcome.output
    assert "Transcript of clip.wav:\nhello from the fixture" in outcome.output
    assert server.hits["/v1/audio/transcriptions"] == 1


def test_identical_calls_are_cached(runner_for):
    runner = runner_for("report.docx")
    first = call(runner, "inspect_file", path="report.docx")
    second = call(runner, "inspect_file", path="report.docx", page=1)  # same after defaults
    assert not first.cached and second.cached and second.output == first.output


@pytest.mark.slow
def test_converter_timeout_kills_the_worker_and_recovers(samples):
    pool = ConverterPool(max_workers=1)
    try:
        with pytest.raises(ToolFailure) as stopped:
            pool.convert("pdf", samples["report.pdf"], {}, timeout=0.01)  # too short to parse
        assert stopped.value.kind == "timeout" and "was stopped" in str(stopped.value)
        result = pool.convert("csv", samples["people.csv"], {}, timeout=30)
        assert "Wilmslow" in result["text"]
    finally:
        pool.close()


@pytest.mark.slow
def test_worker_that_died_while_idle_is_replaced(samples):
    pool = ConverterPool(max_workers=1)
    try:
        pool.convert("text", samples["notes.txt"], {}, timeout=30)
        worker = pool.sandbox._state.idle[0]  # type: ignore[attr-defined]
        worker.kill()  # dies between requests: the next request gets a fresh worker
        result = pool.convert("text", samples["notes.txt"], {}, timeout=30)
        assert "Thursday" in result["text"]
    finally:
        pool.close()


@pytest.mark.slow
def test_worker_memory_cap_turns_a_bomb_into_an_error(samples, tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"heron " * (12 * 1024 * 1024))  # 72 MB: several copies will not fit
    # The cap counts from what the warm worker has already imported.
    pool = ConverterPool(max_workers=1, memory_mb=100)
    try:
        with pytest.raises(ToolFailure) as refused:
            pool.convert("text", big, {}, timeout=60)
        assert refused.value.kind == "corrupt" and "memory" in str(refused.value)
        assert "Thursday" in pool.convert("text", samples["notes.txt"], {}, timeout=30)["text"]
    finally:
        pool.close()


def test_a_document_larger_than_the_sandbox_work_space_is_refused(tmp_path):
    big = tmp_path / "huge.txt"
    big.write_bytes(b"egret " * (2 * 1024 * 1024))  # 12 MB, over half of a 16 MB /work
    pool = ConverterPool(max_workers=1, sandbox=SandboxSettings(work_dir_mb=16))
    try:
        with pytest.raises(ToolFailure) as refused:
            pool.convert("text", big, {}, timeout=30)
    finally:
        pool.close()
    assert refused.value.kind == "unsupported" and "too large" in str(refused.value)
    assert "sandbox.work_dir_mb" in str(refused.value)


@pytest.fixture(scope="module")
def scanned_pdf(tmp_path_factory) -> Path:
    """A PDF whose only page is a picture of text: no text layer at all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (400, 100), "white")
    ImageDraw.Draw(picture).text((20, 40), "INVOICE 7731", fill="black")
    path = tmp_path_factory.mktemp("scanned") / "scan.pdf"
    figure = plt.figure(figsize=(4, 1))
    figure.figimage(picture)
    figure.savefig(path, format="pdf")
    plt.close(figure)
    return path


def test_scanned_pdf_pages_go_to_the_vision_model(scanned_pdf):
    vision = ScriptedChatModel(script={"inspect_image": ["INVOICE 7731"]})
    ctx = ToolContext(settings=tools_settings(), attachments=(scanned_pdf,), vision_model=vision)
    outcome = call(make_runner(ctx), "inspect_file", path="scan.pdf")
    assert outcome.ok, outcome.output
    assert "[PDF page 1]\nINVOICE 7731" in outcome.output
    assert "read from 1 page image(s) by the vision model" in outcome.output
    sent = vision.calls_for("inspect_image")[0].messages[0].content
    assert "Transcribe" in sent[0]["text"]
    assert sent[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_scanned_pdf_without_vision_model_says_so(scanned_pdf):
    ctx = ToolContext(settings=tools_settings(), attachments=(scanned_pdf,))
    outcome = call(make_runner(ctx), "inspect_file", path="scan.pdf")
    assert outcome.ok
    assert "no text layer" in outcome.output and "tools.vision_model" in outcome.output


def test_a_linked_attachment_keeps_its_own_name(samples, tmp_path):
    # A Hugging Face cache links `people.csv` to a blob named by its hash, without a suffix.
    blob = tmp_path / "blobs" / "4be1f0c2d9"
    blob.parent.mkdir()
    blob.write_bytes(samples["people.csv"].read_bytes())
    link = tmp_path / "snapshot" / "people.csv"
    link.parent.mkdir()
    link.symlink_to(blob)
    runner = make_runner(ToolContext(settings=tools_settings(), attachments=(link,)))
    assert "attached to this question: people.csv." in runner.tools["inspect_file"].description
    for given in ("people.csv", str(link), "/mnt/inputs/people.csv"):
        outcome = call(runner, "inspect_file", path=given)
        assert outcome.ok, outcome.output
        assert "| Alan | 41 | Wilmslow |" in outcome.output
        assert outcome.source_ref == str(link)
