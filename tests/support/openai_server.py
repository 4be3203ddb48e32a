"""A real OpenAI-compatible chat-completions server on 127.0.0.1, scripted per request.

Use it wherever a test needs a model "over the wire": it speaks HTTP on an ephemeral loopback
port from a background thread, answers ``POST /v1/chat/completions`` (plain JSON, or SSE when the
request says ``"stream": true``) and ``GET /v1/models``, and records every request body.

    from kgot.tests.support.openai_server import OpenAIServer, Reply

    with OpenAIServer() as server:
        server.enqueue(Reply.error(500), Reply.json({"action": "INSERT"}))
        settings = load_settings({"llm.model": "openai:test", "llm.base_url": server.url})
        ...
        assert server.requests[1].response_format["type"] == "json_schema"

As a pytest fixture (import it into the test module or a ``conftest.py``)::

    from kgot.tests.support.openai_server import openai_server  # noqa: F401  (fixture)

    def test_something(openai_server): ...

Replies are taken from the queue in order (:meth:`OpenAIServer.enqueue`); when it is empty, the
``responder`` callable (if any) is asked, then ``default`` answers (``Reply.text("ok")``). A
request refused by ``reject_json_schema`` / ``reject_tools`` does not consume a queued reply,
like a real server that fails before generating anything.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from kgot.graph_model.token_estimate import count_tokens
from kgot.tests.support.loopback_http import LoopbackHTTPServer

_ids = itertools.count(1)


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request; build it with the class methods.

    Attributes:
        content: the assistant message text (``None`` for a tool-call-only message).
        tool_calls: ``(name, arguments)`` pairs; a ``dict`` is sent as JSON, a ``str`` verbatim
            (use a broken string to test malformed arguments).
        status: HTTP status; anything but 200 sends an OpenAI-style error body.
        error_message: the ``error.message`` of an error body.
        headers: extra response headers (e.g. ``Retry-After``).
        delay: seconds to wait before answering.
        hang: never answer (the handler waits until the server closes).
        disconnect: close the connection without answering.
        usage: send a ``usage`` block (counts estimated with ``count_tokens`` unless given).
        prompt_tokens, completion_tokens: exact usage figures to report.
        finish_reason: override (default ``stop``, or ``tool_calls`` when there are some).
        raw_body: send these bytes as the body (with ``status`` and ``content_type``) instead of
            a well-formed completion or error: an HTML error page, a proxy's login portal,
            garbage.
        content_type: the ``Content-Type`` of a ``raw_body``.
    """

    content: str | None = "ok"
    tool_calls: tuple[tuple[str, dict[str, Any] | str], ...] = ()
    status: int = 200
    error_message: str = "error"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hang: bool = False
    disconnect: bool = False
    usage: bool = True
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    raw_body: bytes | None = None
    content_type: str = "application/json"

    @classmethod
    def text(cls, content: str, **options: Any) -> Reply:
        """A plain assistant message."""
        return cls(content=content, **options)

    @classmethod
    def json(cls, data: Any, **options: Any) -> Reply:
        """An assistant message whose content is ``data`` as JSON."""
        return cls(content=json.dumps(data), **options)

    @classmethod
    def tool_call(cls, name: str, arguments: dict[str, Any] | str, **options: Any) -> Reply:
        """A message holding one tool call."""
        return cls(content=None, tool_calls=((name, arguments),), **options)

    @classmethod
    def tool_calls_of(
        cls, *calls: tuple[str, dict[str, Any] | str], content: str | None = None, **options: Any
    ) -> Reply:
        """A message holding several tool calls (and optionally some text)."""
        return cls(content=content, tool_calls=tuple(calls), **options)

    @classmethod
    def error(
        cls, status: int = 500, message: str = "internal error", *, retry_after: float | None = None
    ) -> Reply:
        """An OpenAI-style error response (``Retry-After`` header when given)."""
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(status=status, error_message=message, headers=headers)

    @classmethod
    def body(cls, payload: bytes, *, status: int = 200, content_type: str = "text/html") -> Reply:
        """These bytes as the whole response body, whatever the status (not a completion)."""
        return cls(status=status, raw_body=payload, content_type=content_type)

    @classmethod
    def hanging(cls) -> Reply:
        """Accept the request and never answer (until the server closes)."""
        return cls(hang=True)

    @classmethod
    def disconnecting(cls) -> Reply:
        """Drop the connection without a response."""
        return cls(disconnect=True)

    def delayed(self, seconds: float) -> Reply:
        """This reply, sent after ``seconds``."""
        return replace(self, delay=seconds)


@dataclass
class RecordedRequest:
    """One request the server received, with the reply it got."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    received_at: float  # time.perf_counter() on arrival
    reply: Reply | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def prompt(self) -> str:
        """Every message's text content, joined (for assertions on what the model saw)."""
        parts = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            parts.append(str(content or ""))
        return "\n".join(parts)

    @property
    def response_format(self) -> dict[str, Any] | None:
        return (self.body or {}).get("response_format")

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("tools") or [])

    @property
    def tool_choice(self) -> Any:
        return (self.body or {}).get("tool_choice")

    @property
    def model(self) -> str | None:
        return (self.body or {}).get("model")


Responder = Callable[[RecordedRequest], Reply | None]


class OpenAIServer:
    """A scripted chat-completions server on ``127.0.0.1`` (ephemeral port, background thread).

    Args:
        replies: initial queue of replies (more with :meth:`enqueue`).
        default: the reply when the queue is empty and no responder answers.
        responder: called with each request when the queue is empty; return a :class:`Reply`
            or ``None`` to fall through to ``default``.
        model: the model id reported in responses and by ``/v1/models``.
        reject_json_schema: answer 500 to ``response_format.type == "json_schema"``, as
            llama.cpp's server does.
        reject_tools: answer 500 to any request carrying ``tools`` (llama.cpp without
            ``--jinja``).
        api_key: when set, requests without ``Authorization: Bearer <api_key>`` get 401.

    Attributes:
        url: the base URL to configure (``http://127.0.0.1:PORT/v1``).
    """

    def __init__(
        self,
        *replies: Reply,
        default: Reply | None = None,
        responder: Responder | None = None,
        model: str = "test-model",
        reject_json_schema: bool = False,
        reject_tools: bool = False,
        api_key: str | None = None,
    ) -> None:
        self.default = default or Reply.text("ok")
        self.responder = responder
        self.model = model
        self.reject_json_schema = reject_json_schema
        self.reject_tools = reject_tools
        self.api_key = api_key
        self._queue: deque[Reply] = deque(replies)
        self._requests: list[RecordedRequest] = []
        self._listings: list[RecordedRequest] = []  # GET /models: reachability probes
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None
        self.port: int = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> OpenAIServer:
        """Start serving (idempotent); returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.02},
                name=f"openai-server-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Release hanging requests, stop serving and free the port."""
        self._closing.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ scripting

    def enqueue(self, *replies: Reply) -> OpenAIServer:
        """Append replies to the queue; returns ``self`` for chaining."""
        with self._changed:
            self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Queued replies not yet sent."""
        with self._changed:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far (a snapshot), oldest first."""
        with self._changed:
            return list(self._requests)

    @property
    def listings(self) -> list[RecordedRequest]:
        """The ``GET /models`` requests (kept apart from :attr:`requests`: a client probing
        that the server is up is not a model request)."""
        with self._changed:
            return list(self._listings)

    @property
    def completions(self) -> list[RecordedRequest]:
        """The chat-completion requests only."""
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until ``count`` requests have arrived (no polling).

        Raises:
            TimeoutError: fewer arrived within ``timeout`` seconds.
        """
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._requests) >= count, timeout):
                raise TimeoutError(f"{len(self._requests)} of {count} requests within {timeout}s")
            return list(self._requests)

    # ------------------------------------------------------------------ used by the handler

    def _admit(self, request: RecordedRequest) -> Reply:
        """Record the request and pick its reply."""
        reply = self._refusal(request)
        with self._changed:
            if reply is None and self._queue:
                reply = self._queue.popleft()
        if reply is None and self.responder is not None:
            reply = self.responder(request)
        reply = reply or self.default
        request.reply = reply
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()
        return reply

    def _refusal(self, request: RecordedRequest) -> Reply | None:
        if self.api_key is not None and (
            request.headers.get("authorization") != f"Bearer {self.api_key}"
        ):
            return Reply.error(401, "Incorrect API key provided")
        body = request.body or {}
        if (
            self.reject_json_schema
            and (body.get("response_format") or {}).get("type") == "json_schema"
        ):
            # llama.cpp's wording for this refusal.
            return Reply.error(500, "Unsupported response_format type: json_schema")
        if self.reject_tools and body.get("tools"):
            return Reply.error(500, "tools param requires --jinja flag")
        return None

    def _wait(self, seconds: float | None) -> bool:
        """Sleep ``seconds`` (forever if ``None``) unless the server closes; False if it did."""
        return not self._closing.wait(seconds)


class _Server(LoopbackHTTPServer):
    owner: OpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            owner = self.server.owner
            listing = RecordedRequest(
                method="GET",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=None,
                received_at=time.perf_counter(),
            )
            with owner._changed:
                owner._listings.append(listing)
            self._send_json(
                200,
                {"object": "list", "data": [{"id": owner.model, "object": "model"}]},
            )
            return
        self._send_error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_error(404, f"no route for POST {self.path}")
            return
        owner = self.server.owner
        request = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            received_at=time.perf_counter(),
        )
        reply = owner._admit(request)
        if reply.hang:
            owner._wait(None)
            self.close_connection = True
            return
        if reply.delay and not owner._wait(reply.delay):
            self.close_connection = True
            return
        if reply.disconnect:
            self.close_connection = True
            return
        if reply.raw_body is not None:
            self._send(reply.status, reply.raw_body, reply.content_type, reply.headers)
            return
        if reply.status != 200:
            self._send_error(reply.status, reply.error_message, reply.headers)
            return
        if isinstance(body, dict) and body.get("stream"):
            self._send_stream(reply, body)
            return
        self._send_json(200, _completion(reply, body or {}, owner.model), reply.headers)

    # ------------------------------------------------------------------ writing

    def _send_error(
        self, status: int, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._send_json(
            status, {"error": {"message": message, "type": kind, "code": status}}, headers
        )

    def _send_json(self, status: int, data: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), "application/json", headers)

    def _send(
        self, status: int, payload: bytes, content_type: str, headers: Mapping[str, str] | None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. timed out)
            self.close_connection = True

    def _send_stream(self, reply: Reply, body: dict[str, Any]) -> None:
        completion = _completion(reply, body, self.server.owner.model)
        choice = completion["choices"][0]
        base = {k: completion[k] for k in ("id", "created", "model")}
        base["object"] = "chat.completion.chunk"
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if choice["message"].get("content"):
            deltas.append({"content": choice["message"]["content"]})
        for index, call in enumerate(choice["message"].get("tool_calls") or []):
            deltas.append({"tool_calls": [{"index": index, **call}]})
        events = [
            {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
        ]
        finish = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
        events.append({**base, "choices": [finish]})
        if (body.get("stream_options") or {}).get("include_usage") and "usage" in completion:
            events.append({**base, "choices": [], "usage": completion["usage"]})
        payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self.close_connection = True  # no Content-Length: the stream ends with the connection
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload.encode())
        except (BrokenPipeError, ConnectionResetError):
            pass


def _completion(reply: Reply, body: dict[str, Any], model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for name, args in reply.tool_calls
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    completion: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if reply.usage:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = sum(
                count_tokens(json.dumps(m.get("content"))) for m in body.get("messages") or []
            )
        output = reply.completion_tokens
        if output is None:
            output = count_tokens(reply.content or "") + sum(
                count_tokens(args if isinstance(args, str) else json.dumps(args))
                for _, args in reply.tool_calls
            )
        completion["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
        }
    return completion


def unreachable_url() -> str:
    """A base URL on a loopback port nothing listens on (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started :class:`OpenAIServer` with default options, closed after the test."""
    with OpenAIServer() as server:
        yield server
