"""Scripted model replies and folders the aide tests share."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from kgot.llm.scripted import STEP_METADATA_KEY, ScriptedChatModel

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
# The digest's read query: every organisation with its properties and where its edges lead.
QUERY = (
    "```python\n"
    "result = [\n"
    "    {'id': n, 'name': d.get('name'),\n"
    "     'edges': [[e['relationship'], t] for _, t, e in G.out_edges(n, data=True)]}\n"
    "    for n, d in sorted(G.nodes(data=True)) if d['label'] == 'Organization'\n"
    "]\n"
    "```"
)
BROKEN_QUERY = "```python\nresult = G.nodes['no such node']['name']\n```"  # a KeyError


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
    return "- What changed: " + " ".join(listed_nodes(call)) + " [node:invented]"


def fixed_digest_reply(call: Any) -> str:
    """The rewrite a bad citation asks for: only the node ids the prompt listed."""
    return "- What changed: " + " ".join(listed_nodes(call))


def listed_nodes(call: Any) -> list[str]:
    """The ``[node:ID]`` citations the digest prompt listed, in order."""
    return [
        line.split("]")[0] + "]" for line in call.prompt.splitlines() if line.startswith("[node:")
    ]


def model(**overrides: Any) -> ScriptedChatModel:
    script: dict[str, list[Any]] = {
        "update_graph": [write_code],
        "query": [QUERY],
        "digest": [digest_reply],
        "fix_digest": [fixed_digest_reply],
    }
    script.update(overrides)
    return ScriptedChatModel(script=script)


class SlowModel(ScriptedChatModel):
    """A scripted model whose answers to the steps in ``slow`` take that many seconds (an
    asyncio sleep, as a model endpoint's wait: the worker's event loop goes on meanwhile)."""

    slow: dict[str, float] = Field(default_factory=dict)

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        step = (getattr(run_manager, "metadata", None) or {}).get(STEP_METADATA_KEY)
        if step in self.slow:
            await asyncio.sleep(self.slow[step])
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


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
