"""A real SMTP server on 127.0.0.1 (aiosmtpd), for tests of email outputs.

It listens on an ephemeral loopback port from a background thread and keeps every message it
accepts, raw, as a mail client would see it; it can also ask for a later try or refuse a
recipient.

As a pytest fixture (import it into the test module or a ``conftest.py``)::

    from kgot.tests.support.smtp_server import mail  # noqa: F401  (fixture)

    def test_something(mail: tuple[MailHandler, int]) -> None:
        handler, port = mail
        ...
        ((sender, recipients, raw),) = handler.messages
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


class MailHandler:
    """aiosmtpd handler: keeps what it accepts, can ask for a later try or refuse a rcpt.

    Attributes:
        messages: ``(sender, recipients, raw bytes)`` of each message accepted.
        busy_times: how many more messages to answer "451 try again later".
        unknown: recipients refused ("550 no such user here").
    """

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []
        self.busy_times = 0
        self.unknown = {"nobody@example.com"}

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if address in self.unknown:
            return "550 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.busy_times:
            self.busy_times -= 1
            return "451 mailbox busy, try again later"
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 Message accepted for delivery"


@pytest.fixture
def mail() -> Iterator[tuple[MailHandler, int]]:
    """A running server's handler and port; stopped after the test."""
    from aiosmtpd.controller import Controller

    handler = MailHandler()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()
