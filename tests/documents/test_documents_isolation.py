"""Document conversion runs in the sandbox: a parser taken over by a crafted file finds no host
files and no network.

The "taken over parser" is the real conversion job with its text reader replaced by code that
tries what an exploit would: read a file of the user's, connect to a loopback service, look at
what else was staged. The same job run as a plain host process (what document conversion
used to be) does read and connect, so the probe is not toothless.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgot.documents import convert_pool
from kgot.documents.convert_pool import ConverterPool

_HOSTILE = """

def _hostile(path, options):
    import os
    import socket

    findings = []
    target = path.read_text().strip()  # the document names a host file to steal
    try:
        with open(target) as handle:
            findings.append("read:" + handle.read())
    except OSError as error:
        findings.append("read-refused:" + type(error).__name__)
    try:
        with socket.create_connection(("127.0.0.1", options["port"]), timeout=2) as link:
            link.sendall(b"leak")
        findings.append("connected")
    except OSError as error:
        findings.append("connect-refused:" + type(error).__name__)
    findings.append("staged:" + ",".join(sorted(os.listdir(os.path.dirname(path)))))
    return _result("\\n".join(findings))


_HANDLERS["text"] = _hostile
"""


def _hostile_bundle() -> bytes:
    """The real job zip, with the text reader replaced (and the bytecode dropped, so the
    changed source is what runs)."""
    original = zipfile.ZipFile(io.BytesIO(convert_pool.job_bundle()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in original.namelist():
            if name.endswith(".pyc"):
                continue
            content = original.read(name)
            if name.endswith("/convert.py"):
                content += _HOSTILE.encode()
            archive.writestr(name, content)
    return buffer.getvalue()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()


def _connections(server: socket.socket) -> int:
    count = 0
    while True:
        try:
            peer, _ = server.accept()
        except BlockingIOError:
            return count
        peer.close()
        count += 1


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "private" / "api-key.txt"
    path.parent.mkdir()
    path.write_text("sk-heron-4471")
    return path


@pytest.mark.slow
def test_a_hijacked_parser_reads_no_host_file_and_reaches_no_socket(
    monkeypatch, tmp_path, secret, listener
):
    hostile = _hostile_bundle()
    monkeypatch.setattr(convert_pool, "job_bundle", lambda: hostile)
    document = tmp_path / "notes.txt"
    document.write_text(str(secret))
    pool = ConverterPool(max_workers=1)
    try:
        port = listener.getsockname()[1]
        result = pool.convert("text", document, {"port": port}, timeout=30)
    finally:
        pool.close()
    text = result["text"]
    assert "sk-heron-4471" not in text and "read-refused:" in text, text
    assert "connect-refused:" in text and _connections(listener) == 0, text
    # Only the document (and the job's own code and request) was staged in.
    assert "staged:document.txt,kgotconvert.zip,request.json" in text, text


def test_the_same_job_on_the_host_would_read_and_connect(tmp_path, secret, listener):
    """The control: as a plain host process, the hijacked job gets both."""
    work = tmp_path / "work"
    (work / "in").mkdir(parents=True)
    (work / "out").mkdir()
    (work / "in" / "kgotconvert.zip").write_bytes(_hostile_bundle())
    (work / "in" / "document.txt").write_text(str(secret))
    request = {
        "format": "text",
        "path": "in/document.txt",
        "options": {"port": listener.getsockname()[1]},
    }
    (work / "in" / "request.json").write_text(json.dumps(request))
    bootstrap = convert_pool._BOOTSTRAP
    subprocess.run([sys.executable, "-c", bootstrap], cwd=work, check=True, timeout=120)
    reply = json.loads((work / "out" / "result.json").read_text())
    assert "read:sk-heron-4471" in reply["result"]["text"]
    assert "connected" in reply["result"]["text"] and _connections(listener) == 1
