"""User data stays where it belongs: never in the graph, never in a sandbox job, never in a
prompt but that user's own briefing and ask steps; two advisors on two entities, and two users
of one advisor, never see each other's data (SQLite and PostgreSQL, the real sandbox)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows, api
from kgot.aides.advisor.holdings import PositionRow
from kgot.config import Settings
from kgot.errors import UsageError
from kgot.llm.scripted import ScriptedCall, ScriptedChatModel
from kgot.persistence import Store
from kgot.sandbox.pool import WorkerProcess
from kgot.tests.advisor.market import QUERY

NOTE = "Apple reported fourth-quarter EPS of 2.10 against 1.95 expected; Apple Inc. is AAPL."
CODE = """```python
G.add_node("apple", label="Company", name="Apple Inc.", ticker="AAPL")
G.add_node("aapl", label="Asset", symbol="AAPL", type="stock")
G.add_edge("aapl", "apple", relationship="issued_by")
G.add_node("nvda", label="Asset", symbol="NVDA", type="stock")
G.add_node("q4", label="MarketEvent", type="earnings", summary="EPS beat estimates",
           occurred_at="2026-11-19T21:00:00Z")
G.add_edge("q4", "apple", relationship="affects", direction="positive", magnitude=0.7)
```"""
# What each user told the advisor: strings found nowhere else.
MARKERS = {
    "alice": ("college fund for Maya", "37.25", "151.17", "17y-horizon"),
    "bob": ("sail to Lake Tahoe", "19.5", "402.33", "4y-horizon"),
    "carol": ("carol's cherry orchard", "73.125", "88.08", "30y-horizon"),
}
USER_STEPS = ("advisor_briefing", "advisor_ask")


def _briefing(call: ScriptedCall) -> str:
    """A bullet citing the first fact the evidence lists."""
    found = re.search(r"\[(node:[^\]]+)\]", call.prompt.split("Evidence (cite by id):")[-1])
    return f"- The evidence says this [{found.group(1) if found else 'node:none'}]."


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script={
            "update_graph": [CODE],
            "query": [QUERY],
            "advisor_insight": [{"worthy": False, "reason": "nothing new"}],
            "advisor_briefing": [_briefing],
            "advisor_ask": ["Apple beat estimates [node:q4]."],
        }
    )


def _add(store: Store, aide: Any, user: str, held: list[tuple[str, float, float]]) -> None:
    goal, _shares, _cost, horizon = MARKERS[user]
    made = advisor_rows.add_user(
        store, aide.row, user, risk="moderate", horizon=horizon, goals=[goal]
    )
    advisor_rows.import_positions(store, aide.row, made, [PositionRow(*p) for p in held])


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every frame the host sends to a sandbox worker (jobs and resident state)."""
    frames: list[bytes] = []
    send, asend = WorkerProcess._send, WorkerProcess._asend

    def record(self: WorkerProcess, data: bytes, deadline: float) -> None:
        frames.append(bytes(data))
        send(self, data, deadline)

    async def arecord(self: WorkerProcess, data: bytes, deadline: float) -> None:
        frames.append(bytes(data))
        await asend(self, data, deadline)

    monkeypatch.setattr(WorkerProcess, "_send", record)
    monkeypatch.setattr(WorkerProcess, "_asend", arecord)
    return frames


@pytest.mark.slow
def test_user_data_never_leaves_its_user(
    store: Store, settings: Settings, tmp_path: Path, sent: list[bytes]
) -> None:
    model = _model()
    models = {"planning": model, "execution": model}
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    note = inbox / "apple.md"
    note.write_text(NOTE, encoding="utf-8")
    past = time.time() - 60
    os.utime(note, (past, past))
    first = create_aide(
        store, "fund_a", "markets_a", program="advisor", settings=settings, models=models
    )
    second = create_aide(
        store, "fund_b", "markets_b", program="advisor", settings=settings, models=models
    )
    for aide in (first, second):
        aide.add_source("dir", str(inbox))
    _add(store, first, "alice", [("AAPL", 37.25, 151.17)])
    _add(store, first, "bob", [("NVDA", 19.5, 402.33), ("AAPL", 2.0, 1.0)])
    _add(store, second, "carol", [("AAPL", 73.125, 88.08)])
    alice_box = tmp_path / "alice.jsonl"
    api.add_user_output(store, first.row, "alice", "jsonl", str(alice_box))
    everyone_box = tmp_path / "everyone.jsonl"
    first.add_output("jsonl", str(everyone_box))

    for aide in (first, second):
        report = aide.run_cycle()
        assert report.ingested == 1 and report.program is not None
        assert report.program["briefings"], report.program
    api.ask(store, "fund_a", "alice", "How did Apple do?", models=models)

    # Sandbox jobs carried the graph work (positive control), and no user's data.
    assert sent and any(b"Apple Inc." in frame for frame in sent)
    for user, markers in MARKERS.items():
        for marker in markers:
            assert not any(marker.encode() in frame for frame in sent), (user, marker)

    # Prompts: a user's data only in that user's briefing and ask steps.
    seen = {user: 0 for user in MARKERS}
    for call in model.calls:
        owners = {u for u, markers in MARKERS.items() if any(m in call.prompt for m in markers)}
        if owners:
            assert call.step in USER_STEPS, (call.step, owners)
            assert len(owners) == 1, (call.step, owners)
            seen[owners.pop()] += 1
    assert seen == {"alice": 2, "bob": 1, "carol": 1}  # alice: a briefing and a question

    # The graph holds none of it, in either entity.
    for entity in ("markets_a", "markets_b"):
        graph = store.session(entity).load_graph(include_meta=True)
        dumped = json.dumps(
            [list(graph.nodes(data=True)), list(graph.edges(data=True))], default=str
        )
        assert "Apple Inc." in dumped
        assert not any(m in dumped for markers in MARKERS.values() for m in markers)

    # Two advisors: carol is unknown to the first, alice to the second.
    with pytest.raises(UsageError, match="has no user 'carol'"):
        api.user_alerts(store, "fund_a", "carol")
    with pytest.raises(UsageError, match="has no user 'alice'"):
        api.get_briefing(store, "fund_b", "alice", models=models)
    # Two users of one advisor: each reads only their own briefings and alerts.
    for user in ("alice", "bob"):
        mine = advisor_rows.briefings(
            store, first.row, advisor_rows.get_user(store, first.row, user)
        )
        assert mine and {b.user for b in mine} == {user}
        assert all(a["user"] == user for a in api.alerts(store, "fund_a", user)["alerts"])
    # An output of alice's gets alice's briefing only; the aide's own output gets both.
    mine = [json.loads(line) for line in alice_box.read_text().splitlines()]
    assert mine and {line["user"] for line in mine} == {"alice"}
    assert not any(m in alice_box.read_text() for m in MARKERS["bob"])
    everyone = [json.loads(line) for line in everyone_box.read_text().splitlines()]
    assert {line["user"] for line in everyone} == {"alice", "bob"}
