"""The tools' network safety and error kinds: DNS rebinding, redirects to private addresses (from
pages, Wayback snapshots and configured APIs), IPv6 forms that carry an IPv4 address, malformed
URLs, TLS failures, DNS failures, Retry-After, and the JSON APIs' own failure messages."""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpcore
import pytest

from kgot.tests.tools.tool_fixtures import (
    FixtureServer,
    Response,
    call,
    make_runner,
    tools_settings,
)
from kgot.tools import ToolContext
from kgot.webclient.addresses import is_public_address

PUBLIC_IP = "93.184.216.34"  # a global address; the test network routes it to a fixture server
PUBLIC_PAGE = "<html><body><article><p>Public page about herons and egrets.</p></article>"
SECRET_PAGE = "<html><body><article><p>SECRET router admin page.</p></article></body></html>"


@dataclass
class FakeNetwork:
    """Names the tests resolve, and where connections to "public" addresses really go."""

    answers: dict[str, list[list[str]]] = field(default_factory=dict)  # successive answers
    routes: dict[str, int] = field(default_factory=dict)  # address -> loopback port
    failures: dict[str, int] = field(default_factory=dict)  # name -> getaddrinfo error code
    connected: list[tuple[str, int]] = field(default_factory=list)


@pytest.fixture
def network(monkeypatch) -> FakeNetwork:
    fake = FakeNetwork()
    real_getaddrinfo = socket.getaddrinfo
    real_connect = httpcore.AnyIOBackend.connect_tcp

    def getaddrinfo(host, port, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name in fake.failures:
            raise socket.gaierror(fake.failures[name], f"getaddrinfo error {fake.failures[name]}")
        queue = fake.answers.get(name)
        if queue is None:
            return real_getaddrinfo(host, port, *args, **kwargs)
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [info for a in addresses for info in real_getaddrinfo(a, port, *args, **kwargs)]

    async def connect_tcp(self, host, port, *args, **kwargs):
        fake.connected.append((host, port))
        if host in fake.routes:
            host, port = "127.0.0.1", fake.routes[host]
        return await real_connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", connect_tcp)
    return fake


@pytest.fixture
def public_server() -> Iterator[FixtureServer]:
    fixture = FixtureServer()
    yield fixture
    fixture.close()


@pytest.fixture
def internal_server() -> Iterator[FixtureServer]:
    """A second loopback server: an internal service the tools must never reach."""
    fixture = FixtureServer()
    fixture.page("/secret", SECRET_PAGE)
    yield fixture
    fixture.close()


def strict_runner(server: FixtureServer | None = None):
    """Private addresses refused. With ``server``, the configured APIs (Wikipedia, Wayback) are
    on it: their own loopback origin is trusted configuration, every other one is checked."""
    return make_runner(ToolContext(settings=tools_settings(server, allow_private_urls=False)))


def _wayback_answer(snapshot: str) -> Response:
    closest = {"available": True, "url": snapshot, "timestamp": "20190228101500"}
    return Response(
        200, json.dumps({"archived_snapshots": {"closest": closest}}), "application/json"
    )


@pytest.mark.slow
def test_rebinding_name_is_read_from_the_address_that_was_checked(network, server, public_server):
    # First answer public, every later one loopback: the classic rebinding name.
    network.answers["rebind.test"] = [[PUBLIC_IP], ["127.0.0.1"]]
    network.routes[PUBLIC_IP] = public_server.port
    server.page("/page", SECRET_PAGE)
    public_server.page("/page", PUBLIC_PAGE)
    outcome = call(strict_runner(), "visit_page", url=f"http://rebind.test:{server.port}/page")
    assert server.hits["/page"] == 0, "the loopback server was reached"
    assert outcome.ok, outcome.output
    assert "Public page about herons" in outcome.output and "SECRET" not in outcome.output
    assert network.connected == [(PUBLIC_IP, server.port)]  # the checked address, only


def test_a_name_with_any_private_address_is_refused(network, server):
    network.answers["mixed.test"] = [[PUBLIC_IP, "127.0.0.1"]]
    server.page("/page", SECRET_PAGE)
    outcome = call(strict_runner(), "visit_page", url=f"http://mixed.test:{server.port}/page")
    assert not outcome.ok and outcome.error_kind == "input"
    assert "non-public address (127.0.0.1)" in outcome.output
    assert network.connected == [] and server.hits["/page"] == 0


def test_redirect_to_a_private_address_is_refused(network, server, public_server):
    network.answers["public.test"] = [[PUBLIC_IP]]
    network.answers["internal.test"] = [["127.0.0.1"]]
    network.routes[PUBLIC_IP] = public_server.port
    server.page("/secret", SECRET_PAGE)
    public_server.route(
        "/go", Response(302, "", headers={"Location": f"http://internal.test:{server.port}/secret"})
    )
    outcome = call(strict_runner(), "visit_page", url=f"http://public.test:{server.port}/go")
    assert public_server.hits["/go"] == 1  # the first hop was public and was followed
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert "non-public address (127.0.0.1)" in outcome.output
    assert server.hits["/secret"] == 0


def test_redirect_to_a_private_ip_literal_is_refused(network, server, public_server):
    network.answers["public.test"] = [[PUBLIC_IP]]
    network.routes[PUBLIC_IP] = public_server.port
    server.page("/secret", SECRET_PAGE)
    public_server.route(
        "/go", Response(301, "", headers={"Location": f"http://127.0.0.1:{server.port}/secret"})
    )
    outcome = call(strict_runner(), "visit_page", url=f"http://public.test:{server.port}/go")
    assert not outcome.ok and "non-public address" in outcome.output
    assert server.hits["/secret"] == 0


def test_ipv4_mapped_ipv6_loopback_is_refused(server):
    outcome = call(
        strict_runner(), "visit_page", url=f"http://[::ffff:127.0.0.1]:{server.port}/page"
    )
    assert not outcome.ok and outcome.error_kind == "input"
    assert "non-public address" in outcome.output


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://example.com:99999/", "port"),
        ("http://[::1/", "not a valid URL"),
        ("ftp://example.org/file", "not an http(s) URL"),
        ("https:///path-only", "not an http(s) URL"),
    ],
)
def test_malformed_urls_are_input_errors(url, words):
    outcome = call(strict_runner(), "visit_page", url=url)
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert words in outcome.output


def test_unknown_host_is_not_found(network):
    network.answers["no-such-host.test"] = [[]]
    outcome = call(strict_runner(), "visit_page", url="http://no-such-host.test/")
    assert not outcome.ok and outcome.error_kind == "not_found", outcome.output
    assert "cannot resolve the host 'no-such-host.test'" in outcome.output
    assert "check the spelling" in outcome.output


@pytest.mark.slow
def test_unreachable_name_server_is_not_blamed_on_the_address(network):
    network.failures["offline.test"] = socket.EAI_AGAIN  # what getaddrinfo says with no network
    outcome = call(strict_runner(), "visit_page", url="http://offline.test/page")
    assert not outcome.ok and outcome.error_kind == "network", outcome.output
    assert "'offline.test' could not be resolved" in outcome.output
    assert "no network?" in outcome.output and "spelling" not in outcome.output
    assert "gave up after 3 attempts" in outcome.output  # temporary: retried


@pytest.mark.slow
@pytest.mark.parametrize("allow_private", [False, True])
def test_unreachable_name_server_for_a_configured_api(network, allow_private):
    # The configured endpoint's own origin is connected to without the address check (and with
    # allow_private_urls nothing is checked): httpx resolves the name, its error says the same.
    network.failures["offline.test"] = socket.EAI_AGAIN
    settings = tools_settings(
        wikipedia_api="http://offline.test/w/api.php", allow_private_urls=allow_private
    )
    outcome = call(make_runner(ToolContext(settings=settings)), "wikipedia", query="Heron")
    assert not outcome.ok and outcome.error_kind == "network", outcome.output
    assert "'offline.test' could not be resolved" in outcome.output
    assert "no network?" in outcome.output and "spelling" not in outcome.output


def test_resolver_failure_is_a_network_error_not_a_missing_page(network):
    network.failures["broken.test"] = socket.EAI_FAIL
    outcome = call(strict_runner(), "visit_page", url="http://broken.test/page")
    assert not outcome.ok and outcome.error_kind == "network", outcome.output
    assert "could not be resolved" in outcome.output and "spelling" not in outcome.output
    assert "gave up" not in outcome.output  # not retried: not a temporary failure


def test_tls_failure_is_not_retried_and_says_what_to_try(server):
    server.page("/p", PUBLIC_PAGE)
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    outcome = call(runner, "visit_page", url=f"https://127.0.0.1:{server.port}/p")  # HTTP port
    assert not outcome.ok and outcome.error_kind == "network", outcome.output
    assert "TLS" in outcome.output and "http://" in outcome.output
    assert "gave up after" not in outcome.output  # not treated as transient


@pytest.mark.slow
def test_429_is_retried_honouring_retry_after(server, monkeypatch):
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", recorded_sleep)
    answers = iter(
        [
            Response(429, "slow down", headers={"Retry-After": "3"}),
            Response(429, "slow down", headers={"Retry-After": "120"}),
            Response(200, PUBLIC_PAGE),
        ]
    )
    server.route("/limited", lambda request: next(answers))
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    outcome = call(runner, "visit_page", url=server.url("/limited"))
    assert outcome.ok, outcome.output
    assert server.hits["/limited"] == 3
    assert waits == [3.0, 5.0]  # Retry-After honoured, capped at 5 s


def _recorded_waits(monkeypatch) -> list[float]:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", recorded_sleep)
    return waits


def test_retry_after_as_an_http_date_is_honoured_and_capped(server, monkeypatch):
    waits = _recorded_waits(monkeypatch)
    soon = email.utils.formatdate(time.time() + 4, usegmt=True)  # whole seconds: 3-4 s ahead
    later = email.utils.formatdate(time.time() + 3600, usegmt=True)
    answers = iter(
        [
            Response(503, "busy", headers={"Retry-After": soon}),
            Response(503, "busy", headers={"Retry-After": later}),
            Response(200, PUBLIC_PAGE),
        ]
    )
    server.route("/busy", lambda request: next(answers))
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    outcome = call(runner, "visit_page", url=server.url("/busy"))
    assert outcome.ok, outcome.output
    assert len(waits) == 2 and 2.5 <= waits[0] <= 4.0 and waits[1] == 5.0


def test_a_retry_after_shorter_than_the_backoff_does_not_shorten_it(server, monkeypatch):
    waits = _recorded_waits(monkeypatch)
    answers = iter(
        [
            Response(429, "slow down", headers={"Retry-After": "0"}),
            Response(429, "slow down", headers={"Retry-After": "-7"}),
            Response(200, PUBLIC_PAGE),
        ]
    )
    server.route("/eager", lambda request: next(answers))
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    assert call(runner, "visit_page", url=server.url("/eager")).ok
    assert waits == [0.5, 1.0]  # the backoff: a failing server is not hammered


def test_exhausted_retries_say_how_many_attempts(server, monkeypatch):
    _recorded_waits(monkeypatch)
    server.page("/down", "maintenance", status=503)
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    outcome = call(runner, "visit_page", url=server.url("/down"))
    assert not outcome.ok and outcome.error_kind == "network", outcome.output
    assert "answered HTTP 503" in outcome.output
    assert "(gave up after 3 attempts)" in outcome.output and server.hits["/down"] == 3


@pytest.mark.slow
def test_other_transient_5xx_are_retried_but_501_is_not(server):
    answers = iter([Response(522, "origin timeout"), Response(200, PUBLIC_PAGE)])
    server.route("/edge", lambda request: next(answers))
    server.page("/nope", "not implemented", status=501)
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    assert call(runner, "visit_page", url=server.url("/edge")).ok
    assert server.hits["/edge"] == 2
    refused = call(runner, "visit_page", url=server.url("/nope"))
    assert not refused.ok and server.hits["/nope"] == 1


def test_api_follows_redirects(server, wiki):
    from kgot.tests.tools.tool_fixtures import Revision

    wiki.add("Heron", Revision(1, "2020-01-01T00:00:00Z", "<p>Herons are birds.</p>"))
    server.prefix_routes["/old/"] = lambda request: Response(
        301,
        "",
        headers={"Location": server.url("/w/api.php") + "?" + _query(request.query)},
    )
    settings = tools_settings(server, wikipedia_api=server.url("/old/api.php"))
    outcome = call(make_runner(ToolContext(settings=settings)), "wikipedia", query="Heron")
    assert outcome.ok, outcome.output
    assert "Herons are birds." in outcome.output


def _query(values: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(values)


def test_search_provider_key_refused_names_the_setting(server):
    server.route(
        "/serp",
        Response(401, json.dumps({"error": "Invalid API key."}), "application/json"),
    )
    settings = tools_settings(
        serpapi_key="wrong", search_api_urls={"serpapi": server.url("/serp")}, search_backend="none"
    )
    outcome = call(make_runner(ToolContext(settings=settings)), "web_search", query="heron")
    assert not outcome.ok
    assert "tools.serpapi_key" in outcome.output and "Invalid API key." in outcome.output
    assert "login" not in outcome.output


# -- every hop of every request is checked, Wayback and configured APIs included -----------------


@pytest.mark.slow
def test_wayback_snapshot_served_by_the_configured_archive_is_read(server):
    # The archive on loopback is configuration, so its own snapshots are read with private
    # addresses refused: the refusals below are about where they lead, not about the archive.
    snapshot = server.url("/web/20190228101500/https://example.org/news")
    server.route("/wayback/available", _wayback_answer(snapshot))
    server.page("/web/20190228101500id_/https://example.org/news", PUBLIC_PAGE)
    outcome = call(strict_runner(server), "visit_page", url="https://example.org/news", date="2019")
    assert outcome.ok, outcome.output
    assert "Public page about herons" in outcome.output


def test_wayback_snapshot_redirecting_to_loopback_is_refused(server, internal_server):
    snapshot = server.url("/web/20190228101500/https://example.org/news")
    server.route("/wayback/available", _wayback_answer(snapshot))
    server.route(
        "/web/20190228101500id_/https://example.org/news",
        Response(302, "", headers={"Location": internal_server.url("/secret")}),
    )
    outcome = call(strict_runner(server), "visit_page", url="https://example.org/news", date="2019")
    assert server.hits["/web/20190228101500id_/https://example.org/news"] == 1
    assert internal_server.hits["/secret"] == 0, "the snapshot's redirect reached loopback"
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert "non-public address (127.0.0.1)" in outcome.output and "SECRET" not in outcome.output


def test_wayback_snapshot_url_on_another_private_origin_is_refused(server, internal_server):
    # The availability answer is data, not configuration: its snapshot URL is checked too.
    server.route("/wayback/available", _wayback_answer(internal_server.url("/web/2019/secret")))
    internal_server.prefix_routes["/web/"] = lambda request: Response(200, SECRET_PAGE)
    outcome = call(strict_runner(server), "visit_page", url="https://example.org/news", date="2019")
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert "non-public address" in outcome.output
    assert not internal_server.requests


def test_configured_api_redirecting_to_loopback_is_refused(server, internal_server):
    # An API never leaves its own origin (its key would go along), loopback or not.
    server.route(
        "/w/api.php", Response(302, "", headers={"Location": internal_server.url("/secret")})
    )
    outcome = call(strict_runner(server), "wikipedia", query="Heron")
    assert server.hits["/w/api.php"] == 1
    assert internal_server.hits["/secret"] == 0, "the API's redirect reached loopback"
    assert not outcome.ok and outcome.error_kind == "unavailable", outcome.output
    assert f"redirects to another site (http://127.0.0.1:{internal_server.port})" in outcome.output
    assert "set tools.wikipedia_api to the new address" in outcome.output


# -- IPv6 forms that carry an IPv4 address are judged by that address ---------------------------


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
        ("64:ff9b::808:808", True),  # NAT64 of 8.8.8.8: what DNS64 answers on IPv6-only hosts
        ("64:ff9b:1::7f00:1", False),  # local-use NAT64, /96 layout
        ("64:ff9b:1:7f00:1::", False),  # local-use NAT64, /48 layout
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", False),  # 6to4 of 169.254.169.254 (cloud metadata)
        ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
        ("::7f00:1", False),  # IPv4-compatible 127.0.0.1
        ("::808:808", True),  # IPv4-compatible 8.8.8.8
        ("::ffff:127.0.0.1", False),  # IPv4-mapped
        ("::ffff:8.8.8.8", True),
        ("::ffff:0:7f00:1", False),  # IPv4-translated 127.0.0.1
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),  # Teredo, client 127.0.0.1
        ("fec0::1", False),  # site-local
        ("fed0:1:2::3", False),  # site-local
        ("2606:4700:4700::1111", True),  # an ordinary global address
        ("::1", False),
        ("8.8.8.8", True),
        ("169.254.169.254", False),
    ],
)
def test_address_check_judges_the_ipv4_address_an_ipv6_form_carries(address, public):
    assert is_public_address(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize("literal", ["64:ff9b::7f00:1", "2002:7f00:1::1", "::7f00:1", "fec0::1"])
def test_visit_page_refuses_ipv6_forms_of_loopback_before_connecting(literal, network):
    outcome = call(strict_runner(), "visit_page", url=f"http://[{literal}]:8080/page")
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert "non-public address" in outcome.output
    assert network.connected == []


def test_a_name_resolving_to_nat64_of_loopback_is_refused(network, server):
    network.answers["nat64.test"] = [["64:ff9b::7f00:1"]]
    outcome = call(strict_runner(), "visit_page", url=f"http://nat64.test:{server.port}/page")
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert "64:ff9b::7f00:1, which carries 127.0.0.1" in outcome.output
    assert network.connected == []


# -- keys stay with the API they are for -----------------------------------------------------------

SERP_KEY = "SECRET-serpapi-key-0123456789"


def _closed_port() -> int:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _no_waiting(monkeypatch) -> None:
    real_sleep = asyncio.sleep

    async def no_wait(seconds: float) -> None:
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", no_wait)


def _serpapi(url: str):
    settings = tools_settings(
        serpapi_key=SERP_KEY, search_api_urls={"serpapi": url}, search_backend="none"
    )
    return make_runner(ToolContext(settings=settings))


def test_unreachable_api_is_named_without_its_key(monkeypatch):
    _no_waiting(monkeypatch)
    endpoint = f"http://127.0.0.1:{_closed_port()}/search.json"
    outcome = call(_serpapi(endpoint), "web_search", query="heron")
    assert not outcome.ok and "could not reach SerpAPI at " + endpoint in outcome.output
    assert SERP_KEY not in outcome.output and "api_key" not in outcome.output


def test_api_failures_never_show_the_key(server, monkeypatch):
    _no_waiting(monkeypatch)
    server.route("/fails", Response(500, "internal error"))
    # Some APIs quote the key they refused; the message quotes what they said, not the key.
    refusal = json.dumps({"error": f"Invalid API key {SERP_KEY}."})
    server.route("/refuses", Response(401, refusal, "application/json"))
    for path in ("/fails", "/refuses"):
        runner = _serpapi(server.url(path))
        outcome = call(runner, "web_search", query="heron")
        assert not outcome.ok and SERP_KEY not in outcome.output, outcome.output
        assert server.requests[-1].query["api_key"] == SERP_KEY  # it was sent, only not shown
    assert "Invalid API key ***." in outcome.output and "tools.serpapi_key" in outcome.output


def test_api_answers_nested_too_deeply_are_named_not_a_crash(server):
    deep = "[" * 100_000 + "]" * 100_000
    server.route("/deep", Response(200, deep, "application/json"))
    outcome = call(_serpapi(server.url("/deep")), "web_search", query="heron")
    assert not outcome.ok and outcome.error_kind == "network", outcome.output
    assert "SerpAPI answered with JSON nested too deeply to read" in outcome.output
    # A refusal whose body is that deep is quoted as text.
    server.route("/deep-refusal", Response(400, '{"error": ' + deep + "}", "application/json"))
    outcome = call(_serpapi(server.url("/deep-refusal")), "web_search", query="heron")
    assert not outcome.ok and "SerpAPI refused the request (HTTP 400: " in outcome.output


def test_api_failure_source_refs_carry_no_key():
    from kgot.tools.base import ToolFailure
    from kgot.webclient import Http

    async def fail() -> ToolFailure:
        endpoint = f"http://127.0.0.1:{_closed_port()}/api?token={SERP_KEY}"
        try:
            await Http(tools_settings(), retries=0).api(
                endpoint, params={"api_key": SERP_KEY}, service="X", setting="tools.x"
            )
        except ToolFailure as failure:
            return failure
        raise AssertionError("the request succeeded")

    failure = asyncio.run(fail())
    assert failure.source_ref is not None and SERP_KEY not in failure.source_ref
    assert failure.source_ref.endswith("/api?token=***") and SERP_KEY not in str(failure)


def test_searxng_password_is_not_named(server):
    server.route("/searx/search", Response(403, "forbidden"))
    url = f"http://kgot:SECRET-searx-pw@127.0.0.1:{server.port}/searx"
    settings = tools_settings(searxng_url=url, search_backend="none")
    outcome = call(make_runner(ToolContext(settings=settings)), "web_search", query="heron")
    assert server.requests[-1].headers["authorization"].startswith("Basic ")  # it was used
    assert not outcome.ok and "HTTP 403" in outcome.output, outcome.output
    assert "SECRET-searx-pw" not in outcome.output and "kgot:" not in outcome.output


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://a.test/s?q=x&api_key=K&key=K&access_token=K",
            "?q=x&api_key=***&key=***&access_token=***",
        ),
        (
            "https://a.test/s?author=me&X-Amz-Signature=K&client_secret=K",
            "?author=me&X-Amz-Signature=***&client_secret=***",
        ),
        ("https://user:pw@a.test/p?id=3#top", "https://***@a.test/p?id=3#top"),
        ("https://a.test/p@q?token=", "https://a.test/p@q?token="),  # nothing to hide
    ],
)
def test_shown_urls_hide_passwords_and_keys(url, shown):
    from kgot.webclient import shown_url

    assert shown_url(url).endswith(shown) and "pw" not in shown_url(url)


@pytest.mark.parametrize("tool", ["brave", "tavily"])
def test_api_redirect_to_another_origin_is_refused_before_the_key_leaves(
    tool, server, internal_server
):
    # Two loopback servers on different ports are different origins: with private addresses
    # allowed (tools_settings), only the redirect rule stands between the key and the second.
    server.route("/api", Response(307, "", headers={"Location": internal_server.url("/api")}))
    internal_server.route("/api", Response(200, json.dumps({"results": []}), "application/json"))
    settings = tools_settings(
        **{f"{tool}_key": "SECRET-header-key-42"},
        search_api_urls={tool: server.url("/api")},
        search_backend="none",
    )
    outcome = call(make_runner(ToolContext(settings=settings)), "web_search", query="heron")
    assert server.hits["/api"] == 1 and not internal_server.requests
    assert not outcome.ok and "redirects to another site" in outcome.output, outcome.output
    assert f"tools.search_api_urls.{tool}" in outcome.output


def test_page_redirect_to_another_origin_carries_no_caller_headers(server, internal_server):
    from kgot.webclient.client import Http, _Request

    secrets = {"Authorization": "Bearer SECRET-1", "X-API-Key": "SECRET-2"}
    server.route("/same", Response(302, "", headers={"Location": server.url("/here")}))
    server.page("/here", PUBLIC_PAGE)
    server.route("/away", Response(302, "", headers={"Location": internal_server.url("/there")}))
    internal_server.page("/there", PUBLIC_PAGE)

    async def follow(path: str) -> None:
        request = _Request("GET", server.url(path), headers={"Accept": "text/html", **secrets})
        async with Http(tools_settings())._exchange(
            request, trusted_endpoint=None, service="the web server"
        ) as response:
            assert response.status_code == 200

    asyncio.run(follow("/same"))
    assert server.requests[-1].headers["x-api-key"] == "SECRET-2"  # same origin: kept
    asyncio.run(follow("/away"))
    arrived = internal_server.requests[-1].headers
    assert "authorization" not in arrived and "x-api-key" not in arrived
    assert arrived["accept"] == "text/html"


def test_api_may_move_to_https_on_its_own_host_only():
    from kgot.webclient.client import _origin, _same_service

    home = _origin("http://api.test/w/api.php")
    assert _same_service(home, _origin("https://api.test/w/api.php"))
    assert _same_service(home, _origin("http://api.test:80/other"))
    assert not _same_service(home, _origin("https://other.test/w/api.php"))
    assert not _same_service(home, _origin("http://api.test:8080/w/api.php"))


# -- the proxy variables apply to configured APIs, never to pages the model chose ---------------


class RecordingProxy:
    """A forward HTTP proxy on loopback that records each request's target URL."""

    def __init__(self) -> None:
        import http.client
        from http.server import BaseHTTPRequestHandler

        from kgot.tests.support.loopback_http import LoopbackHTTPServer

        self.targets: list[str] = []
        proxy = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                proxy.targets.append(self.path)  # absolute form: http://host:port/path?query
                parts = urlsplit(self.path)
                upstream = http.client.HTTPConnection(parts.netloc, timeout=10)
                target = parts.path + (f"?{parts.query}" if parts.query else "")
                upstream.request("GET", target, headers=dict(self.headers.items()))
                answer = upstream.getresponse()
                body = answer.read()
                upstream.close()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = LoopbackHTTPServer(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def proxy(monkeypatch) -> Iterator[RecordingProxy]:
    recording = RecordingProxy()
    for name in ("NO_PROXY", "ALL_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", recording.url)
    monkeypatch.delenv("http_proxy", raising=False)
    yield recording
    recording.close()


@pytest.mark.slow
def test_configured_api_goes_through_the_proxy_and_pages_do_not(
    proxy, network, server, wiki, public_server
):
    from kgot.tests.tools.tool_fixtures import Revision

    wiki.add("Heron", Revision(1, "2020-01-01T00:00:00Z", "<p>Herons are birds.</p>"))
    runner = strict_runner(server)
    outcome = call(runner, "wikipedia", query="Heron")
    assert outcome.ok, outcome.output
    assert "Herons are birds." in outcome.output
    assert proxy.targets and all(t.startswith(server.url("/w/api.php")) for t in proxy.targets)

    # A page the model chose connects directly, to the address that was checked.
    network.answers["public.test"] = [[PUBLIC_IP]]
    network.routes[PUBLIC_IP] = public_server.port
    public_server.page("/page", PUBLIC_PAGE)
    seen = len(proxy.targets)
    page = call(runner, "visit_page", url=f"http://public.test:{public_server.port}/page")
    assert page.ok, page.output
    assert len(proxy.targets) == seen and public_server.hits["/page"] == 1
    assert (PUBLIC_IP, public_server.port) in network.connected
