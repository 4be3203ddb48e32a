"""The loopback fixture server keeps handler errors off the stderr that CLI tests compare."""

from __future__ import annotations

import pytest

from kgot.tests.tools.tool_fixtures import FixtureServer


def _raise_inside_handler(server: FixtureServer, error: Exception) -> None:
    # socketserver calls handle_error from inside the except block of a failed request
    try:
        raise error
    except Exception:
        server.httpd.handle_error(None, ("127.0.0.1", 1))


def test_a_client_that_resets_its_connection_leaves_stderr_empty(
    server: FixtureServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _raise_inside_handler(server, ConnectionResetError(104, "Connection reset by peer"))
    _raise_inside_handler(server, BrokenPipeError(32, "Broken pipe"))
    assert capsys.readouterr().err == ""
    assert server.httpd.errors == []


def test_other_handler_errors_are_kept_for_the_test_not_printed(
    server: FixtureServer, capsys: pytest.CaptureFixture[str]
) -> None:
    failure = ValueError("bad fixture route")
    _raise_inside_handler(server, failure)
    assert capsys.readouterr().err == ""
    assert server.httpd.errors == [failure]
