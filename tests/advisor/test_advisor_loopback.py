"""The advisor with the runtime's network parts (SQLite and PostgreSQL): a feed served on
loopback and read over HTTP, and loopback webhooks that check each delivery's signature. A
user's webhook gets that user's briefing and alerts only, signed with its secret; the aide's
own webhook gets everyone's; a second cycle with nothing new sends nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import create_aide
from kgot.aides.advisor import advisor_rows, api
from kgot.aides.advisor.holdings import PositionRow
from kgot.config import load_settings
from kgot.llm.scripted import ScriptedCall, ScriptedChatModel
from kgot.persistence import Store
from kgot.tests.advisor.market import QUERY
from kgot.tests.tools.tool_fixtures import FixtureServer, Request, Response

SECRET = "alice-hook-secret"
FEED = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Markets wire</title><link>https://wire.example/</link>
<description>test</description>
<item><title>Apple misses estimates and cuts guidance</title>
<link>https://wire.example/apple-miss</link><guid>urn:wire:apple-miss</guid>
<pubDate>{date}</pubDate>
<description>Apple reported EPS of 1.70 against 1.95 expected and cut its guidance.</description>
</item></channel></rss>"""
CODE = """```python
G.add_node("apple", label="Company", name="Apple Inc.", ticker="AAPL")
G.add_node("aapl", label="Asset", symbol="AAPL", type="stock")
G.add_edge("aapl", "apple", relationship="issued_by")
G.add_node("nvda", label="Asset", symbol="NVDA", type="stock")
G.add_node("apple_miss", label="MarketEvent", type="earnings", summary="EPS 1.70 vs 1.95",
           occurred_at="{when}")
G.add_edge("apple_miss", "apple", relationship="affects", direction="negative", magnitude=0.8)
```"""


class Hook:
    """A webhook receiver that checks signatures as a real one would."""

    def __init__(self, secret: str | None) -> None:
        self.secret = secret
        self.payloads: list[dict[str, Any]] = []
        self.signed: list[bool] = []

    def __call__(self, request: Request) -> Response:
        self.payloads.append(json.loads(request.body))
        given = request.headers.get("x-kgot-signature")
        if self.secret is None:
            self.signed.append(given is None)
        else:
            digest = hmac.new(self.secret.encode(), request.body, hashlib.sha256).hexdigest()
            self.signed.append(given is not None and hmac.compare_digest(given, "sha256=" + digest))
        assert request.headers["x-kgot-delivery"] == self.payloads[-1]["delivery_key"]
        return Response(200, "ok", "text/plain")


@pytest.fixture
def web() -> Iterator[FixtureServer]:
    server = FixtureServer()
    yield server
    server.close()


def _briefing(call: ScriptedCall) -> str:
    """A bullet citing the first fact the evidence lists."""
    found = re.search(r"\[(node:[^\]]+)\]", call.prompt.split("Evidence (cite by id):")[-1])
    return f"- The evidence says this [{found.group(1) if found else 'node:none'}]."


@pytest.mark.slow
def test_a_loopback_feed_and_signed_webhooks_per_user(
    store: Store, web: FixtureServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    yesterday = now - timedelta(days=1)
    feed = web.page(
        "/markets.xml",
        FEED.format(date=yesterday.strftime("%a, %d %b %Y %H:%M:%S GMT")),
        "application/rss+xml",
    )
    model = ScriptedChatModel(
        script={
            "update_graph": [CODE.replace("{when}", yesterday.strftime("%Y-%m-%dT%H:%M:%SZ"))],
            "query": [QUERY],
            "advisor_insight": [{"worthy": False, "reason": "nothing new"}],
            "advisor_briefing": [_briefing],
        }
    )
    settings = load_settings(
        {
            "store.db": str(tmp_path / "unused.db"),
            "llm.model": "scripted",
            "tools.allow_private_urls": True,  # the feed and the hooks are on this machine
        }
    )
    aide = create_aide(
        store,
        "adv",
        "markets",
        program="advisor",
        settings=settings,
        models={"planning": model, "execution": model},
    )
    aide.add_source("rss", feed)
    for user, symbol in (("alice", "AAPL"), ("bob", "NVDA")):
        made = advisor_rows.add_user(store, aide.row, user, risk="moderate")
        advisor_rows.import_positions(store, aide.row, made, [PositionRow(symbol, 10.0)])
    monkeypatch.setenv("ALICE_HOOK", SECRET)
    alice_hook, every_hook = Hook(SECRET), Hook(None)
    api.add_user_output(
        store, "adv", "alice", "webhook", web.route("/alice", alice_hook), secret_env="ALICE_HOOK"
    )
    aide.add_output("webhook", web.route("/all", every_hook))

    first = aide.run_cycle()

    assert first.ingested == 1 and web.hits["/markets.xml"] == 1
    assert first.deliveries and all(d["ok"] for d in first.deliveries), first.deliveries
    # alice's hook: her briefing and her alert, each signed with her secret; nothing of bob's.
    assert alice_hook.signed and all(alice_hook.signed)
    assert {p["user"] for p in alice_hook.payloads} == {"alice"}
    assert sorted(p["kind"] for p in alice_hook.payloads) == ["alert", "briefing"]
    [alert] = [p for p in alice_hook.payloads if p["kind"] == "alert"]
    assert alert["rule"] == "negative_impact" and "edge:apple_miss-affects->apple" in alert["facts"]
    # The aide's own hook (no secret, no signature): everyone's.
    assert all(every_hook.signed)
    assert {(p["user"], p["kind"]) for p in every_hook.payloads} == {
        ("alice", "briefing"),
        ("alice", "alert"),
        ("bob", "briefing"),
    }

    # Nothing new in the feed: nothing ingested, no model call, nothing sent again.
    sent = (len(alice_hook.payloads), len(every_hook.payloads))
    second = aide.run_cycle()
    assert web.hits["/markets.xml"] == 2 and second.new_items == 0
    assert second.llm_calls == 0 and second.deliveries == []
    assert (len(alice_hook.payloads), len(every_hook.payloads)) == sent
