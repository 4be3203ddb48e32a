"""A tiny pure-Python wheel written by hand, for package allow-list tests (no build tools, no
network). Imported by the sandbox and tools tests as ``kgot.tests.sandbox.wheels``."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

PACKAGE = "kgot-tinypkg"
MODULE = "kgot_tinypkg"


def build_wheel(directory: Path, version: str = "1.0", answer: int = 42) -> Path:
    """Write ``kgot_tinypkg-VERSION-py3-none-any.whl`` (``ANSWER = answer``) into a folder
    under ``directory`` (``wheels``, ``wheels-VERSION`` for other versions); returns the folder,
    for ``pip --find-links``."""
    wheels = directory / ("wheels" if version == "1.0" else f"wheels-{version}")
    wheels.mkdir()
    info = f"kgot_tinypkg-{version}.dist-info"
    files = {
        f"{MODULE}/__init__.py": f"ANSWER = {answer}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kgot-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = [
        f"{name},sha256={_digest(content)},{len(content.encode())}"
        for name, content in files.items()
    ]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(wheels / f"kgot_tinypkg-{version}-py3-none-any.whl", "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return wheels


def _digest(content: str) -> str:
    raw = hashlib.sha256(content.encode()).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
