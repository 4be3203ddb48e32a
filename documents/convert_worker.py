"""The document-conversion job: runs inside the sandbox, never on the host.

:mod:`kgot.documents.convert_pool` ships this module with :mod:`kgot.documents.convert` and
:mod:`kgot.documents.formats` as the ``kgotconvert`` zip package, next to the document and
``request.json`` (``{"format", "path", "options"}``) in the job's ``in/``. The reply goes to
``out/result.json``: ``{"ok": true, "result": {...}}`` or ``{"ok": false, "kind", "error"}``.
Anything the parsers print goes to the job's stdout/stderr, so it can never corrupt a reply.
Memory and time are capped by the sandbox: a decompression bomb ends in a ``MemoryError`` reply
(or, at worst, in the job being killed) instead of the host swapping.
"""

from __future__ import annotations

import json
import os
from typing import Any

REQUEST = os.path.join("in", "request.json")
RESULT = os.path.join("out", "result.json")


def main() -> None:
    from . import convert

    with open(REQUEST, encoding="utf-8") as handle:
        request = json.load(handle)
    reply: dict[str, Any]
    try:
        path = os.path.abspath(request["path"])
        result = convert.convert(request["format"], path, request["options"])
        reply = {"ok": True, "result": result}
    except convert.ConversionError as error:
        reply = {"ok": False, "kind": error.kind, "error": str(error)}
    except MemoryError:
        reply = {"ok": False, "kind": "corrupt", "error": "parsing needed too much memory"}
    except Exception as error:
        reply = {"ok": False, "kind": "internal", "error": f"{type(error).__name__}: {error}"}
    try:
        # Lone surrogates (from undecodable file names or text) pass through as they are.
        data = json.dumps(reply, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except MemoryError:
        data = b'{"ok": false, "kind": "corrupt", "error": "parsing needed too much memory"}'
    os.makedirs(os.path.dirname(RESULT), exist_ok=True)
    with open(RESULT, "wb") as handle:
        handle.write(data)
