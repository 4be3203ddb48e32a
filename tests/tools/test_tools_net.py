"""The tools' network safety and error kinds: DNS rebinding, redirects to private addresses (from
pages, Wayback snapshots and configured APIs), IPv6 forms that carry an IPv4 address, malformed
URLs, TLS failures, DNS failures, Retry-After, and the JSON APIs' own failure messages."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

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
from kgot.tools.net import is_public_address

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


def test_unreachable_name_server_is_not_blamed_on_the_address(network):
    network.failures["offline.test"] = socket.EAI_AGAIN  # what getaddrinfo says with no network
    outcome = call(strict_runner(), "visit_page", url="http://offline.test/page")
    assert not outcome.ok and outcome.error_kind == "network", outcome.output
    assert "'offline.test' could not be resolved" in outcome.output
    assert "no network?" in outcome.output and "spelling" not in outcome.output
    assert "gave up after 3 attempts" in outcome.output  # temporary: retried


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


def test_429_is_retried_honouring_retry_after(server, monkeypatch):
    from kgot.tools import net

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(net.asyncio, "sleep", recorded_sleep)
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
    server.route(
        "/w/api.php", Response(302, "", headers={"Location": internal_server.url("/secret")})
    )
    outcome = call(strict_runner(server), "wikipedia", query="Heron")
    assert server.hits["/w/api.php"] == 1
    assert internal_server.hits["/secret"] == 0, "the API's redirect reached loopback"
    assert not outcome.ok and outcome.error_kind == "input", outcome.output
    assert "non-public address (127.0.0.1)" in outcome.output


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
