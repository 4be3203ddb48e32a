"""A run killed at the worst moment: its commits made, its step's checkpoint not yet written.

The run is a real process that kills itself (SIGKILL: no handler, no cleanup) right after a tool
result's changes were committed; the test then resumes it the way `kgot ask --resume` does.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller import resume_async
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import open_store
from kgot.tests.controller.scripts import inspect_call, solution, votes

NO_MATH = {"needs_math": False, "reason": "stated"}
# Graph code that is not idempotent: run twice, it adds a second node (named apart: a node
# with the same name would land on the first one, see docs/memory.md).
ADD_NEXT_PLACE = """```python
G.add_node(f"place{len(G.nodes)}", label="Place", name=f"Place {len(G.nodes)}")
```"""

# Runs the first round of a question, then dies right after the first result was committed
# (entity) or applied (ephemeral graph): before update_graph's checkpoint.
_CRASHING_RUN = """
import asyncio, json, os, signal, sys
from kgot.config import load_settings
from kgot.controller import ask_async, insert
from kgot.llm.scripted import ScriptedChatModel

store, entity, files = sys.argv[1], sys.argv[2] or None, json.loads(sys.argv[3])
apply_code = insert._apply_code

async def apply_then_die(*args, **kwargs):
    changeset = await apply_code(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
    return changeset

insert._apply_code = apply_then_die
model = ScriptedChatModel(script=json.loads(sys.argv[4]))
settings = load_settings({"store.db": store, "controller.votes": 5}, environ={})
asyncio.run(ask_async("Where is Paris?", settings=settings, entity=entity, run_id="crash-run",
                      attachments=files, models={"planning": model, "execution": model}))
"""


def _crash_after_first_commit(settings: Settings, entity: str | None, files: list[Path]) -> None:
    script = {
        "decide": [{"decision": "INSERT", "reason": "where Paris is"}],
        "define_tool_calls": [{"$tool_calls": [inspect_call(f)["$tool_calls"][0] for f in files]}],
        "update_graph": [ADD_NEXT_PLACE],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGOT_", "OPENAI_"))}
    process = subprocess.run(
        [
            sys.executable,
            "-c",
            _CRASHING_RUN,
            settings.store.db,
            entity or "",
            json.dumps([str(f) for f in files]),
            json.dumps(script),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr


def _resume(settings: Settings) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(
        script={
            "update_graph": [ADD_NEXT_PLACE],  # what the model writes for any result
            "decide": [votes("RRRRR")],
            "query": ["```python\nresult = sorted(G.nodes)\n```"],
            "math_check": [NO_MATH],
            "solve": [solution("France")],
        }
    )
    models = {"planning": model, "execution": model}
    return asyncio.run(resume_async("crash-run", settings=settings, models=models)), model


@pytest.mark.slow
@pytest.mark.parametrize("entity", ["atlas", None], ids=["entity", "ephemeral"])
def test_a_run_killed_between_a_commit_and_its_checkpoint_applies_each_result_once(
    store_settings: Settings, tmp_path: Path, entity: str | None
) -> None:
    settings = store_settings
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for file in files:
        file.write_text("Paris is in France.\n", encoding="utf-8")
    if entity:
        with open_store(settings.store.db) as store:
            store.create_entity(entity)

    _crash_after_first_commit(settings, entity, files)
    if entity:
        with open_store(settings.store.db) as store:
            [commit] = store.session(entity).commits()
        assert commit["result_key"] == "crash-run/round 1/result 0"

    result, model = _resume(settings)

    assert result.status == "answered"
    # Each of the two results was applied once: place0 (before the kill), place1 (after).
    # Re-running the first result's code on the resumed graph would have added place2.
    assert sorted(node["id"] for node in result.graph["nodes"]) == ["place0", "place1"]
    if entity:
        # The first result's commit was found, so only the second one's code was written.
        assert len(model.calls_for("update_graph")) == 1
        with open_store(settings.store.db) as store:
            session = store.session(entity)
            commits = session.commits()
            assert sorted(session.load_graph().nodes) == ["place0", "place1"]
        assert sorted(c["result_key"] for c in commits) == [
            "crash-run/round 1/result 0",
            "crash-run/round 1/result 1",
        ]
        reused = [e for e in result.trace if getattr(e, "reused_version", None)]
        assert [getattr(e, "reused_version", None) for e in reused] == [1]
    else:
        # The ephemeral graph is rebuilt from the checkpoint, which the kill left without
        # the first result: both results are applied now, each once.
        assert len(model.calls_for("update_graph")) == 2


def test_a_result_key_is_committed_once_even_when_asked_twice(store_settings: Settings) -> None:
    """The store's own guard (under the entity lock), for a writer that did not look first."""
    settings = store_settings
    from kgot.graph_model import Changeset, Node
    from kgot.persistence import Provenance

    with open_store(settings.store.db) as store:
        store.create_entity("atlas")
        session = store.session("atlas")
        provenance = Provenance(run_id="r", step="update_graph", result_key="r/round 1/result 0")
        first = session.commit(
            Changeset(added_nodes=(Node("paris", "Place", {"name": "Paris"}),)), provenance
        ).version
        again = session.commit(
            Changeset(added_nodes=(Node("lyon", "Place", {"name": "Lyon"}),)), provenance
        ).version
        assert again == first == 1
        assert sorted(session.load_graph().nodes) == ["paris"]
        assert len(session.commits()) == 1
        assert session.committed("r/round 1/result 0")["version"] == 1  # type: ignore[index]
        assert session.committed("r/round 1/result 1") is None
