"""Paging never loses text: long URLs, page links, calls with quotes, find's limits."""

from __future__ import annotations

import json
import re

import pytest

from kgot.tests.tools.tool_fixtures import LONG_PARAGRAPH, call, make_runner, tools_settings
from kgot.tools import ToolContext
from kgot.tools.paging import MAX_FIND_HITS

CAP = 3000


def _pages(runner, **args) -> list:
    first = call(runner, "visit_page", **args)
    assert first.ok, first.output
    count = int(re.search(r"Page 1 of (\d+)", first.output).group(1))
    return [first] + [call(runner, "visit_page", **args, page=n) for n in range(2, count + 1)]


def _body(output: str) -> str:
    """The page text between the header block and the footer line."""
    parts = output.split("\n\n")
    if parts[-1].startswith("[next page") or parts[-1].startswith("[previous page"):
        parts = parts[:-1]
    return "\n\n".join(parts[1:])


def test_pages_of_a_page_with_a_very_long_url_lose_nothing(server):
    sections = [f"Section {i}. {LONG_PARAGRAPH * 2}" for i in range(1, 60)]
    html = "".join(f"<p>{s}</p>" for s in sections)
    path = "/long/" + "segment-" * 190  # ~1,500 characters of URL
    url = server.page(path, f"<html><body><article>{html}</article></body></html>")
    assert len(url) > 1500
    runner = make_runner(ToolContext(settings=tools_settings(server, max_output_chars=CAP)))
    pages = _pages(runner, url=url)
    assert len(pages) > 3
    for outcome in pages:
        assert outcome.truncated_chars == 0, outcome.output[-300:]
        assert len(outcome.output) <= CAP
    shown = " ".join(" ".join(_body(o.output).split()) for o in pages)
    for number in range(1, 60):
        assert f"Section {number}." in shown, f"section {number} was never shown"
    assert "the same visit_page call with page=2" in pages[0].output


@pytest.mark.slow
def test_links_are_paged_with_the_text_and_searchable(server):
    anchors = "".join(f"<a href='/to/{i}'>Destination number {i}</a> " for i in range(300))
    body = f"<article><p>{LONG_PARAGRAPH * 3}</p></article><div>{anchors}</div>"
    url = server.page("/hub", f"<html><body>{body}</body></html>")
    runner = make_runner(ToolContext(settings=tools_settings(server, max_output_chars=CAP)))
    pages = _pages(runner, url=url, links=True)
    assert all(o.truncated_chars == 0 for o in pages)
    listed = "\n".join(o.output for o in pages)
    assert "Links on this page (300)" in listed
    for i in (0, 150, 299):
        assert f"- Destination number {i}: {server.url(f'/to/{i}')}" in listed
    found = call(runner, "visit_page", url=url, links=True, find="Destination number 299")
    assert found.ok and "1 match(es)" in found.output
    last = len(pages)
    assert f"[page {last}]" in found.output


def test_next_page_calls_escape_quotes(samples, tmp_path):
    text = "\n\n".join(f"Paragraph {i}. {LONG_PARAGRAPH * 3}" for i in range(1, 40))
    odd = tmp_path / 'he said "hi".txt'
    odd.write_text(text)
    runner = make_runner(
        ToolContext(settings=tools_settings(max_output_chars=CAP), attachments=(odd,))
    )
    first = call(runner, "inspect_file", path=odd.name)
    assert first.ok, first.output
    call_text = re.search(r"next page: (inspect_file\(.*?\))[;\]]", first.output).group(1)
    assert call_text == f"inspect_file(path={json.dumps(odd.name)}, page=2)"
    second = call(runner, "inspect_file", path=odd.name, page=2)
    assert second.ok and "Page 2 of" in second.output


def test_find_shows_the_first_matches_and_says_how_many_more(samples, tmp_path):
    many = tmp_path / "many.txt"
    many.write_text("\n".join(f"heron sighting {i}" for i in range(40)))
    runner = make_runner(
        ToolContext(settings=tools_settings(max_output_chars=CAP), attachments=(many,))
    )
    found = call(runner, "inspect_file", path="many.txt", find="heron")
    assert found.ok and found.truncated_chars == 0
    assert "40 match(es)" in found.output
    assert f"{MAX_FIND_HITS}. [page" in found.output
    assert f"{MAX_FIND_HITS + 1}. [page" not in found.output
    assert f"only the first {MAX_FIND_HITS} are shown; {40 - MAX_FIND_HITS} more" in found.output
