"""A threaded loopback HTTP server for tests that never writes to the test's stderr.

``socketserver`` prints a traceback to ``sys.stderr`` whenever a handler raises, and a client
that closes a keep-alive connection makes the handler's wait for the next request raise
``ConnectionResetError``. Whether that happens before or after a test reads its captured stderr
depends on thread timing, so CLI tests that compare stderr would fail now and then. Here client
disconnects are ignored and any other handler error is kept in ``errors`` for tests to inspect.
"""

from __future__ import annotations

import sys
import threading
from http.server import ThreadingHTTPServer
from typing import Any


class LoopbackHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.errors: list[BaseException] = []
        self._errors_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if error is None or isinstance(error, ConnectionError):
            return  # the client went away: normal for timeouts and closed keep-alive sockets
        with self._errors_lock:
            self.errors.append(error)
