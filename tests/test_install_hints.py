"""kgot is installed from its checkout, not from PyPI: no message or page may tell a user to
`pip install 'kgot[extra]'`, which fails everywhere (issue 27, item 5)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FROM_PYPI = re.compile(r"pip install (?:-U )?['\"]?kgot\b(?!/)")


def test_install_hints_name_the_checkout() -> None:
    offending = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(ROOT.rglob("*"))
        if path.suffix in {".py", ".md", ".toml"}
        and ".git" not in path.parts
        and path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if FROM_PYPI.search(line)
    ]
    assert offending == [], "use pip install -e '.[extra]' (in the checkout): " + ", ".join(
        offending
    )
