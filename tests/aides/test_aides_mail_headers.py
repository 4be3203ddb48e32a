"""An email output's headers are literal text: an aide named with an RFC 2047 encoded word, or a
subject holding a raw CR LF, reaches a real (loopback, aiosmtpd) mail server as its own text,
with no header of its own (CVE-2024-6923: the email package decoded such a word into a header
break on this interpreter)."""

from __future__ import annotations

import email
import re
from email.header import decode_header, make_header
from email.message import Message
from email.policy import default as default_policy
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import create_aide
from kgot.aides.outputs import deliver, parse_output_spec
from kgot.config import Settings, ToolsSettings
from kgot.persistence import Store
from kgot.retrying import RetryPolicy
from kgot.tests.aides.aide_scripts import inbox, model
from kgot.tests.support.smtp_server import MailHandler

ENCODED_WORD = "=?utf-8?q?x=0D=0AReply-To:_evil@example.com?="
B_WORD = "=?utf-8?b?QWNtZQ0KQmNjOiB4QGV4YW1wbGUuY29t?="  # "Acme\r\nBcc: x@example.com"
# What an email output writes, and nothing else: no Reply-To, Bcc, Cc or anything injected.
HEADERS = {
    "Subject",
    "From",
    "To",
    "Date",
    "Message-ID",
    "X-Kgot-Delivery",
    "Content-Type",
    "Content-Transfer-Encoding",
    "MIME-Version",
}
FAST = RetryPolicy(max_retries=1, backoff_base=0.01, backoff_max=0.05, jitter=False)


def _spec(port: int) -> dict[str, Any]:
    return parse_output_spec(
        "smtp", f"smtp://127.0.0.1:{port}", to="me@example.com", sender="kgot@example.com"
    )


def _subject(raw: bytes) -> str:
    """The Subject as a reader decodes it (encoded words decoded, folding undone), checked
    to be the same with the old (compat32) and the current parser."""
    old = email.message_from_bytes(raw)
    unfolded = re.sub(r"\r?\n", "", str(old["Subject"]))  # RFC 5322 unfolding
    decoded = str(make_header(decode_header(unfolded)))
    new = email.message_from_bytes(raw, policy=default_policy)
    assert str(new["Subject"]) == decoded
    return decoded


def _only_our_headers(raw: bytes) -> Message:
    message = email.message_from_bytes(raw)
    assert set(message.keys()) == HEADERS, message.keys()
    assert all(len(message.get_all(name) or []) == 1 for name in HEADERS)
    assert message.defects == []
    return message


@pytest.mark.slow
def test_an_aide_named_with_an_encoded_word_sends_its_name_not_a_header(
    tmp_path: Path, store: Store, settings: Settings, mail: tuple[MailHandler, int]
) -> None:
    handler, port = mail
    scripted = model()
    aide = create_aide(
        store,
        ENCODED_WORD,
        "acme",
        settings=settings,
        models={"planning": scripted, "execution": scripted},
    )
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md"])))
    aide.add_output("smtp", f"smtp://127.0.0.1:{port}", to="me@example.com", sender="k@example.com")

    report = aide.run_cycle()

    assert report.ingested == 1 and report.digest is not None
    assert [d["ok"] for d in report.deliveries] == [True], report.deliveries
    ((sender, recipients, raw),) = handler.messages
    assert sender == "k@example.com" and recipients == ["me@example.com"]
    message = _only_our_headers(raw)
    assert b"Reply-To" not in raw and b"evil@example.com" not in raw
    assert _subject(raw) == f"kgot aide {ENCODED_WORD}"
    assert message["From"] == "k@example.com" and message["To"] == "me@example.com"


@pytest.mark.parametrize(
    ("subject", "shown"),
    [
        # A raw line break in the value: one line, the break a space.
        ("Acme digest\r\nBcc: x@example.com", "Acme digest Bcc: x@example.com"),
        ("Acme\nReply-To: evil@example.com\n\nbody", "Acme Reply-To: evil@example.com body"),
        # Encoded words, alone and among other text, stay what they say.
        (f"digest {ENCODED_WORD} today", f"digest {ENCODED_WORD} today"),
        (B_WORD, B_WORD),
        # Text that is not ASCII, with Unicode line separators in it.
        ("Zürich\u2028Bcc: x@example.com\u0085€", "Zürich Bcc: x@example.com €"),
        ("Acme " + "long words " * 15, ("Acme " + "long words " * 15).strip()),
    ],
)
def test_a_subject_is_sent_as_its_literal_text(
    mail: tuple[MailHandler, int], subject: str, shown: str
) -> None:
    handler, port = mail
    payload = {"aide": "research", "subject": subject, "text": "Acme grew 12 %."}

    result = deliver(
        "smtp",
        _spec(port),
        payload,
        delivery_key="aide 1/cycle 7",
        settings=Settings(tools=ToolsSettings(timeout=5.0)),
        policy=FAST,
    )

    assert result.ok, result.error
    ((_sender, recipients, raw),) = handler.messages
    assert recipients == ["me@example.com"]  # no Bcc became a recipient
    _only_our_headers(raw)
    assert b"\nBcc" not in raw and b"\nReply-To" not in raw
    assert _subject(raw) == shown
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    body = email.message_from_bytes(raw).get_payload(decode=True)
    assert isinstance(body, bytes) and body.decode().strip() == "Acme grew 12 %."


def test_a_delivery_key_with_an_encoded_word_stays_its_text(mail: tuple[MailHandler, int]) -> None:
    handler, port = mail
    key = f"aide 1/{ENCODED_WORD}"

    result = deliver(
        "smtp",
        _spec(port),
        {"digest": "x"},
        delivery_key=key,
        settings=Settings(tools=ToolsSettings(timeout=5.0)),
        policy=FAST,
    )

    assert result.ok, result.error
    ((_sender, _recipients, raw),) = handler.messages
    message = _only_our_headers(raw)
    assert str(make_header(decode_header(str(message["X-Kgot-Delivery"])))) == key
