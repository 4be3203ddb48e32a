"""An aide on feeds served by a loopback HTTP server: entries become items (their links are
the facts' sources), a feed answering 500 and a malformed one are reported each cycle while the
good feed goes on, and an entry seen before is not ingested again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kgot.aides import aide_rows, create_aide
from kgot.config import Settings
from kgot.persistence import Store
from kgot.tests.aides.aide_scripts import model
from kgot.tests.aides.test_aides_sources import FIRST, SECOND, rss
from kgot.tests.tools.tool_fixtures import FixtureServer


@pytest.fixture
def web() -> Iterator[FixtureServer]:
    fixture = FixtureServer()
    yield fixture
    fixture.close()


@pytest.mark.slow
def test_feeds_good_and_bad_in_one_aide(
    tmp_path: Path, store: Store, settings: Settings, web: FixtureServer
) -> None:
    settings = settings.model_copy(
        update={
            "tools": settings.tools.model_copy(
                update={"allow_private_urls": True, "timeout": 5.0, "search_backend": "none"}
            )
        }
    )
    code = '```python\nG.add_node("acme", label="Organization", name="Acme")\n```'
    scripted = model(update_graph=[code])
    aide = create_aide(
        store,
        "news",
        "acme",
        settings=settings,
        models={"planning": scripted, "execution": scripted},
    )
    feed = web.page("/feed.xml", rss(FIRST), "application/rss+xml")
    aide.add_source("rss", feed)
    aide.add_source("rss", web.page("/down.xml", "<h1>oops</h1>", status=500))
    aide.add_source(
        "rss", web.page("/broken.xml", "<rss><channel><item><title>x</titl", "text/xml")
    )

    first = aide.run_cycle()
    web.page("/feed.xml", rss(SECOND, FIRST), "application/rss+xml")
    second = aide.run_cycle()

    assert (first.new_items, first.ingested) == (1, 1)
    assert (second.new_items, second.ingested) == (1, 1)  # FIRST was seen: only SECOND is new
    for report in (first, second):
        [down, broken] = report.source_errors
        assert "HTTP 500" in down and "is not a readable RSS or Atom feed" in broken
    graph = store.session("acme").load_graph(include_meta=True)
    assert graph.nodes["acme"]["_source_ref"] == "https://acme.example/news/earnings"
    refs = sorted(row.source_ref for row in aide_rows.items(store, aide.row, "done"))
    assert refs == ["https://acme.example/news/cfo", "https://acme.example/news/earnings"]
