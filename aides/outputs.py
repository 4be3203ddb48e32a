"""Where an aide delivers what its program produced: stdout, a JSONL outbox, a webhook, email.

:func:`parse_output_spec` checks what the user gave and returns the output's spec (plain JSON,
stored beside the aide); :func:`deliver` sends one payload to one output and says how it went.
It never raises for a failed delivery: the runtime records the :class:`DeliveryResult` and
tries again later.

Every delivery carries a ``delivery_key`` chosen by the runtime (the same key for the same
payload to the same output, however often it is tried). The runtime's delivery log is what
keeps a payload from being sent twice; the key lets a receiver recognise a repeat anyway (a
crash between sending and recording): it is a field of every JSON line, the ``X-Kgot-Delivery``
header of a webhook request and the ``Message-ID`` of an email, and a JSONL outbox that already
ends with it is not written again.

What is sent is the payload with ``delivery_key`` added: ``{**payload, "delivery_key": key}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from kgot.errors import UsageError
from kgot.retrying import (
    RetriesExhausted,
    RetryPolicy,
    one_line,
    retry_after_from_headers,
    retry_async,
)

if TYPE_CHECKING:
    from kgot.config import Settings
    from kgot.persistence import Store

OutputKind = Literal["stdout", "jsonl", "webhook", "smtp"]
OUTPUT_KINDS: tuple[OutputKind, ...] = ("stdout", "jsonl", "webhook", "smtp")

SIGNATURE_HEADER = "X-Kgot-Signature"
DELIVERY_HEADER = "X-Kgot-Delivery"
# Retries of one delivery: a receiver that is down for a minute still gets it in this call; one
# down for longer gets it when the runtime tries again in a later cycle.
DEFAULT_POLICY = RetryPolicy(
    max_retries=4,
    backoff_base=1.0,
    backoff_max=30.0,
    retry_after_cap=60.0,
    jitter=True,
    retry_after="extends",
    total_timeout=120.0,
)
# Statuses worth another try: the server is busy or failing for now. 408 and 429 are 4xx but
# say "later", not "never"; every other 4xx is the request's fault and is not repeated.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TAIL_BYTES = 64 * 1024  # of a JSONL outbox, searched for the key being written
_SMTP_PORTS = {"smtp": 25, "smtps": 465}


@dataclass(frozen=True)
class DeliveryResult:
    """How one delivery went.

    Attributes:
        ok: the output accepted it.
        attempts: tries made (0 when nothing could be tried: a missing secret).
        error: one line saying why it failed, or ``None``; set on a delivered email too when
            the server refused some of its recipients (sending again would repeat it to the
            others).
        already_delivered: the output already held this delivery key (a JSONL outbox written
            before a crash); nothing was written again.
    """

    ok: bool
    attempts: int
    error: str | None = None
    already_delivered: bool = False


# --------------------------------------------------------------------------- specs


def parse_output_spec(kind: str, value: str | None = None, **options: Any) -> dict[str, Any]:
    """Check what a user gave for an output and return its spec.

    Args:
        kind: ``stdout``, ``jsonl`` (``value``: a file path), ``webhook`` (``value``: an
            http(s) URL) or ``smtp`` (``value``: ``smtp://host:port`` or
            ``smtps://host:port``).
        value: what the user typed after the option.
        options: for a webhook, ``secret_env`` (the *name* of the environment variable that
            holds the signing secret; the secret itself is never stored). For email, ``to``
            (an address or a list), ``sender`` (or ``from_``), ``starttls`` (bool),
            ``username`` and ``password_env`` (the variable holding the password). Options
            that are ``None`` are ignored.

    Returns:
        ``{}``, ``{"path": …}``, ``{"url": …, "secret_env": …}`` or ``{"host", "port", "tls",
        "to", "from", "username", "password_env"}``.

    Raises:
        UsageError: one line naming what is wrong and how to fix it.
    """
    given = {k: v for k, v in options.items() if v is not None}
    if kind == "stdout":
        _no_options(kind, given, set())
        return {}
    if kind == "jsonl":
        _no_options(kind, given, set())
        return {"path": str(_outbox_path(value or ""))}
    if kind == "webhook":
        _no_options(kind, given, {"secret_env"})
        url = (value or "").strip()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(
                f"--webhook needs an http(s) URL, such as https://hooks.example.com/kgot "
                f"(got {url!r})"
            )
        secret_env = given.get("secret_env")
        if secret_env is not None:
            secret_env = _env_name(str(secret_env), "--secret-env")
        return {"url": url, "secret_env": secret_env}
    if kind == "smtp":
        _no_options(kind, given, {"to", "sender", "from_", "starttls", "username", "password_env"})
        return _smtp_spec(value or "", given)
    raise UsageError(
        f"unknown output kind {kind!r}; use one of {', '.join('--' + k for k in OUTPUT_KINDS)}"
    )


def require_variables(spec: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> None:
    """Refuse an output whose secret lives in a variable that is not set (or empty) here.

    A webhook with ``secret_env`` is signed with that variable's value and an email server
    login reads its password from ``password_env``; deliveries read the variable each time.
    Checked when the output is added, so a typo in the name, or a variable forgotten, is
    said at once instead of failing every delivery later (a delivery that finds it unset
    fails with that reason and is not sent unsigned: :func:`deliver`).

    Raises:
        UsageError: the variable is not set, naming it and how to set it.
    """
    environ = os.environ if environ is None else environ
    for key, option, what in (
        ("secret_env", "--secret-env", "the webhook's signing secret"),
        ("password_env", "--password-env", "the mail password"),
    ):
        name = spec.get(key)
        if name and not environ.get(str(name)):
            raise UsageError(
                f"{option} {name}: the variable {name} is not set in this environment; set it "
                f"to {what} first (export {name}=…, and the same where `kgot aide run` runs), "
                "then add the output again"
            )


def _no_options(kind: str, given: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(given) - allowed)
    if extra:
        shown = ", ".join("--" + name.rstrip("_").replace("_", "-") for name in extra)
        raise UsageError(f"{shown} does not apply to a --{kind} output; leave it out")


def _outbox_path(value: str) -> Path:
    text = value.strip()
    if not text:
        raise UsageError("--jsonl needs a file path, such as ./outbox.jsonl")
    path = Path(text).expanduser().absolute()
    if path.is_dir():
        raise UsageError(f"--jsonl {text!r} is a folder; give a file path inside it")
    # The folder may not exist yet (it is created at the first delivery), but the nearest one
    # that does must be a folder kgot can write in.
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(
            f"--jsonl {text!r}: cannot create files under {existing}; choose a folder you can "
            "write to"
        )
    return path


def _env_name(value: str, option: str) -> str:
    name = value.strip()
    if name.startswith("$"):
        name = name[1:]
    if not _ENV_NAME.fullmatch(name):
        raise UsageError(
            f"{option} takes the name of an environment variable, such as HOOK_SECRET "
            f"(got {value!r}); the secret itself goes in that variable"
        )
    return name


def _smtp_spec(value: str, given: Mapping[str, Any]) -> dict[str, Any]:
    parts = urlsplit(value.strip())
    try:
        port = parts.port
    except ValueError:
        port = 0
    if parts.scheme not in _SMTP_PORTS or not parts.hostname or port == 0:
        raise UsageError(
            f"--smtp needs smtp://host:port or smtps://host:port, such as "
            f"smtp://mail.example.com:587 (got {value!r})"
        )
    if parts.username or parts.password:
        raise UsageError(
            "--smtp must not hold a user or password; use --username and --password-env"
        )
    recipients = given.get("to")
    if isinstance(recipients, str):
        recipients = [r.strip() for r in recipients.split(",")]
    recipients = [str(r).strip() for r in recipients or [] if str(r).strip()]
    sender = str(given.get("sender") or given.get("from_") or "").strip()
    if not recipients or not all(_is_address(r) for r in recipients):
        raise UsageError("--smtp needs --to with one or more addresses, such as me@example.com")
    if not _is_address(sender):
        raise UsageError("--smtp needs --from with the sender's address, such as kgot@example.com")
    starttls = bool(given.get("starttls"))
    if starttls and parts.scheme == "smtps":
        raise UsageError("--starttls is for smtp://; smtps:// is encrypted from the start")
    password_env = given.get("password_env")
    if password_env is not None:
        password_env = _env_name(str(password_env), "--password-env")
    username = given.get("username")
    if (username is None) != (password_env is None):
        raise UsageError("--username and --password-env go together; give both or neither")
    return {
        "host": parts.hostname,
        "port": port or _SMTP_PORTS[parts.scheme],
        "tls": "ssl" if parts.scheme == "smtps" else ("starttls" if starttls else "none"),
        "to": recipients,
        "from": sender,
        "username": username,
        "password_env": password_env,
    }


def _is_address(text: str) -> bool:
    # No whitespace and no control character: an address goes into a mail header as is.
    return bool(re.fullmatch(r"[^@\s<>,\x00-\x1f\x7f]+@[^@\s<>,\x00-\x1f\x7f]+", text))


# --------------------------------------------------------------------------- delivery


def deliver(
    kind: str,
    spec: Mapping[str, Any],
    payload: Mapping[str, Any],
    *,
    delivery_key: str,
    settings: Settings,
    policy: RetryPolicy | None = None,
) -> DeliveryResult:
    """Send ``payload`` to one output.

    Args:
        kind: the output's kind (see :data:`OUTPUT_KINDS`).
        spec: its spec from :func:`parse_output_spec`.
        payload: what the program produced (JSON-able). For email, its ``subject`` and
            ``text`` (else ``digest``) are used when present.
        delivery_key: the same for every try of the same delivery (see the module's notes).
        settings: effective settings (``tools.timeout`` bounds each request).
        policy: retries of a webhook or mail server (:data:`DEFAULT_POLICY` by default).

    Returns:
        The :class:`DeliveryResult`; never raises for a failed delivery.
    """
    return asyncio.run(
        deliver_async(
            kind, spec, payload, delivery_key=delivery_key, settings=settings, policy=policy
        )
    )


async def deliver_once(
    store: Store,
    aide: Any,
    output: Any,
    key: str,
    payload: Mapping[str, Any],
    *,
    cycle_id: int,
    now: Any,
    settings: Settings,
    spec: Mapping[str, Any] | None = None,
) -> DeliveryResult | None:
    """Deliver ``payload`` to an aide's ``output`` under ``key`` unless its delivery log says
    not to now (``None`` then: delivered, given up on, waiting for its next try, or being
    sent by another worker), and log the try. ``spec``: the output's settings to deliver
    with, when not its own.

    The delivery is claimed in the log before anything is sent, so of several workers only
    one sends it. A try is one call here, however many requests the output's own retries
    make; a failed one waits before the next (:func:`kgot.aides.aide_rows.retry_delay`).
    """
    from kgot.aides import aide_rows
    from kgot.persistence import current_owner

    owner = current_owner()
    if not aide_rows.claim_delivery(
        store,
        aide,
        output.id,
        key,
        cycle_id,
        owner=owner,
        now=now,
        at_most_once=output.kind == "smtp",
    ):
        return None
    try:
        result = await deliver_async(
            output.kind,
            output.spec if spec is None else spec,
            payload,
            delivery_key=key,
            settings=settings,
        )
    except BaseException:
        # Stopped (a signal) or broken mid-send. A webhook or outbox may have it; it is sent
        # again later under the same key, which receivers de-duplicate on. An email may
        # have gone: its claim stays, and the next worker gives it up instead of sending
        # it twice (aide_rows.claim_delivery).
        if output.kind != "smtp":
            aide_rows.release_delivery(store, output.id, key, owner=owner)
        raise
    aide_rows.record_delivery(
        store, output.id, key, owner=owner, ok=result.ok, error=result.error, now=now
    )
    return result


async def deliver_async(
    kind: str,
    spec: Mapping[str, Any],
    payload: Mapping[str, Any],
    *,
    delivery_key: str,
    settings: Settings,
    policy: RetryPolicy | None = None,
) -> DeliveryResult:
    """:func:`deliver` inside an event loop."""
    if kind not in _REQUIRED_FIELDS:
        return DeliveryResult(False, 0, f"unknown output kind {kind!r}")
    missing = [name for name in _REQUIRED_FIELDS[kind] if not spec.get(name)]
    if missing:
        return DeliveryResult(
            False, 0, f"the {kind} output's spec has no {', '.join(missing)}; add it again"
        )
    message = {**payload, "delivery_key": delivery_key}
    try:
        encode(message)
    except (TypeError, ValueError, RecursionError) as error:
        return DeliveryResult(False, 0, f"the payload cannot be sent as JSON ({error})")
    policy = policy or DEFAULT_POLICY
    if kind == "stdout":
        return _to_stdout(message)
    if kind == "jsonl":
        return await asyncio.to_thread(_to_jsonl, Path(spec["path"]), message, delivery_key)
    if kind == "webhook":
        return await _to_webhook(spec, message, delivery_key, settings, policy)
    return await _to_smtp(spec, message, delivery_key, settings, policy)


_REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "stdout": (),
    "jsonl": ("path",),
    "webhook": ("url",),
    "smtp": ("host", "port", "to", "from"),
}


def encode(message: Mapping[str, Any]) -> bytes:
    """The exact bytes sent for a message: compact JSON, keys sorted, UTF-8."""
    return json.dumps(
        message, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
    ).encode("utf-8")


def signature(body: bytes, secret: str) -> str:
    """The ``X-Kgot-Signature`` value of ``body``: ``sha256=<hex HMAC-SHA256>``.

    A receiver recomputes it over the raw request body with the shared secret and compares
    with :func:`hmac.compare_digest`.
    """
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- stdout and JSONL


def _to_stdout(message: Mapping[str, Any]) -> DeliveryResult:
    line = encode(message).decode("utf-8")
    try:
        print(line, flush=True)
    except OSError as error:  # a closed pipe
        return DeliveryResult(False, 1, f"cannot write to stdout ({error.strerror or error})")
    return DeliveryResult(True, 1)


def _to_jsonl(path: Path, message: Mapping[str, Any], delivery_key: str) -> DeliveryResult:
    """Append one line under an exclusive lock, in one write, then fsync.

    The lock keeps two workers' lines apart; a line left without its newline by a crash is
    ended first, so the new line is whole. The key is looked for in the file's tail: a line
    written just before a crash (and so not in the runtime's log) is not written twice.
    """
    line = encode(message) + b"\n"
    key_field = b'"delivery_key":' + json.dumps(delivery_key, ensure_ascii=False).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as error:
        return DeliveryResult(False, 1, f"cannot open {path} ({error.strerror or error})")
    try:
        with _locked(descriptor):
            size = os.fstat(descriptor).st_size
            tail = os.pread(descriptor, min(size, _TAIL_BYTES), max(0, size - _TAIL_BYTES))
            if any(key_field in row for row in tail.splitlines()):
                return DeliveryResult(True, 1, already_delivered=True)
            if tail and not tail.endswith(b"\n"):
                line = b"\n" + line
            written = 0
            while written < len(line):
                written += os.write(descriptor, line[written:])
            os.fsync(descriptor)
    except OSError as error:
        return DeliveryResult(False, 1, f"cannot write to {path} ({error.strerror or error})")
    finally:
        os.close(descriptor)
    return DeliveryResult(True, 1)


@contextlib.contextmanager
def _locked(descriptor: int) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: one writer per outbox is the user's to ensure
        yield
        return
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(descriptor, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- webhook


class _Retryable(Exception):
    """A failed try worth repeating; ``retry_after`` is the wait the server asked for."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Refused(Exception):
    """A failed try that repeating would not fix."""


async def _to_webhook(
    spec: Mapping[str, Any],
    message: Mapping[str, Any],
    delivery_key: str,
    settings: Settings,
    policy: RetryPolicy,
) -> DeliveryResult:
    """POST the message as JSON, signed when a secret is configured.

    The URL is the user's own configuration (like a search API's endpoint), so it may be on
    loopback or a private network and the proxy variables apply. Redirects are not followed:
    the body and its signature are for the address the user gave.
    """
    import httpx

    from kgot.webclient import USER_AGENT, shown_url

    url = str(spec["url"])
    shown = shown_url(url)
    body = encode(message)
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": USER_AGENT,
        DELIVERY_HEADER: delivery_key,
    }
    secret_env = spec.get("secret_env")
    if secret_env:
        secret = os.environ.get(str(secret_env))
        if not secret:
            return DeliveryResult(
                False,
                0,
                f"the webhook secret variable {secret_env} is not set; export it, or add the "
                "output again without --secret-env",
            )
        headers[SIGNATURE_HEADER] = signature(body, secret)
    tries = 0
    timeout = httpx.Timeout(settings.tools.timeout, connect=min(10.0, settings.tools.timeout))

    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:

        async def attempt(number: int) -> None:
            nonlocal tries
            tries = number
            try:
                # Streamed: only a refusal's first bytes are read, decoded within a bound (a
                # compressed answer could otherwise inflate without limit in memory).
                async with client.stream("POST", url, content=body, headers=headers) as response:
                    excerpt = b"" if 200 <= response.status_code < 300 else await _excerpt(response)
            except httpx.TimeoutException:
                raise _Retryable(f"the webhook {shown} did not answer in time") from None
            except httpx.TransportError as error:
                raise _Retryable(
                    f"cannot reach the webhook {shown} ({type(error).__name__}: "
                    f"{error or 'no detail'})"
                ) from None
            _check_webhook_answer(response, shown, excerpt)

        try:
            await retry_async(
                attempt,
                policy,
                retryable=lambda error: isinstance(error, _Retryable),
                retry_after=lambda error: getattr(error, "retry_after", None),
            )
        except RetriesExhausted as gave_up:
            return DeliveryResult(
                False, tries, one_line(f"{gave_up.error} (gave up after {gave_up.attempts} tries)")
            )
        except _Refused as refused:
            return DeliveryResult(False, tries, one_line(str(refused)))
    return DeliveryResult(True, tries)


_EXCERPT_BYTES = 4096  # of a refusing webhook's answer, for the error line


async def _excerpt(response: Any) -> bytes:
    """The start of ``response``'s body, decoded, at most :data:`_EXCERPT_BYTES`."""
    from kgot.webclient import BodyTooLarge, BoundedBody, CorruptBody, UnsupportedEncoding

    body = BoundedBody(response.headers.get("content-encoding"), _EXCERPT_BYTES)
    try:
        async for raw in response.aiter_raw():
            body.feed(raw)
        return body.finish()
    except BodyTooLarge:
        return body.kept()
    except (UnsupportedEncoding, CorruptBody):
        return b"(a body kgot cannot decode)"


def _check_webhook_answer(response: Any, shown: str, excerpt: bytes) -> None:
    from kgot.retrying import body_excerpt

    status = response.status_code
    if 200 <= status < 300:
        return
    if status in RETRY_STATUSES:
        raise _Retryable(
            f"the webhook {shown} answered HTTP {status}",
            retry_after_from_headers(response.headers),
        )
    if 300 <= status < 400:
        where = response.headers.get("location") or "elsewhere"
        raise _Refused(
            f"the webhook {shown} redirects to {where} (HTTP {status}); give that address instead"
        )
    raise _Refused(
        f"the webhook {shown} refused the delivery (HTTP {status}: "
        f"{body_excerpt(excerpt)}); check its address and secret"
    )


# --------------------------------------------------------------------------- email


async def _to_smtp(
    spec: Mapping[str, Any],
    message: Mapping[str, Any],
    delivery_key: str,
    settings: Settings,
    policy: RetryPolicy,
) -> DeliveryResult:
    """Send a plain-text email through the configured server (stdlib ``smtplib``)."""
    password = None
    if spec.get("password_env"):
        password = os.environ.get(str(spec["password_env"]))
        if not password:
            return DeliveryResult(
                False,
                0,
                f"the mail password variable {spec['password_env']} is not set; export it",
            )
    email = _email(spec, message, delivery_key)
    where = f"{spec['host']}:{spec['port']}"
    tries = 0
    refused: dict[str, Any] = {}

    async def attempt(number: int) -> None:
        nonlocal tries, refused
        tries = number
        refused = await asyncio.to_thread(
            _send_mail, spec, email, password, settings.tools.timeout, where
        )

    try:
        await retry_async(
            attempt,
            policy,
            retryable=lambda error: isinstance(error, _Retryable),
        )
    except RetriesExhausted as gave_up:
        return DeliveryResult(
            False, tries, one_line(f"{gave_up.error} (gave up after {gave_up.attempts} tries)")
        )
    except _Refused as failure:
        return DeliveryResult(False, tries, one_line(str(failure)))
    if refused:  # the others have it: sending again would repeat it to them
        return DeliveryResult(
            True, tries, f"sent, but the mail server {where} refused {', '.join(sorted(refused))}"
        )
    return DeliveryResult(True, tries)


def _email(spec: Mapping[str, Any], message: Mapping[str, Any], delivery_key: str) -> Any:
    from email.message import EmailMessage
    from email.utils import formatdate

    from kgot.aides.mail import AddressHeader, TextHeader

    email = EmailMessage()
    aide = message.get("aide")
    subject = message.get("subject") or (f"kgot aide {aide}" if aide else "kgot aide report")
    # Every header is literal text (one line, 200 characters at most) that the email package
    # stores and writes as it is, never parsing it: an encoded word in an aide's name or a
    # subject ("=?utf-8?q?x=0D=0AReply-To:…?=") would otherwise be decoded into a header break
    # (CVE-2024-6923).
    email["Subject"] = TextHeader("Subject", str(subject))
    email["From"] = AddressHeader("From", [str(spec["from"])])
    email["To"] = AddressHeader("To", [str(address) for address in spec["to"]])
    email["Date"] = TextHeader("Date", formatdate(localtime=False))
    # The same delivery always has the same Message-ID, so a mail client shows a repeat once.
    digest = hashlib.sha256(delivery_key.encode("utf-8")).hexdigest()[:32]
    email["Message-ID"] = TextHeader("Message-ID", f"<{digest}@kgot.invalid>")
    email[DELIVERY_HEADER] = TextHeader(DELIVERY_HEADER, delivery_key)
    text = message.get("text") or message.get("digest")
    if not isinstance(text, str) or not text.strip():
        shown = {k: v for k, v in message.items() if k != "subject"}
        text = json.dumps(shown, ensure_ascii=False, indent=2, sort_keys=True)
    email.set_content(text)
    return email


def _send_mail(
    spec: Mapping[str, Any], email: Any, password: str | None, timeout: float, where: str
) -> dict[str, Any]:
    """Send one message; the recipients the server refused (when it took the others)."""
    import smtplib
    import ssl

    host, port = str(spec["host"]), int(spec["port"])
    try:
        connection: smtplib.SMTP
        if spec.get("tls") == "ssl":
            connection = smtplib.SMTP_SSL(
                host, port, timeout=timeout, context=ssl.create_default_context()
            )
        else:
            connection = smtplib.SMTP(host, port, timeout=timeout)
        with connection:
            if spec.get("tls") == "starttls":
                connection.starttls(context=ssl.create_default_context())
            if spec.get("username") and password:
                connection.login(str(spec["username"]), password)
            return dict(connection.send_message(email))
    except smtplib.SMTPResponseException as error:
        said = error.smtp_error
        if isinstance(said, bytes):
            said = said.decode("utf-8", "replace")
        text = f"the mail server {where} answered {error.smtp_code} {one_line(said, 160)}"
        if 400 <= error.smtp_code < 500:
            raise _Retryable(text) from None  # 4xx: "try again later" in SMTP
        raise _Refused(f"{text}; check the addresses and the server's settings") from None
    except smtplib.SMTPRecipientsRefused as error:
        raise _Refused(
            f"the mail server {where} refused every recipient ({', '.join(error.recipients)})"
        ) from None
    except (smtplib.SMTPServerDisconnected, TimeoutError, ConnectionError) as error:
        raise _Retryable(
            f"cannot reach the mail server {where} ({type(error).__name__}: {error})"
        ) from None
    except ssl.SSLError as error:
        raise _Refused(
            f"TLS with the mail server {where} failed ({error.reason or error})"
        ) from None
    except (smtplib.SMTPException, OSError) as error:
        raise _Retryable(
            f"sending mail through {where} failed ({type(error).__name__}: {error})"
        ) from None
