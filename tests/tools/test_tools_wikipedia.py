"""wikipedia against a fake MediaWiki API on loopback."""

from __future__ import annotations

import socket

import pytest

from kgot.tests.tools.tool_fixtures import (
    LONG_PARAGRAPH,
    Revision,
    call,
    make_runner,
    tools_settings,
)
from kgot.tools import ToolContext

OLD = (
    "<div class='mw-parser-output'><p>The <b>Example River</b> is 120 km long.</p>"
    "<span class='mw-editsection'>[edit]</span></div>"
)
NEW = (
    "<div class='mw-parser-output'><p>The <b>Example River</b> is 132 km long."
    "<sup class='reference'>[1]</sup></p><h2>Bridges<span class='mw-editsection'>[edit]</span>"
    "</h2><table class='wikitable'><tr><th>Bridge</th><th>Opened</th></tr>"
    "<tr><td>Old Bridge</td><td>1820</td></tr><tr><td>New Bridge</td><td>1999</td></tr></table>"
    "<div class='navbox'>Rivers of Examplia navigation</div></div>"
)


@pytest.fixture
def tools(server, wiki):
    wiki.add(
        "Example River",
        Revision(101, "2015-06-01T10:00:00Z", OLD),
        Revision(202, "2021-03-05T08:30:00Z", NEW),
    )
    wiki.redirects["River Example"] = "Example River"
    long_html = "".join(f"<p>Chapter {i}. {LONG_PARAGRAPH * 3}</p>" for i in range(1, 60))
    wiki.add("Long Article", Revision(300, "2020-01-01T00:00:00Z", long_html))
    return make_runner(ToolContext(settings=tools_settings(server, max_output_chars=2500)))


def test_current_article_with_table_and_without_chrome(tools, server):
    outcome = call(tools, "wikipedia", query="Example River")
    assert outcome.ok, outcome.output
    assert "132 km long" in outcome.output
    assert "| Old Bridge | 1820 |" in outcome.output
    assert "[edit]" not in outcome.output and "[1]" not in outcome.output
    assert "navigation" not in outcome.output
    assert "Current revision 202" in outcome.output
    assert outcome.source_ref == server.url("/w/index.php?title=Example_River&oldid=202")


def test_redirects_are_followed(tools):
    outcome = call(tools, "wikipedia", query="River Example")
    assert outcome.ok and "Title: Example River" in outcome.output


def test_article_as_of_a_date(tools, server):
    outcome = call(tools, "wikipedia", query="Example River", date="2019-12-31")
    assert outcome.ok, outcome.output
    assert "120 km long" in outcome.output and "132 km" not in outcome.output
    assert "Revision 101 of 2015-06-01T10:00:00Z (the last one on or before 2019-12-31)" in (
        outcome.output
    )
    revisions_query = next(r.query for r in server.requests if r.query.get("prop") == "revisions")
    assert revisions_query["rvstart"] == "2019-12-31T23:59:59Z"
    assert revisions_query["rvdir"] == "older"
    assert outcome.source_ref.endswith("oldid=101")


def test_year_only_date_means_end_of_year(tools):
    outcome = call(tools, "wikipedia", query="Example River", date="2021")
    assert "132 km long" in outcome.output


def test_date_before_the_article_existed(tools):
    outcome = call(tools, "wikipedia", query="Example River", date="2010-01-01")
    assert not outcome.ok and outcome.error_kind == "not_found"
    assert "did not exist yet on 2010-01-01" in outcome.output
    assert "first revision is from 2015-06-01" in outcome.output


def test_missing_title_lists_search_results(tools):
    outcome = call(tools, "wikipedia", query="river bridges")
    assert outcome.ok
    assert "No article is titled 'river bridges'." in outcome.output
    assert "1. Example River" in outcome.output
    assert "<span" not in outcome.output and "&amp;" not in outcome.output


@pytest.mark.slow
def test_search_only_and_nothing_found(tools):
    listed = call(tools, "wikipedia", query="Example", search=True)
    assert "Wikipedia articles matching 'Example'" in listed.output
    nothing = call(tools, "wikipedia", query="qwxz")
    assert nothing.ok and "has no article matching" in nothing.output


def test_long_article_pages(tools):
    first = call(tools, "wikipedia", query="Long Article")
    assert "Page 1 of" in first.output
    assert 'wikipedia(query="Long Article", page=2)' in first.output
    found = call(tools, "wikipedia", query="Long Article", find="Chapter 50.")
    assert "1 match(es)" in found.output


def test_wrong_api_endpoint_is_a_configuration_problem(server):
    settings = tools_settings(server)
    settings = settings.model_copy(update={"wikipedia_api": server.url("/no-wiki/api.php")})
    outcome = call(make_runner(ToolContext(settings=settings)), "wikipedia", query="X")
    assert not outcome.ok and outcome.error_kind == "unavailable"
    assert "HTTP 404" in outcome.output and "tools.wikipedia_api" in outcome.output
    assert "archived copy" not in outcome.output  # advice for web pages, not for an API


@pytest.mark.slow
def test_api_unreachable():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = tools_settings(wikipedia_api=f"http://127.0.0.1:{port}/w/api.php")
    outcome = call(make_runner(ToolContext(settings=settings)), "wikipedia", query="X")
    assert not outcome.ok and outcome.error_kind == "network"
    assert "could not reach the Wikipedia API" in outcome.output
    assert "gave up after 3 attempts" in outcome.output
