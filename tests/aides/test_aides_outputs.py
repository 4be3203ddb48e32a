"""Aide outputs with real parts: a loopback webhook receiver that checks signatures, JSONL files,
stdout, and a loopback SMTP server (aiosmtpd)."""

from __future__ import annotations

import email
import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgot.aides.outputs import (
    DeliveryResult,
    deliver,
    encode,
    parse_output_spec,
    signature,
)
from kgot.config import Settings, ToolsSettings
from kgot.errors import UsageError
from kgot.retrying import RetryPolicy
from kgot.tests.support.smtp_server import MailHandler
from kgot.tests.tools.tool_fixtures import FixtureServer, Request, Response

PAYLOAD = {"aide": "research", "cycle": 7, "subject": "Acme digest", "text": "Acme grew 12 %."}
FAST = RetryPolicy(
    max_retries=3,
    backoff_base=0.01,
    backoff_max=0.05,
    retry_after_cap=3.0,
    jitter=False,
    retry_after="extends",
)


@pytest.fixture
def web() -> Iterator[FixtureServer]:
    fixture = FixtureServer()
    yield fixture
    fixture.close()


def make_settings(**tools: Any) -> Settings:
    return Settings(tools=ToolsSettings(**{"timeout": 5.0, **tools}))


# --------------------------------------------------------------------------- specs


def test_output_specs_are_checked_and_keep_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "s3cret-value")
    spec = parse_output_spec("webhook", "https://hooks.example/x", secret_env="HOOK_SECRET")
    assert spec == {"url": "https://hooks.example/x", "secret_env": "HOOK_SECRET"}
    assert "s3cret-value" not in json.dumps(spec)
    assert parse_output_spec("webhook", "http://127.0.0.1:9/x", secret_env=None) == {
        "url": "http://127.0.0.1:9/x",
        "secret_env": None,
    }
    for bad in ("hooks.example/x", "ftp://hooks.example/x", ""):
        with pytest.raises(UsageError, match=r"--webhook needs an http\(s\) URL"):
            parse_output_spec("webhook", bad)
    with pytest.raises(UsageError, match="--secret-env takes the name of an environment variable"):
        parse_output_spec("webhook", "https://hooks.example/x", secret_env="s3cret value!")

    outbox = tmp_path / "new" / "deeper" / "outbox.jsonl"
    assert parse_output_spec("jsonl", str(outbox)) == {"path": str(outbox)}
    assert not outbox.parent.exists()  # created at the first delivery, not now
    with pytest.raises(UsageError, match="is a folder"):
        parse_output_spec("jsonl", str(tmp_path))
    (tmp_path / "plain").write_text("a file")
    with pytest.raises(UsageError, match="cannot create files under"):
        parse_output_spec("jsonl", str(tmp_path / "plain" / "outbox.jsonl"))
    with pytest.raises(UsageError, match="--secret-env does not apply to a --jsonl output"):
        parse_output_spec("jsonl", str(outbox), secret_env="HOOK_SECRET")

    assert parse_output_spec("stdout") == {}
    smtp = parse_output_spec(
        "smtp",
        "smtp://mail.example:587",
        to="a@example.com, b@example.com",
        sender="kgot@example.com",
        starttls=True,
    )
    assert smtp == {
        "host": "mail.example",
        "port": 587,
        "tls": "starttls",
        "to": ["a@example.com", "b@example.com"],
        "from": "kgot@example.com",
        "username": None,
        "password_env": None,
    }
    assert (
        parse_output_spec(
            "smtp", "smtps://mail.example", to=["a@example.com"], from_="k@example.com"
        )["port"]
        == 465
    )
    with pytest.raises(UsageError, match="smtp://host:port"):
        parse_output_spec("smtp", "mail.example:25", to="a@example.com", sender="k@example.com")
    with pytest.raises(UsageError, match="--smtp needs --to"):
        parse_output_spec("smtp", "smtp://mail.example:25", sender="k@example.com")
    with pytest.raises(UsageError, match="--smtp needs --from"):
        parse_output_spec("smtp", "smtp://mail.example:25", to="a@example.com")
    with pytest.raises(UsageError, match="unknown output kind 'fax'"):
        parse_output_spec("fax", "123")


# --------------------------------------------------------------------------- stdout and JSONL


def test_stdout_prints_one_json_line_with_the_delivery_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = deliver(
        "stdout", {}, PAYLOAD, delivery_key="research:7:stdout", settings=make_settings()
    )
    assert result == DeliveryResult(True, 1)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0]) == {**PAYLOAD, "delivery_key": "research:7:stdout"}


def test_jsonl_appends_whole_lines_once_per_key(tmp_path: Path) -> None:
    outbox = tmp_path / "out" / "outbox.jsonl"
    spec = parse_output_spec("jsonl", str(outbox))
    settings = make_settings()

    assert deliver("jsonl", spec, PAYLOAD, delivery_key="k1", settings=settings).ok
    assert deliver("jsonl", spec, {"n": 2}, delivery_key="k2", settings=settings).ok
    again = deliver("jsonl", spec, PAYLOAD, delivery_key="k1", settings=settings)
    assert again == DeliveryResult(True, 1, already_delivered=True)
    rows = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert [r["delivery_key"] for r in rows] == ["k1", "k2"]

    # A line cut short by a crash does not swallow the next one.
    with outbox.open("ab") as handle:
        handle.write(b'{"delivery_key":"k3","te')
    assert deliver("jsonl", spec, {"n": 4}, delivery_key="k4", settings=settings).ok
    lines = outbox.read_text().splitlines()
    assert json.loads(lines[-1]) == {"n": 4, "delivery_key": "k4"}
    assert lines[-2] == '{"delivery_key":"k3","te'


def test_jsonl_lines_from_concurrent_writers_stay_whole(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.jsonl"
    spec = {"path": str(outbox)}
    settings = make_settings()
    big = "x" * 70_000  # larger than a pipe buffer: one write is not atomic by itself

    def writer(number: int) -> None:
        for index in range(10):
            key = f"w{number}-{index}"
            assert deliver("jsonl", spec, {"big": big}, delivery_key=key, settings=settings).ok

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert sorted(r["delivery_key"] for r in rows) == sorted(
        f"w{n}-{i}" for n in range(4) for i in range(10)
    )


def test_bad_specs_and_payloads_are_reported_not_raised(tmp_path: Path) -> None:
    settings = make_settings()
    assert deliver("fax", {}, PAYLOAD, delivery_key="k", settings=settings) == DeliveryResult(
        False, 0, "unknown output kind 'fax'"
    )
    assert deliver("webhook", {}, PAYLOAD, delivery_key="k", settings=settings) == (
        DeliveryResult(False, 0, "the webhook output's spec has no url; add it again")
    )
    outbox = tmp_path / "o.jsonl"
    result = deliver(
        "jsonl", {"path": str(outbox)}, {"when": object()}, delivery_key="k", settings=settings
    )
    assert not result.ok and "cannot be sent as JSON" in (result.error or "")
    assert not outbox.exists()


def test_jsonl_reports_a_path_it_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file")
    result = deliver(
        "jsonl",
        {"path": str(tmp_path / "plain" / "x.jsonl")},
        PAYLOAD,
        delivery_key="k",
        settings=make_settings(),
    )
    assert not result.ok and result.error is not None and "cannot open" in result.error


# --------------------------------------------------------------------------- webhook


class Receiver:
    """A webhook receiver that checks the signature as a real one would."""

    def __init__(self, secret: str, answers: list[Response]) -> None:
        self.secret = secret.encode()
        self.answers = answers
        self.seen: list[Request] = []
        self.times: list[float] = []
        self.verified: list[bool] = []

    def __call__(self, request: Request) -> Response:
        self.seen.append(request)
        self.times.append(time.monotonic())
        expected = "sha256=" + hmac.new(self.secret, request.body, hashlib.sha256).hexdigest()
        self.verified.append(
            hmac.compare_digest(request.headers.get("x-kgot-signature", ""), expected)
        )
        return self.answers.pop(0) if self.answers else Response(200, "ok", "text/plain")


def test_webhook_posts_signed_json_and_retries_a_503(
    web: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "s3cret-value")
    receiver = Receiver("s3cret-value", [Response(503, "busy", "text/plain")])
    url = web.route("/hook", receiver)
    spec = parse_output_spec("webhook", url, secret_env="HOOK_SECRET")

    result = deliver(
        "webhook",
        spec,
        PAYLOAD,
        delivery_key="research:7:hook",
        settings=make_settings(),
        policy=FAST,
    )

    assert result == DeliveryResult(True, 2)
    assert receiver.verified == [True, True]
    first, second = receiver.seen
    assert first.method == "POST" and first.body == second.body
    assert json.loads(first.body) == {**PAYLOAD, "delivery_key": "research:7:hook"}
    assert first.body == encode({**PAYLOAD, "delivery_key": "research:7:hook"})
    assert first.headers["x-kgot-delivery"] == "research:7:hook"
    assert first.headers["content-type"].startswith("application/json")
    assert first.headers["x-kgot-signature"] == signature(first.body, "s3cret-value")

    # A wrong secret on the receiver's side fails its check: the signature means something.
    other = Receiver("another-secret", [])
    deliver(
        "webhook",
        {"url": web.route("/other", other), "secret_env": "HOOK_SECRET"},
        PAYLOAD,
        delivery_key="k",
        settings=make_settings(),
        policy=FAST,
    )
    assert other.verified == [False]

    # Without a secret, no signature header.
    plain = Receiver("", [])
    deliver(
        "webhook",
        {"url": web.route("/plain", plain), "secret_env": None},
        PAYLOAD,
        delivery_key="k",
        settings=make_settings(),
        policy=FAST,
    )
    assert "x-kgot-signature" not in plain.seen[0].headers


@pytest.mark.slow
def test_webhook_waits_as_long_as_retry_after_asks(web: FixtureServer) -> None:
    receiver = Receiver("", [Response(429, "slow down", "text/plain", {"Retry-After": "1"})])
    url = web.route("/hook", receiver)
    result = deliver(
        "webhook", {"url": url}, PAYLOAD, delivery_key="k", settings=make_settings(), policy=FAST
    )
    assert result.ok and result.attempts == 2
    assert receiver.times[1] - receiver.times[0] >= 0.95


@pytest.mark.slow
def test_webhook_does_not_retry_a_4xx_and_gives_up_on_a_lasting_5xx(web: FixtureServer) -> None:
    refused = Receiver("", [Response(400, '{"error": "bad field"}', "application/json")])
    result = deliver(
        "webhook",
        {"url": web.route("/bad", refused)},
        PAYLOAD,
        delivery_key="k",
        settings=make_settings(),
        policy=FAST,
    )
    assert not result.ok and result.attempts == 1
    assert result.error is not None and "HTTP 400" in result.error and "bad field" in result.error
    assert len(refused.seen) == 1

    down = Receiver("", [Response(500, "down", "text/plain") for _ in range(10)])
    result = deliver(
        "webhook",
        {"url": web.route("/down", down)},
        PAYLOAD,
        delivery_key="k",
        settings=make_settings(),
        policy=FAST,
    )
    assert not result.ok and result.attempts == 4 and len(down.seen) == 4
    assert result.error is not None and "gave up after 4 tries" in result.error

    moved = Receiver("", [Response(302, "", "text/plain", {"Location": "https://x.example/"})])
    result = deliver(
        "webhook",
        {"url": web.route("/moved", moved)},
        PAYLOAD,
        delivery_key="k",
        settings=make_settings(),
        policy=FAST,
    )
    assert not result.ok and result.attempts == 1
    assert "redirects to https://x.example/" in (result.error or "")


@pytest.mark.slow
def test_webhook_timeouts_and_dead_ports_are_retried_then_reported(web: FixtureServer) -> None:
    def slow(request: Request) -> Response:
        web.release.wait(20)
        return Response(200, "late", "text/plain")

    started = time.monotonic()
    result = deliver(
        "webhook",
        {"url": web.route("/slow", slow)},
        PAYLOAD,
        delivery_key="k",
        settings=make_settings(timeout=0.3),
        policy=FAST,
    )
    assert not result.ok and result.attempts == 4
    assert "did not answer in time" in (result.error or "")
    assert time.monotonic() - started < 5

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the probe closes
    result = deliver(
        "webhook",
        {"url": f"http://127.0.0.1:{port}/x"},
        PAYLOAD,
        delivery_key="k",
        settings=make_settings(),
        policy=FAST,
    )
    assert not result.ok and result.attempts == 4
    assert "cannot reach the webhook" in (result.error or "")


def test_webhook_with_its_secret_variable_unset_sends_nothing(web: FixtureServer) -> None:
    receiver = Receiver("", [])
    spec = {"url": web.route("/hook", receiver), "secret_env": "KGOT_TEST_UNSET_SECRET"}
    result = deliver("webhook", spec, PAYLOAD, delivery_key="k", settings=make_settings())
    assert result.ok is False and result.attempts == 0
    assert "KGOT_TEST_UNSET_SECRET is not set" in (result.error or "")
    assert receiver.seen == []


# --------------------------------------------------------------------------- SMTP


def test_smtp_sends_a_plain_text_digest_and_retries_a_busy_server(
    mail: tuple[MailHandler, int],
) -> None:
    handler, port = mail
    handler.busy_times = 1
    spec = parse_output_spec(
        "smtp", f"smtp://127.0.0.1:{port}", to="me@example.com", sender="kgot@example.com"
    )
    result = deliver(
        "smtp", spec, PAYLOAD, delivery_key="research:7:mail", settings=make_settings(), policy=FAST
    )

    assert result == DeliveryResult(True, 2)
    ((sender, recipients, raw),) = handler.messages
    assert sender == "kgot@example.com" and recipients == ["me@example.com"]
    message = email.message_from_bytes(raw)
    assert message["Subject"] == "Acme digest"
    assert message["X-Kgot-Delivery"] == "research:7:mail"
    digest = hashlib.sha256(b"research:7:mail").hexdigest()[:32]
    assert message["Message-ID"] == f"<{digest}@kgot.invalid>"
    assert message.get_content_type() == "text/plain"
    assert message.get_payload(decode=True).decode().strip() == "Acme grew 12 %."


def test_smtp_refusals_are_not_retried(mail: tuple[MailHandler, int]) -> None:
    handler, port = mail
    spec = parse_output_spec(
        "smtp", f"smtp://127.0.0.1:{port}", to="nobody@example.com", sender="kgot@example.com"
    )
    result = deliver(
        "smtp", spec, {"digest": "x"}, delivery_key="k", settings=make_settings(), policy=FAST
    )
    assert not result.ok and result.attempts == 1
    assert "refused every recipient" in (result.error or "")
    assert handler.messages == []

    # One good and one unknown recipient: sent (again would repeat it), and said.
    spec["to"] = ["me@example.com", "nobody@example.com"]
    result = deliver(
        "smtp", spec, {"digest": "x"}, delivery_key="k2", settings=make_settings(), policy=FAST
    )
    assert result.ok and "refused nobody@example.com" in (result.error or "")
    assert len(handler.messages) == 1


def test_smtp_unreachable_server_and_missing_password(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spec = parse_output_spec(
        "smtp", f"smtp://127.0.0.1:{port}", to="me@example.com", sender="kgot@example.com"
    )
    result = deliver("smtp", spec, PAYLOAD, delivery_key="k", settings=make_settings(), policy=FAST)
    assert not result.ok and result.attempts == 4
    assert "cannot reach the mail server" in (result.error or "")

    spec = parse_output_spec(
        "smtp",
        f"smtp://127.0.0.1:{port}",
        to="me@example.com",
        sender="kgot@example.com",
        username="kgot",
        password_env="KGOT_TEST_NO_PASSWORD",
    )
    result = deliver("smtp", spec, PAYLOAD, delivery_key="k", settings=make_settings())
    assert result == DeliveryResult(
        False, 0, "the mail password variable KGOT_TEST_NO_PASSWORD is not set; export it"
    )
