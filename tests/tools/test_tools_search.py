"""web_search: SearXNG and keyed providers over loopback HTTP, ddgs through an injected client."""

from __future__ import annotations

import json

import pytest
from ddgs.exceptions import DDGSException, RatelimitException

from kgot.tests.tools.tool_fixtures import Response, call, make_runner, tools_settings
from kgot.tools import ToolContext


class RecordingDdgs:
    """A ``ddgs.DDGS``-compatible client: records the call, answers from a list or raises."""

    def __init__(self, rows=None, error: Exception | None = None) -> None:
        self.rows = rows or []
        self.error = error
        self.calls: list[tuple[str, dict]] = []

    def text(self, query: str, **options):
        self.calls.append((query, options))
        if self.error is not None:
            raise self.error
        return self.rows


HERON_ROWS = [
    {
        "title": "Grey heron - Wikipedia",
        "href": "https://en.wikipedia.org/wiki/Grey_heron",
        "body": "The grey heron is a long-legged <b>wading</b> bird &amp; predator.",
    },
    {"title": "Herons", "href": "https://birds.example/herons", "body": "All about herons."},
]


def _searxng(server, rows):
    def handler(request):
        assert request.query["format"] == "json"
        return Response(200, json.dumps({"results": rows}), "application/json")

    server.route("/searx/search", handler)
    return server.url("/searx")


def test_ddgs_results_with_backend_and_time_range():
    client = RecordingDdgs(HERON_ROWS)
    settings = tools_settings(search_backend="duckduckgo,brave")
    tools = make_runner(ToolContext(settings=settings, ddgs=client))
    outcome = call(tools, "web_search", query="grey heron", max_results=5, time_range="year")
    assert outcome.ok, outcome.output
    assert client.calls == [
        ("grey heron", {"max_results": 5, "backend": "duckduckgo,brave", "timelimit": "y"})
    ]
    assert (
        "1. Grey heron - Wikipedia\n   https://en.wikipedia.org/wiki/Grey_heron" in outcome.output
    )
    assert "long-legged wading bird & predator." in outcome.output  # tags and entities cleaned
    assert outcome.source_ref.startswith("search:ddgs (duckduckgo,brave)?q=grey+heron")


def test_ddgs_no_results_is_a_successful_empty_answer():
    tools = make_runner(
        ToolContext(
            settings=tools_settings(), ddgs=RecordingDdgs(error=DDGSException("No results found."))
        )
    )
    outcome = call(tools, "web_search", query="zzqx nonsense")
    assert outcome.ok and "No results for 'zzqx nonsense'" in outcome.output


@pytest.mark.slow
def test_searxng_first_then_ddgs_when_it_fails(server):
    server.page("/searx/search", "down", status=502)
    client = RecordingDdgs(HERON_ROWS)
    settings = tools_settings(searxng_url=server.url("/searx"))
    outcome = call(
        make_runner(ToolContext(settings=settings, ddgs=client)), "web_search", query="heron"
    )
    assert outcome.ok and "via ddgs (auto)" in outcome.output
    assert server.hits["/searx/search"] == 3  # 502 is transient: retried, then handed over
    assert len(client.calls) == 1


def test_searxng_answers(server):
    url = _searxng(server, [{"title": "Heron", "url": "https://h.example/", "content": "bird"}])
    client = RecordingDdgs(HERON_ROWS)
    settings = tools_settings(searxng_url=url)
    outcome = call(
        make_runner(ToolContext(settings=settings, ddgs=client)),
        "web_search",
        query="heron",
        time_range="month",
    )
    assert outcome.ok and f"via SearXNG ({url})" in outcome.output
    assert "https://h.example/" in outcome.output
    assert server.requests[-1].query == {"q": "heron", "format": "json", "time_range": "month"}
    assert client.calls == []  # the first provider answered


def test_all_providers_failing_lists_each_reason(server):
    server.page("/searx/search", "nope", status=403)
    settings = tools_settings(searxng_url=server.url("/searx"))
    client = RecordingDdgs(error=RatelimitException("202 Ratelimit"))
    outcome = call(
        make_runner(ToolContext(settings=settings, ddgs=client)), "web_search", query="heron"
    )
    assert not outcome.ok and outcome.error_kind == "network"
    assert "SearXNG" in outcome.output and "HTTP 403" in outcome.output
    assert "rate-limiting" in outcome.output


def test_keyed_providers_send_their_keys(server):
    server.route(
        "/serp",
        Response(
            200,
            json.dumps(
                {
                    "organic_results": [
                        {"title": "S", "link": "https://serp.example/", "snippet": "from serpapi"}
                    ]
                }
            ),
            "application/json",
        ),
    )
    settings = tools_settings(
        serpapi_key="serp-secret", search_api_urls={"serpapi": server.url("/serp")}
    )
    outcome = call(
        make_runner(ToolContext(settings=settings, ddgs=RecordingDdgs())),
        "web_search",
        query="heron",
        time_range="week",
    )
    assert outcome.ok and "via SerpAPI" in outcome.output and "from serpapi" in outcome.output
    sent = server.requests[-1].query
    assert sent["api_key"] == "serp-secret" and sent["tbs"] == "qdr:w" and sent["q"] == "heron"
    assert "serp-secret" not in outcome.output and "serp-secret" not in outcome.source_ref


def test_tavily_and_brave(server):
    server.route(
        "/tavily",
        Response(
            200,
            json.dumps(
                {
                    "results": [
                        {"title": "T", "url": "https://tavily.example/", "content": "from tavily"}
                    ]
                }
            ),
            "application/json",
        ),
    )
    server.route(
        "/brave",
        Response(
            200,
            json.dumps(
                {
                    "web": {
                        "results": [
                            {
                                "title": "B",
                                "url": "https://brave.example/",
                                "description": "from brave",
                            }
                        ]
                    }
                }
            ),
            "application/json",
        ),
    )
    tavily = tools_settings(tavily_key="tv-key", search_api_urls={"tavily": server.url("/tavily")})
    outcome = call(make_runner(ToolContext(settings=tavily)), "web_search", query="heron")
    assert "from tavily" in outcome.output
    request = server.requests[-1]
    assert request.method == "POST" and request.headers["authorization"] == "Bearer tv-key"
    assert json.loads(request.body) == {"query": "heron", "max_results": 8}

    brave = tools_settings(brave_key="br-key", search_api_urls={"brave": server.url("/brave")})
    outcome = call(
        make_runner(ToolContext(settings=brave)), "web_search", query="heron", time_range="day"
    )
    assert "from brave" in outcome.output
    request = server.requests[-1]
    assert request.headers["x-subscription-token"] == "br-key"
    assert request.query["freshness"] == "pd"


def test_bad_arguments_name_the_fix():
    tools = make_runner(ToolContext(settings=tools_settings(), ddgs=RecordingDdgs(HERON_ROWS)))
    outcome = call(tools, "web_search", query="heron", max_results=99, engine="bing")
    assert not outcome.ok and outcome.error_kind == "input"
    assert "`max_results`" in outcome.output and "`engine`: unknown argument" in outcome.output
    assert "query (string, required)" in outcome.output


def test_a_blank_query_is_refused_before_any_search():
    ddgs = RecordingDdgs(HERON_ROWS)
    tools = make_runner(ToolContext(settings=tools_settings(), ddgs=ddgs))
    outcome = call(tools, "web_search", query=" \n\t ")
    assert not outcome.ok and outcome.error_kind == "input"
    assert "`query`" in outcome.output and "only whitespace" in outcome.output
    assert ddgs.calls == []  # nothing went out
    wiki = call(tools, "wikipedia", query="   ")
    assert not wiki.ok and wiki.error_kind == "input" and "only whitespace" in wiki.output
