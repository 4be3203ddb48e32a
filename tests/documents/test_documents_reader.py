"""read_document: one way from a file (or its bytes) to text, failures as typed outcomes.

Documents other than plain text are parsed by the real conversion workers in the sandbox.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings
from kgot.documents import DocumentText, Unreadable, convert_pool, read_document
from kgot.documents.convert_pool import ParserUnavailable

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


PAGE = (
    b"<!doctype html><html><head><title>Paris facts</title></head><body><main>"
    b"<h1>Paris</h1><p>Paris is the capital of France and its largest city, with about "
    b"two million people living within its administrative limits.</p></main></body></html>"
)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


async def test_plain_text_is_decoded_without_a_parser(tmp_path: Path) -> None:
    note = tmp_path / "notes.md"
    note.write_bytes("Acme's CFO: margins grew to 12 %.\n".encode("utf-16"))
    outcome = await read_document(note, Settings())
    assert outcome == DocumentText("Acme's CFO: margins grew to 12 %.\n", None, "text")
    from_bytes = await read_document(note.read_bytes(), Settings(), name="notes.md")
    assert from_bytes == outcome


@pytest.mark.slow
async def test_a_web_page_is_parsed_in_the_sandbox_with_its_title(tmp_path: Path) -> None:
    page = tmp_path / "paris.html"
    page.write_bytes(PAGE)
    outcome = await read_document(page, Settings())
    assert isinstance(outcome, DocumentText), outcome
    assert outcome.format == "html" and outcome.title == "Paris facts"
    assert "capital of France" in outcome.text and "<p>" not in outcome.text
    # The bytes alone read the same; their name says what they are.
    assert await read_document(PAGE, Settings(), name="paris.html") == outcome


async def test_a_missing_file_is_reported_as_missing(tmp_path: Path) -> None:
    outcome = await read_document(tmp_path / "nowhere.pdf", Settings())
    assert outcome == Unreadable("missing", "does not exist or is not a file")
    assert (await read_document(tmp_path, Settings())).problem == "missing"  # a directory


async def test_an_image_is_not_a_document_and_says_what_it_is() -> None:
    outcome = await read_document(PNG, Settings(), name="photo.png")
    assert outcome == Unreadable(
        "not_a_document", "photo.png is not a document kgot reads", "image"
    )


async def test_a_damaged_pdf_is_a_failed_parse_with_the_parsers_reason(tmp_path: Path) -> None:
    broken = tmp_path / "report.pdf"
    broken.write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 50)
    outcome = await read_document(broken, Settings())
    assert isinstance(outcome, Unreadable), outcome
    assert outcome.problem == "failed" and outcome.format == "pdf"
    assert "report.pdf" in outcome.detail


async def test_bytes_need_a_name() -> None:
    with pytest.raises(TypeError, match="name"):
        await read_document(PAGE, Settings())


async def test_a_parser_that_cannot_start_is_told_apart_by_its_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine whose sandbox cannot start (the pool's own failure type, whatever its words)
    is not the file's fault; a parse that fails with the same words is."""

    class Pool:
        def __init__(self, failure: Exception) -> None:
            self.failure = failure

        async def aconvert(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            raise self.failure

    page = tmp_path / "paris.html"
    page.write_bytes(PAGE)
    down = ParserUnavailable("no isolating sandbox can run here")
    monkeypatch.setattr(convert_pool, "shared_pool", lambda *args, **kwargs: Pool(down))
    outcome = await read_document(page, Settings())
    assert outcome == Unreadable("parser_unavailable", str(down), "html")
    assert str(down).startswith("cannot start the document parser: no isolating sandbox")

    lookalike = convert_pool.ToolFailure(str(down), kind="internal")
    monkeypatch.setattr(convert_pool, "shared_pool", lambda *args, **kwargs: Pool(lookalike))
    assert (await read_document(page, Settings())).problem == "failed"
