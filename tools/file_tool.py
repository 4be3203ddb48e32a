"""inspect_file: read a question's attachment, a download, or an archive member.

PDF, Word, Excel/CSV (as Markdown tables), PowerPoint, HTML, JSON/XML, text and code are
converted to text and paged; a ZIP archive is listed and its members read with ``member=``;
images go to the vision model (``question=`` asks something specific), audio to the
transcription model.
"""

from __future__ import annotations

import json

from pydantic import Field

from kgot.daemon_threads import run_blocking
from kgot.tools.base import ToolResult
from kgot.tools.media import capability_notes
from kgot.tools.paging import Document
from kgot.tools.reading import extract_member, read_local
from kgot.tools.spec import ToolArgs, ToolFunction, ToolSpec
from kgot.tools.text import call_text
from kgot.tools.tool_session import ToolSession


class InspectFileArgs(ToolArgs):
    path: str = Field(
        min_length=1,
        description="The file: an attachment's name or path (as given in the question), or a "
        "path returned by another tool (e.g. workspace/report.pdf).",
    )
    question: str | None = Field(
        None, description="For images: what to look for or answer about the image."
    )
    member: str | None = Field(
        None, description="For ZIP archives: the member to extract and read (from the listing)."
    )
    page: int = Field(1, ge=1, description="Which page of a long text to show.")
    find: str | None = Field(
        None, description="Instead of a page, list every place these words occur."
    )


def build(session: ToolSession) -> ToolFunction:
    async def inspect_file(
        path: str,
        question: str | None = None,
        member: str | None = None,
        page: int = 1,
        find: str | None = None,
    ) -> ToolResult:
        source = session.resolve_file(path)
        name = source.name
        if member:
            source = await run_blocking(extract_member, session, source, member, name=name)
            name = source.name
        stat = source.stat()
        again = call_text("inspect_file", {"path": path, "member": member, "question": question})
        # The call is part of the key: pages are sized to fit it in every page's footer.
        key = json.dumps(["file", str(source), stat.st_size, stat.st_mtime_ns, question, again])

        async def load() -> Document:
            document = await read_local(
                session, source, name=name, source_ref=str(source), question=question
            )
            if member:
                location = session.sandbox_path(source)
                document.header = f"Extracted from {path} to {session.model_path(source)}" + (
                    f" (python tool: {location})" if location else ""
                )
            return document

        document = await session.document(key, load, again=again)
        return ToolResult(session.show(document, page=page, find=find, again=again), str(source))

    return inspect_file


SPEC = ToolSpec(
    name="inspect_file",
    description=(
        "Read a local file attached to the question (or downloaded earlier): PDF, Word, Excel "
        "and CSV (tables kept as tables), PowerPoint, HTML, JSON, XML, text and code, ZIP "
        "archives (lists members; read one with member=), images (described by a vision model; "
        "ask with question=) and audio (transcribed). Long files come in pages; use page= or "
        "find=. For calculations over a file's data, use the python tool instead."
    ),
    args_schema=InspectFileArgs,
    more_hint="ask for another page with page=, or locate text with find=",
    build=build,
    context_note=lambda session: (
        " Files attached to this question: " + ", ".join(p.name for p in session.attachments) + "."
        if session.attachments
        else ""
    ),
    reads_documents=True,
    notes=lambda settings: capability_notes(settings, audio=True),
)
