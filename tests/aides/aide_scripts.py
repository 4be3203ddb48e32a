"""Scripted model replies and folders the aide tests share."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from kgot.llm.scripted import ScriptedChatModel

NOTES = {
    "acme.md": "Acme Corp opened a new office in Zurich this week.",
    "globex.md": "Globex Corporation is based in Springfield.",
    "initech.txt": "Initech moved its headquarters to Austin.",
}
# One place per company the notes name: the code the model "writes" for each note.
CODE = {
    "Acme": ("acme", "Acme Corp", "zurich", "Zurich"),
    "Globex": ("globex", "Globex Corporation", "springfield", "Springfield"),
    "Initech": ("initech", "Initech", "austin", "Austin"),
}
BROKEN = '```python\nG.add_node("nameless", label="Organization")\n```'  # name is required


def write_code(call: Any) -> str:
    """Graph code for whichever note the write prompt shows."""
    text = call.prompt.split("Tool result:")[-1]
    for word, (org, org_name, place, place_name) in CODE.items():
        if word in text:
            return (
                "```python\n"
                f'G.add_node("{org}", label="Organization", name="{org_name}")\n'
                f'G.add_node("{place}", label="Place", name="{place_name}")\n'
                f'G.add_edge("{org}", "{place}", relationship="located_in")\n'
                "```"
            )
    return "```python\npass\n```"


def digest_reply(call: Any) -> str:
    """A digest citing every node id the prompt listed, and one id it did not."""
    cited = [
        line.split("]")[0] + "]" for line in call.prompt.splitlines() if line.startswith("[node:")
    ]
    return "- What changed: " + " ".join(cited) + " [node:invented]"


def model(**overrides: Any) -> ScriptedChatModel:
    script: dict[str, list[Any]] = {"update_graph": [write_code], "digest": [digest_reply]}
    script.update(overrides)
    return ScriptedChatModel(script=script)


def inbox(folder: Path, names: list[str]) -> Path:
    """A folder holding the named notes, written a minute ago (settled: sources skip files
    written in the last seconds, which may be half-written)."""
    folder.mkdir(parents=True, exist_ok=True)
    past = time.time() - 60
    for name in names:
        path = folder / name
        path.write_text(NOTES[name], encoding="utf-8")
        os.utime(path, (past, past))
    return folder
