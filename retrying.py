"""Retrying calls to remote services, and saying in one line what a failed answer said.

The model client (:mod:`kgot.llm.client`) and the web client (:mod:`kgot.webclient.client`) both
retry transient failures; they share this module so that backoff, jitter, ``Retry-After`` and
the limits on attempts and time work one way. Each caller keeps what is its own through hooks:
which failures are worth another try (:func:`retry_async`'s ``retryable``), what wait the server
asked for (``retry_after``), and what the final error says (:class:`RetriesExhausted` carries the
last failure and the number of attempts). A caller that records every try (the model client's
usage ledger) does so inside its attempt, which is given its 1-based try number.

The loop itself is tenacity's :class:`~tenacity.AsyncRetrying`. The wait is kgot's own
(:meth:`RetryPolicy.delay`): tenacity's jittered waits spread over ``[0, x]`` or add to ``x``,
and neither lets a server's ``Retry-After`` replace or stretch the wait.

This module is at the bottom of the layers (standard library and tenacity only), so any layer
may use it.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Literal, NoReturn, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
)
from tenacity.stop import stop_base

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

# 2**60 backoff units is past any cap; a larger exponent would overflow a float.
_MAX_DOUBLINGS = 60


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter, ``Retry-After``, and limits on tries and time.

    Attributes:
        max_retries: retries after the first try (so ``max_retries + 1`` tries at most).
        backoff_base: seconds before the first retry; doubled for each further retry.
        backoff_max: ceiling on one computed backoff.
        retry_after_cap: ceiling on a server's ``Retry-After`` (a server asking for an hour is
            not waited for an hour).
        jitter: spread each computed backoff uniformly over [50 %, 100 %] so concurrent callers
            do not retry in lock-step (a server's ``Retry-After`` is not jittered).
        retry_after: ``"replaces"``: a server's ``Retry-After`` is the wait, even when shorter
            than the backoff (the server knows when it will be ready). ``"extends"``: the wait
            is the longer of the two (a server answering ``Retry-After: 0`` while failing is not
            hammered).
        total_timeout: seconds from the first try after which no retry starts: a wait that
            would end at or past it is not begun, and the last failure ends the call (``None``:
            no limit beyond ``max_retries``).
    """

    max_retries: int = 4
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    retry_after_cap: float = 60.0
    jitter: bool = True
    retry_after: Literal["replaces", "extends"] = "replaces"
    total_timeout: float | None = None

    def backoff(self, retry_number: int) -> float:
        """The computed wait before retry ``retry_number`` (1-based), jitter included."""
        doublings = min(max(retry_number - 1, 0), _MAX_DOUBLINGS)
        wait = min(self.backoff_base * 2.0**doublings, self.backoff_max)
        if self.jitter:
            wait *= random.uniform(0.5, 1.0)
        return wait

    def delay(self, retry_number: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``retry_number`` (1-based).

        Args:
            retry_number: which retry comes next (1 for the one after the first try).
            retry_after: seconds the server asked to wait, if it did; capped at
                :attr:`retry_after_cap`, never negative, and combined with the backoff as
                :attr:`retry_after` says.
        """
        if retry_after is None or math.isnan(retry_after):
            return self.backoff(retry_number)
        asked = min(max(retry_after, 0.0), self.retry_after_cap)
        if self.retry_after == "replaces":
            return asked
        return max(self.backoff(retry_number), asked)


class RetriesExhausted(Exception):
    """A retryable failure after which no further try was made.

    Attributes:
        error: what the last try raised.
        attempts: how many tries were made.
        out_of_time: the policy's ``total_timeout`` stopped the retries before ``max_retries``.
    """

    def __init__(self, error: BaseException, attempts: int, *, out_of_time: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.attempts = attempts
        self.out_of_time = out_of_time


def _no_retry_after(error: BaseException) -> float | None:
    return None


def _sleep(seconds: float) -> Awaitable[None]:
    # Looked up at each call, so whatever ``asyncio.sleep`` is then (a test's recorder) is used.
    return asyncio.sleep(seconds)


async def retry_async(
    attempt: Callable[[int], Awaitable[T]],
    policy: RetryPolicy,
    *,
    retryable: Callable[[Exception], bool],
    retry_after: Callable[[Exception], float | None] = _no_retry_after,
    sleep: Callable[[float], Awaitable[None]] = _sleep,
) -> T:
    """Await ``attempt(1)``, ``attempt(2)``, … until one returns, as ``policy`` allows.

    Args:
        attempt: one try; given its 1-based number.
        policy: backoff, caps and limits.
        retryable: whether a failure is worth another try. Only :class:`Exception` is asked:
            cancellation and other :class:`BaseException` always end the call at once.
        retry_after: the seconds a failure's server asked to wait, or ``None``.
        sleep: how to wait (``asyncio.sleep``).

    Returns:
        What the first successful try returned.

    Raises:
        RetriesExhausted: the last try failed retryably and no retry was left (attempts or
            ``total_timeout``); chained from that failure.
        BaseException: a failure that is not retryable, as the try raised it.
    """

    def wants_retry(error: BaseException) -> bool:
        return isinstance(error, Exception) and retryable(error)

    def wait(state: RetryCallState) -> float:
        error = _failure_of(state)
        asked = retry_after(error) if isinstance(error, Exception) else None
        return policy.delay(state.attempt_number, asked)

    def give_up(state: RetryCallState) -> NoReturn:
        error = _failure_of(state)
        raise RetriesExhausted(
            error, state.attempt_number, out_of_time=state.attempt_number <= policy.max_retries
        ) from error

    stop: stop_base = stop_after_attempt(policy.max_retries + 1)
    if policy.total_timeout is not None:
        stop = stop | stop_before_delay(policy.total_timeout)
    # A fresh AsyncRetrying per call: tenacity keeps a call's statistics and iteration state on
    # the object (per thread, not per task), and concurrent calls share a thread.
    retrying = AsyncRetrying(
        stop=stop,
        wait=wait,
        retry=retry_if_exception(wants_retry),
        sleep=sleep,
        retry_error_callback=give_up,
    )
    numbers = itertools.count(1)

    async def next_try() -> T:  # a coroutine function: tenacity awaits only those
        return await attempt(next(numbers))

    result: T = await retrying(next_try)
    return result


def _failure_of(state: RetryCallState) -> BaseException:
    error = state.outcome.exception() if state.outcome is not None else None
    if error is None:  # tenacity asks wait and stop only after a failed try
        raise AssertionError("no failure to retry")
    return error


# --------------------------------------------------------------------------- Retry-After


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header value asks to wait, or ``None`` when it says nothing.

    Both forms of RFC 9110 are read: delta-seconds (fractions accepted, as some servers send
    them) and an HTTP date. A date in the past or a negative number is ``0``; a value that is
    neither form, or not finite, is ``None``. Capping is the policy's
    (:attr:`RetryPolicy.retry_after_cap`).

    Args:
        value: the header's value.
        now: the current time as a Unix timestamp, for a date (``time.time()`` by default).
    """
    text = (value or "").strip()
    if not text:
        return None
    seconds = _number(text)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone: HTTP dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_after_from_headers(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a response's headers ask to wait: ``retry-after-ms`` (OpenAI's, milliseconds)
    wins over ``Retry-After``; ``None`` when neither says anything readable.

    ``headers`` should look names up case-insensitively, as ``httpx.Headers`` does.
    """
    if headers is None:
        return None
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    return parse_retry_after(headers.get("retry-after"))


def _number(value: str | None) -> float | None:
    """``value`` as a finite number of seconds, never negative; ``None`` if it is not one."""
    try:
        number = float((value or "").strip())
    except ValueError:
        return None
    return max(0.0, number) if math.isfinite(number) else None


# --------------------------------------------------------------------------- causes


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error``, then each exception it was raised from or during, innermost last."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        yield current
        seen.add(id(current))
        current = current.__cause__ or current.__context__


def cause_of_type(error: BaseException, kind: type[E]) -> E | None:
    """``error`` or the first exception in its cause/context chain that is a ``kind``."""
    return next((cause for cause in causes(error) if isinstance(cause, kind)), None)


# --------------------------------------------------------------------------- excerpts

_MARKUP = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.DOTALL | re.IGNORECASE)
_UNPRINTABLE = re.compile(r"[^\S ]+|[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\ufffd]+")
_READ_CHARS = 20_000  # of a body, before markup is dropped: the excerpt is its first words
BODY_EXCERPT_CHARS = 160
LINE_CHARS = 240


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    """``text`` as one printable line (whitespace and control characters become single
    spaces), cut at ``limit`` characters with an ellipsis."""
    text = " ".join(_UNPRINTABLE.sub(" ", text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def body_excerpt(body: bytes | str, limit: int = BODY_EXCERPT_CHARS) -> str:
    """The start of a response body as one short, printable line, quoted.

    Markup is dropped (an HTML error page shows its text, e.g. ``"502 Bad Gateway nginx"``),
    control characters become spaces, and the result is cut at ``limit`` characters.
    """
    head = body[:_READ_CHARS]
    text = head if isinstance(head, str) else head.decode("utf-8", errors="replace")
    text = one_line(_MARKUP.sub(" ", text), limit)
    if not text:
        return "(empty body)" if not body else "(no printable text)"
    return f'"{text}"'


def error_message(data: Any) -> str | None:
    """The message a decoded JSON error body carries, or ``None``.

    Read from ``{"error": {"message": …}}`` (OpenAI), ``{"error": {"info": …}}`` (MediaWiki),
    ``{"error": …}``, ``{"message": …}``, ``{"detail": …}`` or ``{"info": …}``.
    """
    if not isinstance(data, dict):
        return None
    for key in ("error", "message", "detail", "info"):
        value = data.get(key)
        if isinstance(value, dict):
            value = value.get("message") or value.get("info")
        if isinstance(value, str) and value.strip():
            return value
    return None


def answer_excerpt(data: Any, body: bytes | str, limit: int = BODY_EXCERPT_CHARS) -> str:
    """What a failed answer said, in one line: the message of its JSON error body (``data``,
    decoded, or ``None``), else an excerpt of the ``body`` itself (:func:`body_excerpt`)."""
    message = error_message(data)
    return one_line(message, limit) if message else body_excerpt(body, limit)
