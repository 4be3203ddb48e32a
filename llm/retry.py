"""Which model errors are worth retrying, and how long to wait before the next try.

kgot does its own retries (the SDKs' are switched off) so that every request lands in the usage
ledger, the backoff is the same for every provider, and exhaustion produces one clear error.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from kgot.llm.http import UnreadableAnswer, body_excerpt

E = TypeVar("E", bound=BaseException)
# HTTP statuses that, on the *first* use of a structured-output method with an endpoint, most
# likely mean "this server does not do that" (llama.cpp answers 500 to json_schema, vLLM 400,
# some proxies 404/422/501) rather than a passing fault.
METHOD_UNSUPPORTED_STATUSES = frozenset({400, 404, 422, 500, 501})
_TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
_MAX_DETAIL = 240


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter.

    Attributes:
        max_retries: retries after the first try (so ``max_retries + 1`` requests at most).
        backoff_base: seconds before the first retry; doubled for each further retry.
        backoff_max: ceiling on one computed backoff.
        retry_after_cap: ceiling on a server's ``Retry-After`` (a server asking for an hour is
            not waited for an hour).
        jitter: spread each wait uniformly over [50 %, 100 %] so concurrent votes do not retry
            in lock-step.
    """

    max_retries: int = 4
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    retry_after_cap: float = 60.0
    jitter: bool = True

    def delay(self, retry_number: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``retry_number`` (1-based).

        A server's ``Retry-After`` wins over the computed backoff, capped at
        :attr:`retry_after_cap`.
        """
        if retry_after is not None:
            return max(0.0, min(retry_after, self.retry_after_cap))
        wait = min(self.backoff_base * 2 ** (retry_number - 1), self.backoff_max)
        if self.jitter:
            wait *= random.uniform(0.5, 1.0)
        return wait


@dataclass(frozen=True)
class Failure:
    """What went wrong with one model request, in terms kgot acts on.

    Attributes:
        transient: worth retrying (connection problems, timeouts, 408/409/425/429, 5xx).
        status: the HTTP status, when there was a response.
        detail: one line describing the failure (``HTTP 500: …``, ``connection refused``).
        hint: what the user can do about it, for the final error message.
        retry_after: seconds the server asked to wait, if it did.
        method_signal: may mean the structured-output method is unsupported by the endpoint.
    """

    transient: bool
    status: int | None
    detail: str
    hint: str
    retry_after: float | None = None
    method_signal: bool = False


def classify(error: BaseException, *, timeout: float) -> Failure:
    """Describe an exception raised by a chat model request.

    Args:
        error: what the request raised (OpenAI/Anthropic SDK errors, httpx errors,
            :class:`TimeoutError` from kgot's own per-call deadline, …).
        timeout: the per-call deadline in seconds, for the message.
    """
    unreadable = _cause_of_type(error, UnreadableAnswer)
    if unreadable is not None:
        hint = (
            "the server's answer cannot be read; check the server"
            if unreadable.too_deep
            else "this is not an OpenAI-compatible API answering; check KGOT_BASE_URL (the "
            "API's base URL, usually ending in /v1, not a web page, proxy or login portal)"
        )
        return Failure(False, unreadable.status, str(unreadable), hint)
    status = _status_of(error)
    if status is not None:
        detail = f"HTTP {status}: {_server_message(error)}"
        retry_after = _retry_after(error)
        if status in _TRANSIENT_STATUSES or status >= 500:
            hint = (
                "the endpoint is rate-limiting; wait, or lower the number of votes"
                if status == 429
                else "the server is failing; check its logs or try again later"
            )
            return Failure(
                True, status, detail, hint, retry_after, status in METHOD_UNSUPPORTED_STATUSES
            )
        if _is_context_overflow(error, detail):
            return Failure(
                False,
                status,
                detail,
                "the prompt exceeds the model's context window; lower "
                "controller.graph_token_budget or use a model with a longer context",
            )
        if status in (401, 403):
            hint = "check KGOT_API_KEY (or OPENAI_API_KEY)"
        elif status == 404:
            hint = (
                "check the model name (KGOT_MODEL) and the base URL (KGOT_BASE_URL, usually "
                "ending in /v1)"
            )
        else:
            hint = "the endpoint rejected the request; check that the model supports it"
        # "model not found" is not about the method: trying the other methods cannot help.
        model_missing = status == 404 and "model" in detail.lower()
        method_signal = status in METHOD_UNSUPPORTED_STATUSES and not model_missing
        return Failure(False, status, detail, hint, None, method_signal)
    if isinstance(error, TimeoutError) or _is_timeout(error):
        return Failure(
            True,
            None,
            f"no answer within {timeout:g} s",
            "raise KGOT_LLM_TIMEOUT or check that the server is not overloaded",
        )
    if _is_connection_error(error):
        return Failure(
            True,
            None,
            f"cannot connect ({_root_cause(error)})",
            "check that the server is running and the URL (KGOT_BASE_URL) is right",
        )
    if isinstance(error, NotImplementedError):
        return Failure(
            False,
            None,
            f"not supported by this model class ({_one_line(str(error)) or 'NotImplementedError'})",
            "choose another structured-output method (KGOT_STRUCTURED_OUTPUT) or model",
            method_signal=True,
        )
    return Failure(
        False,
        None,
        f"{type(error).__name__}: {_one_line(str(error))}",
        "the model client failed unexpectedly (please report it with this message)",
    )


def _is_context_overflow(error: BaseException, detail: str) -> bool:
    names = {cls.__name__ for cls in type(error).__mro__}
    if any("ContextOverflow" in name for name in names):
        return True
    text = detail.lower()
    return any(
        marker in text
        for marker in ("context_length_exceeded", "context length", "context window", "too long")
    )


def _status_of(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    if not isinstance(status, int):
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _server_message(error: BaseException) -> str:
    body: Any = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return _one_line(str(message))
    if isinstance(body, str) and body.strip():  # not JSON: an HTML error page, a proxy's text
        return body_excerpt(body)
    message = getattr(error, "message", None) or str(error)
    return _one_line(str(message))


def _cause_of_type(error: BaseException, kind: type[E]) -> E | None:
    """``error`` or the first exception in its cause/context chain that is a ``kind``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _retry_after(error: BaseException) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _is_timeout(error: BaseException) -> bool:
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout"})


def _is_connection_error(error: BaseException) -> bool:
    if isinstance(error, ConnectionError | OSError):
        return True
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"APIConnectionError", "TransportError", "ConnectError"})


def _root_cause(error: BaseException) -> str:
    """The innermost cause's message: `[Errno 111] Connection refused` beats `Connection error.`"""
    deepest = error
    seen = {id(error)}
    while (nxt := deepest.__cause__ or deepest.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        deepest = nxt
    text = _one_line(str(deepest)) or type(deepest).__name__
    return text


def _one_line(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"
