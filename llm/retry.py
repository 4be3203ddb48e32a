"""Which model errors are worth retrying, and what the final error says.

kgot does its own retries (the SDKs' are switched off) so that every request lands in the usage
ledger, the backoff is the same for every provider, and exhaustion produces one clear error. The
waiting (backoff, jitter, ``Retry-After``) is the shared :class:`kgot.retrying.RetryPolicy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kgot.llm.http import UnreadableAnswer
from kgot.retrying import (
    RetryPolicy,
    body_excerpt,
    cause_of_type,
    causes,
    error_message,
    one_line,
    retry_after_from_headers,
)

# RetryPolicy is the shared one (kgot.retrying), offered here beside the classification.
__all__ = ["METHOD_UNSUPPORTED_STATUSES", "Failure", "RetryPolicy", "classify"]

# HTTP statuses that, on the *first* use of a structured-output method with an endpoint, most
# likely mean "this server does not do that" (llama.cpp answers 500 to json_schema, vLLM 400,
# some proxies 404/422/501) rather than a passing fault.
METHOD_UNSUPPORTED_STATUSES = frozenset({400, 404, 422, 500, 501})
_TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})


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
    unreadable = cause_of_type(error, UnreadableAnswer)
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
            f"not supported by this model class ({one_line(str(error)) or 'NotImplementedError'})",
            "choose another structured-output method (KGOT_STRUCTURED_OUTPUT) or model",
            method_signal=True,
        )
    return Failure(
        False,
        None,
        f"{type(error).__name__}: {one_line(str(error))}",
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
    message = error_message(body)
    if message:
        return one_line(message)
    if isinstance(body, str) and body.strip():  # not JSON: an HTML error page, a proxy's text
        return body_excerpt(body)
    return one_line(str(getattr(error, "message", None) or error))


def _retry_after(error: BaseException) -> float | None:
    response = getattr(error, "response", None)
    return retry_after_from_headers(getattr(response, "headers", None))


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
    *_, deepest = causes(error)
    return one_line(str(deepest)) or type(deepest).__name__
