"""visit_page against loopback web pages: content, paging, formats, archives, and failures."""

from __future__ import annotations

import json
import socket

import pytest

from kgot.tests.tools.tool_fixtures import (
    LONG_PARAGRAPH,
    FixtureServer,
    Response,
    call,
    make_runner,
    tools_settings,
)
from kgot.tools import ToolContext

ARTICLE = (
    "<html><head><title>Grey heron - Birds of Europe</title></head><body>"
    "<nav><a href='/'>Home</a> | <a href='/about'>About</a></nav>"
    "<article><h1>Grey heron</h1>"
    f"<p>{LONG_PARAGRAPH * 4}</p>"
    "<p>The grey heron has a wingspan of 155 to 195 centimetres.</p>"
    "<table><tr><th>Measure</th><th>Value</th></tr><tr><td>Weight</td><td>1.5 kg</td></tr>"
    "</table><p><a href='/egret'>Little egret</a></p></article>"
    "<footer>Copyright 2026 Bird Society</footer></body></html>"
)


def runner(server: FixtureServer | None = None, **settings):
    return make_runner(ToolContext(settings=tools_settings(server, **settings)))


def test_main_content_title_and_table(server):
    url = server.page("/heron", ARTICLE)
    outcome = call(runner(server), "visit_page", url=url)
    assert outcome.ok, outcome.output
    assert outcome.source_ref == url
    assert "Title: Grey heron - Birds of Europe" in outcome.output
    assert "wingspan of 155 to 195 centimetres" in outcome.output
    assert "| Weight | 1.5 kg |" in outcome.output
    assert "Copyright 2026" not in outcome.output  # boilerplate dropped


def test_full_page_and_links(server):
    url = server.page("/heron", ARTICLE)
    outcome = call(runner(server), "visit_page", url=url, full_page=True, links=True)
    assert "Copyright 2026 Bird Society" in outcome.output
    assert f"- Little egret: {server.url('/egret')}" in outcome.output
    assert f"- About: {server.url('/about')}" in outcome.output


def test_long_page_paging_find_and_cache(server):
    body = "".join(f"<p>Section {i}. {LONG_PARAGRAPH * 3}</p>" for i in range(1, 80))
    url = server.page("/long", f"<html><body><article>{body}</article></body></html>")
    tools = runner(server, max_output_chars=2500)
    first = call(tools, "visit_page", url=url)
    assert first.ok and first.truncated_chars == 0
    assert "Page 1 of" in first.output
    assert f'visit_page(url="{url}", page=2)' in first.output
    second = call(tools, "visit_page", url=url, page=2)
    assert "Page 2 of" in second.output and "previous page" in second.output
    found = call(tools, "visit_page", url=url, find="section 42.")
    assert "1 match(es) for 'section 42.'" in found.output and "[page " in found.output
    assert server.hits["/long"] == 1  # one download serves every page and search
    repeated = call(tools, "visit_page", url=url, page=2)
    assert repeated.cached


def test_pdf_and_json_at_a_url(server, samples):
    pdf_url = server.page("/files/report", samples["report.pdf"].read_bytes(), "application/pdf")
    pdf = call(runner(server), "visit_page", url=pdf_url)
    assert pdf.ok and "heron count was 17" in pdf.output
    json_url = server.page("/api/data", json.dumps({"answer": 42}), "text/html")  # mislabelled
    data = call(runner(server), "visit_page", url=json_url)
    assert '"answer": 42' in data.output


def test_zip_download_is_saved_for_inspect_file(server, samples):
    url = server.page("/dl/bundle.zip", samples["bundle.zip"].read_bytes(), "application/zip")
    tools = runner(server)
    saved = call(tools, "visit_page", url=url)
    assert saved.ok, saved.output
    assert 'inspect_file(path="workspace/bundle.zip")' in saved.output
    assert "/mnt/inputs/workspace/bundle.zip" in saved.output
    listing = call(tools, "inspect_file", path="workspace/bundle.zip")
    assert listing.ok and "tables/people.csv" in listing.output


def test_image_without_vision_model(server, samples):
    url = server.page("/chart.png", samples["chart.png"].read_bytes(), "image/png")
    outcome = call(runner(server), "visit_page", url=url)
    assert not outcome.ok and outcome.error_kind == "unavailable"
    assert "tools.vision_model" in outcome.output


def test_404_is_not_found_and_not_retried(server):
    outcome = call(runner(server), "visit_page", url=server.url("/missing"))
    assert not outcome.ok and outcome.error_kind == "not_found"
    assert "HTTP 404" in outcome.output
    assert server.hits["/missing"] == 1


@pytest.mark.slow
def test_transient_503_is_retried(server):
    answers = iter([Response(503, "busy"), Response(200, ARTICLE)])
    server.route("/flaky", lambda request: next(answers))
    outcome = call(runner(server), "visit_page", url=server.url("/flaky"))
    assert outcome.ok, outcome.output
    assert server.hits["/flaky"] == 2


@pytest.mark.slow
def test_persistent_500_gives_up_after_retries(server):
    server.page("/broken", "oops", status=500)
    outcome = call(runner(server), "visit_page", url=server.url("/broken"))
    assert not outcome.ok and outcome.error_kind == "network"
    assert "gave up after 3 attempts" in outcome.output
    assert server.hits["/broken"] == 3


def test_failures_are_not_cached(server):
    tools = runner(server)
    assert not call(tools, "visit_page", url=server.url("/later")).ok
    server.page("/later", ARTICLE)
    again = call(tools, "visit_page", url=server.url("/later"))
    assert again.ok and not again.cached


@pytest.mark.slow
def test_slow_page_times_out(server):
    def hang(request):
        server.release.wait(30)
        return Response(200, ARTICLE)

    server.route("/slow", hang)
    outcome = call(runner(server, timeout=1.0), "visit_page", url=server.url("/slow"))
    assert not outcome.ok and outcome.error_kind in ("timeout", "network")
    assert "1 s" in outcome.output or "in time" in outcome.output


@pytest.mark.slow
def test_unreachable_host(server):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = call(runner(server), "visit_page", url=f"http://127.0.0.1:{port}/x")
    assert not outcome.ok and outcome.error_kind == "network"
    assert "could not reach" in outcome.output


def test_bad_scheme_and_private_addresses(server):
    strict = runner(server, allow_private_urls=False)
    bad = call(strict, "visit_page", url="ftp://example.org/file")
    assert not bad.ok and bad.error_kind == "input" and "not an http(s) URL" in bad.output
    private = call(strict, "visit_page", url=server.url("/heron"))
    assert not private.ok and "non-public address" in private.output
    assert server.hits["/heron"] == 0  # refused before any request was made


def test_redirects_are_followed(server):
    server.route("/old", Response(301, "", headers={"Location": "/heron"}))
    server.page("/heron", ARTICLE)
    outcome = call(runner(server), "visit_page", url=server.url("/old"))
    assert outcome.ok and "Grey heron" in outcome.output


def test_download_cap(server):
    server.page("/huge", b"x" * (2 * 1024 * 1024), "text/plain")
    outcome = call(runner(server, max_download_mb=1), "visit_page", url=server.url("/huge"))
    assert not outcome.ok and outcome.error_kind == "unsupported"
    assert "tools.max_download_mb" in outcome.output


def test_binary_body_is_saved_not_dumped(server):
    server.page("/blob", bytes(range(256)) * 4, "application/octet-stream")
    outcome = call(runner(server), "visit_page", url=server.url("/blob"))
    assert outcome.ok and "serves binary data" in outcome.output


@pytest.mark.slow
def test_wayback_copy_as_of_a_date(server):
    live = server.url("/news")
    server.page("/news", "<html><body><article><p>Today's news.</p></article></body></html>")

    def availability(request):
        assert request.query["url"] == live and request.query["timestamp"] == "20190301"
        snapshot = server.url(f"/web/20190228101500/{live}")
        return Response(
            200,
            json.dumps(
                {
                    "archived_snapshots": {
                        "closest": {
                            "available": True,
                            "url": snapshot,
                            "timestamp": "20190228101500",
                            "status": "200",
                        }
                    }
                }
            ),
            "application/json",
        )

    server.route("/wayback/available", availability)
    archived_html = f"<html><body><article><p>{LONG_PARAGRAPH} Old news from February 2019.</p>"
    server.routes[f"/web/20190228101500id_/{live}"] = Response(200, archived_html + "</article>")
    outcome = call(runner(server), "visit_page", url=live, date="2019-03-01")
    assert outcome.ok, outcome.output
    assert "Old news from February 2019." in outcome.output
    assert "Archived copy of" in outcome.output and "2019-02-28 10:15 UTC" in outcome.output
    assert outcome.source_ref == server.url(f"/web/20190228101500/{live}")


def test_wayback_without_a_copy(server):
    server.route(
        "/wayback/available",
        Response(200, json.dumps({"archived_snapshots": {}}), "application/json"),
    )
    outcome = call(runner(server), "visit_page", url="https://example.org/x", date="2001-01-01")
    assert not outcome.ok and outcome.error_kind == "not_found"
    assert "no archived copy" in outcome.output


@pytest.mark.parametrize("date", ["yesterday", "2020-13-01", "2020-02-30"])
def test_bad_dates_are_input_errors(server, date):
    outcome = call(runner(server), "visit_page", url="https://example.org/", date=date)
    assert not outcome.ok and outcome.error_kind == "input" and "YYYY-MM-DD" in outcome.output


def test_saved_workspace_is_mounted_for_python(server, samples):
    from kgot.config import SandboxSettings
    from kgot.errors import SandboxUnavailableError
    from kgot.sandbox import open_sandbox

    try:
        sandbox = open_sandbox(SandboxSettings(pool_size=0))
    except SandboxUnavailableError as error:
        pytest.skip(f"no isolating sandbox on this machine: {error}")
    url = server.page("/dl/bundle.zip", samples["bundle.zip"].read_bytes(), "application/zip")
    ctx = ToolContext(settings=tools_settings(server), sandbox=sandbox)
    tools = make_runner(ctx)
    try:
        assert call(tools, "visit_page", url=url).ok
        code = (
            "import zipfile\n"
            "print(sorted(zipfile.ZipFile('/mnt/inputs/workspace/bundle.zip').namelist()))"
        )
        outcome = call(tools, "python", code=code)
    finally:
        sandbox.close()
    assert outcome.ok, outcome.output
    assert "tables/people.csv" in outcome.output


@pytest.mark.slow
def test_http_declared_charset_is_used(server):
    text = "Größe: 12 €. Straße, Café, naïve — «Zitat». Überprüfung der Maße."
    page = f"<html><head><title>Preise</title></head><body><article><p>{text}</p></article>"
    server.page("/cp1252", page.encode("cp1252"), "text/html; charset=windows-1252")
    outcome = call(runner(server), "visit_page", url=server.url("/cp1252"))
    assert outcome.ok, outcome.output
    assert text in outcome.output


@pytest.mark.slow
def test_meta_charset_is_used_when_the_server_declares_none(server):
    text = "Łódź, Kraków i Gdańsk leżą w Polsce; żółw śpi."
    page = (
        '<html><head><meta charset="iso-8859-2"><title>Miasta</title></head><body><article>'
        f"<p>{text}</p></article></body></html>"
    )
    server.page("/latin2", page.encode("iso-8859-2"), "text/html")
    outcome = call(runner(server), "visit_page", url=server.url("/latin2"))
    assert outcome.ok and text in outcome.output, outcome.output


def test_repeated_paragraphs_survive_in_full_page_mode(server):
    rows = "".join("<p>Heron spotted at the lake.</p>" for _ in range(5))
    url = server.page("/log", f"<html><body><article><h1>Sightings</h1>{rows}</article></body>")
    full = call(runner(server), "visit_page", url=url, full_page=True)
    assert full.output.count("Heron spotted at the lake.") == 5
    assert "full_page=true" in runner(server).tools["visit_page"].description
