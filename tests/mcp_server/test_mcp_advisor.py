"""The advisor's ``alerts`` and ``briefing`` tools over stdio: the alerts its cycles recorded
for a user of the entity's advisor; an entity without an advisor says so."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kgot.aides import create_aide
from kgot.aides.advisor import add_user
from kgot.aides.advisor.alerts import Alert
from kgot.aides.advisor.records import get_user, record_alerts
from kgot.aides.records import get_aide
from kgot.persistence import open_store
from kgot.tests.mcp_server.mcp_support import run, seed, stdio_session, text_of


def test_alerts_of_the_entitys_advisor(tmp_path: Path) -> None:
    url = str(tmp_path / "kgot.db")
    seed(url, "a")
    seed(url, "b", own_company=True)
    with open_store(url) as store:
        create_aide(store, "adv", "a", program="advisor")
        add_user(store, "adv", "alice", risk="conservative")
        row = get_aide(store, "adv")
        alert = Alert(
            rule="negative_impact",
            key="negative_impact:apple:1",
            severity="warning",
            message="A negative event affects Apple, which alice holds",
            facts=("apple",),
            symbol="AAPL",
        )
        record_alerts(
            store, row, get_user(store, row, "alice"), [alert], cycle_id=None, now=datetime.now(UTC)
        )

    async def call(entity: str, name: str, arguments: dict[str, Any]) -> Any:
        async with stdio_session(["mcp", "serve", "--entity", entity, "--db", url]) as session:
            return await session.call_tool(name, arguments)

    found = run(lambda: call("a", "alerts", {"user": "alice"}))
    assert not found.is_error, text_of(found)
    alerts = found.structured_content["result"]["alerts"]
    assert [a["rule"] for a in alerts] == ["negative_impact"] and alerts[0]["facts"] == ["apple"]
    stranger = run(lambda: call("a", "alerts", {"user": "mallory"}))
    assert stranger.is_error
    none_here = run(lambda: call("b", "briefing", {"user": "alice"}))
    assert none_here.is_error and "entity 'b' has no advisor" in text_of(none_here)
