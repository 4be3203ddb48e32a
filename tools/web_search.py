"""web_search: search the web through ddgs, or through a keyed provider when one is configured.

Providers are tried in order — SerpAPI, Tavily, Brave Search API, SearXNG (each only when its
key or URL is set), then ddgs with ``tools.search_backend`` — and the first that returns results
answers. A provider that fails or finds nothing hands over to the next; only when all fail is
the call a failure, with each provider's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlencode

from pydantic import Field

from kgot.config import ToolsSettings
from kgot.daemon_threads import run_blocking
from kgot.tools.base import ToolFailure, ToolResult
from kgot.tools.spec import ToolArgs, ToolFunction, ToolSpec
from kgot.tools.text import strip_markup
from kgot.tools.tool_session import ToolSession
from kgot.webclient import Http, shown_url

TimeRange = Literal["day", "week", "month", "year"]
DEFAULT_ENDPOINTS = {
    "serpapi": "https://serpapi.com/search.json",
    "tavily": "https://api.tavily.com/search",
    "brave": "https://api.search.brave.com/res/v1/web/search",
}


class WebSearchArgs(ToolArgs):
    query: str = Field(
        min_length=1,
        description="What to search for: a few precise keywords, names, quoted phrases.",
    )
    max_results: int = Field(8, ge=1, le=20, description="How many results to return.")
    time_range: TimeRange | None = Field(
        None, description="Only results from the last day, week, month or year."
    )


@dataclass
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchProvider(Protocol):
    name: str

    async def search(
        self, query: str, max_results: int, time_range: TimeRange | None
    ) -> list[SearchHit]: ...


class DdgsProvider:
    """The ddgs metasearch library (no key needed); runs in a thread, it is synchronous."""

    def __init__(self, settings: ToolsSettings, client: Any | None = None) -> None:
        self.backend = settings.search_backend or "auto"
        self.name = f"ddgs ({self.backend})"
        self._timeout = settings.timeout
        self._client = client

    def _ddgs(self) -> Any:
        if self._client is None:
            from ddgs import DDGS

            self._client = DDGS(timeout=max(1, int(self._timeout / 2)))
        return self._client

    async def search(
        self, query: str, max_results: int, time_range: TimeRange | None
    ) -> list[SearchHit]:
        return await run_blocking(self._search, query, max_results, time_range)

    def _search(
        self, query: str, max_results: int, time_range: TimeRange | None
    ) -> list[SearchHit]:
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        try:
            rows = self._ddgs().text(
                query,
                max_results=max_results,
                backend=self.backend,
                timelimit=time_range[0] if time_range else None,
            )
        except RatelimitException:
            raise ToolFailure(
                "the search engines are rate-limiting kgot; wait a little or configure a "
                "keyed provider (tools.serpapi_key, tavily_key, brave_key or searxng_url)",
                kind="network",
            ) from None
        except TimeoutException:
            raise ToolFailure("the search engines did not answer in time", kind="network") from None
        except DDGSException as error:
            if "no results" in str(error).lower():
                return []
            raise ToolFailure(f"ddgs search failed: {error}", kind="network") from None
        return [
            SearchHit(
                strip_markup(r.get("title")),
                str(r.get("href") or r.get("url") or ""),
                strip_markup(r.get("body") or r.get("snippet")),
            )
            for r in rows or []
        ]


class SearxngProvider:
    """A SearXNG instance's JSON API (``format=json`` must be enabled on the instance)."""

    def __init__(self, http: Http, url: str) -> None:
        self.http = http
        self.url = url.rstrip("/")
        self.name = f"SearXNG ({shown_url(self.url)})"  # named in messages: no password

    async def search(
        self, query: str, max_results: int, time_range: TimeRange | None
    ) -> list[SearchHit]:
        params: dict[str, Any] = {"q": query, "format": "json"}
        if time_range:
            params["time_range"] = time_range
        data = await self.http.api(
            f"{self.url}/search", params=params, service="SearXNG", setting="tools.searxng_url"
        )
        rows = data.get("results") if isinstance(data, dict) else None
        return _hits(rows, "url", "content", max_results)


class SerpApiProvider:
    def __init__(self, http: Http, key: str, url: str) -> None:
        self.http, self.key, self.url, self.name = http, key, url, "SerpAPI"

    async def search(
        self, query: str, max_results: int, time_range: TimeRange | None
    ) -> list[SearchHit]:
        params: dict[str, Any] = {
            "engine": "google",
            "q": query,
            "num": max_results,
            "api_key": self.key,
        }
        if time_range:
            params["tbs"] = f"qdr:{time_range[0]}"
        data = await self.http.api(
            self.url,
            params=params,
            service="SerpAPI",
            setting="tools.search_api_urls.serpapi",
            key_setting="tools.serpapi_key",
        )
        if isinstance(data, dict) and data.get("error") and not data.get("organic_results"):
            if "hasn't returned any results" in str(data["error"]):
                return []
            raise ToolFailure(f"SerpAPI: {data['error']}", kind="network")
        rows = data.get("organic_results") if isinstance(data, dict) else None
        return _hits(rows, "link", "snippet", max_results)


class TavilyProvider:
    def __init__(self, http: Http, key: str, url: str) -> None:
        self.http, self.key, self.url, self.name = http, key, url, "Tavily"

    async def search(
        self, query: str, max_results: int, time_range: TimeRange | None
    ) -> list[SearchHit]:
        body: dict[str, Any] = {"query": query, "max_results": max_results}
        if time_range:
            body["time_range"] = time_range
        data = await self.http.api(
            self.url,
            json_body=body,
            headers={"Authorization": f"Bearer {self.key}"},
            service="Tavily",
            setting="tools.search_api_urls.tavily",
            key_setting="tools.tavily_key",
        )
        rows = data.get("results") if isinstance(data, dict) else None
        return _hits(rows, "url", "content", max_results)


class BraveProvider:
    def __init__(self, http: Http, key: str, url: str) -> None:
        self.http, self.key, self.url, self.name = http, key, url, "Brave Search API"

    async def search(
        self, query: str, max_results: int, time_range: TimeRange | None
    ) -> list[SearchHit]:
        params: dict[str, Any] = {"q": query, "count": min(max_results, 20)}
        if time_range:
            params["freshness"] = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}[
                time_range
            ]
        data = await self.http.api(
            self.url,
            params=params,
            headers={"X-Subscription-Token": self.key, "Accept": "application/json"},
            service="Brave Search API",
            setting="tools.search_api_urls.brave",
            key_setting="tools.brave_key",
        )
        rows = (data.get("web") or {}).get("results") if isinstance(data, dict) else None
        return _hits(rows, "url", "description", max_results)


def _hits(rows: Any, url_key: str, snippet_key: str, limit: int) -> list[SearchHit]:
    """Search hits from a provider's result rows (dicts with a title, a URL and a snippet)."""
    return [
        SearchHit(
            strip_markup(row.get("title")),
            str(row.get(url_key) or ""),
            strip_markup(row.get(snippet_key)),
        )
        for row in (rows if isinstance(rows, list) else [])[:limit]
        if isinstance(row, dict)
    ]


def providers_for(
    settings: ToolsSettings, http: Http, *, ddgs_client: Any | None = None
) -> list[SearchProvider]:
    """The configured providers, in the order they are tried."""
    urls = {**DEFAULT_ENDPOINTS, **settings.search_api_urls}
    chain: list[SearchProvider] = []
    if settings.serpapi_key:
        chain.append(
            SerpApiProvider(http, settings.serpapi_key.get_secret_value(), urls["serpapi"])
        )
    if settings.tavily_key:
        chain.append(TavilyProvider(http, settings.tavily_key.get_secret_value(), urls["tavily"]))
    if settings.brave_key:
        chain.append(BraveProvider(http, settings.brave_key.get_secret_value(), urls["brave"]))
    if settings.searxng_url:
        chain.append(SearxngProvider(http, settings.searxng_url))
    if settings.search_backend.strip().lower() != "none":
        chain.append(DdgsProvider(settings, ddgs_client))
    return chain


def describe_chain(settings: ToolsSettings) -> str:
    """The provider order in words, for ``kgot tools list``."""
    names = [p.name for p in providers_for(settings, Http(settings))]
    return " → ".join(names) if names else "no provider (search_backend = none)"


def build(session: ToolSession) -> ToolFunction:
    chain = providers_for(session.settings, session.http, ddgs_client=session.ctx.ddgs)

    async def web_search(
        query: str, max_results: int = 8, time_range: TimeRange | None = None
    ) -> ToolResult:
        if not chain:
            raise ToolFailure(
                "no search provider is configured (tools.search_backend is `none` and no keys "
                "are set); use wikipedia or visit_page instead",
                kind="unavailable",
            )
        failures: list[str] = []
        for provider in chain:
            try:
                hits = await provider.search(query, max_results, time_range)
            except ToolFailure as error:
                failures.append(f"{provider.name}: {error}")
                continue
            hits = [h for h in hits if h.url][:max_results]
            if hits:
                return ToolResult(_format(query, provider.name, hits), _source(provider, query))
            failures.append(f"{provider.name}: no results")
        if all(f.endswith(": no results") for f in failures):
            return ToolResult(
                f"No results for {query!r}. Try fewer, broader or differently spelled words.",
                _source(chain[-1], query),
            )
        raise ToolFailure(
            "web search failed — "
            + "; ".join(failures)
            + ". Try again later, rephrase, or use wikipedia/visit_page",
            kind="network",
        )

    return web_search


def _source(provider: SearchProvider, query: str) -> str:
    return f"search:{provider.name}?{urlencode({'q': query})}"


def _format(query: str, provider: str, hits: list[SearchHit]) -> str:
    lines = [f"Search results for {query!r} (via {provider}):"]
    for number, hit in enumerate(hits, 1):
        lines.append(f"{number}. {hit.title or '(untitled)'}\n   {hit.url}")
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
    lines.append("Open a result with visit_page(url=...).")
    return "\n".join(lines)


SPEC = ToolSpec(
    name="web_search",
    description=(
        "Search the web. Returns titles, URLs and snippets of the top results; snippets are "
        "short and may be out of context, so open promising results with visit_page before "
        "relying on them. Use precise keywords (names, dates, quoted phrases)."
    ),
    args_schema=WebSearchArgs,
    more_hint="ask for fewer results with max_results",
    build=build,
    notes=lambda settings: [f"providers: {describe_chain(settings.tools)}"],
)
