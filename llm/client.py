"""The controller's door to the models: one :class:`LLMClient` per role (:func:`build_llm_clients`).

One client wraps one LangChain chat model and adds what kgot needs around every request:

* the step name in the run metadata (``kgot_step``), which traces and scripted models key on;
* kgot's own deadline (``asyncio.wait_for``) and bounded retries with backoff on transient
  errors, ending in one :class:`~kgot.errors.ModelError` that names the endpoint;
* structured output with method fallback (``auto``) and Pydantic validation with re-asks;
* a :class:`~kgot.llm.usage.LLMCall` in the ledger for every request, failed or not, and the
  same request as a :class:`~kgot.tracing.call_events.ModelCall` trace event, a child of the span in
  progress (the step that asked; nothing when no span is open);
* one ``INFO`` record on the ``kgot.llm.waiting`` logger when requests go unanswered for
  ``notice_after`` seconds (the CLI prints it: a hung endpoint is not ten silent minutes).

Everything is async and holds no lock across a request, so concurrent votes really overlap.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from kgot.config import ROLES, LLMSettings, ModelSettings, Settings, StructuredMethod
from kgot.errors import ConfigError, KgotError, ModelError, StructuredOutputError
from kgot.graph_model import count_tokens
from kgot.llm.http import ensure_reachable
from kgot.llm.models import build_chat_model, endpoint_url, require_models
from kgot.llm.prices import PriceTable
from kgot.llm.retry import Failure, RetryPolicy, classify
from kgot.llm.scripted import STEP_METADATA_KEY
from kgot.llm.structured import (
    InvalidOutput,
    Method,
    applicable_methods,
    bind_method,
    parse_output,
    prepare_messages,
    raw_message,
    repair_messages,
    strip_reasoning,
)
from kgot.llm.usage import LLMCall, UsageLedger
from kgot.retrying import RetriesExhausted, retry_async
from kgot.tracing import ModelCall, child_span_ids, emit

M = TypeVar("M", bound=BaseModel)
_BINDING_CACHE_SIZE = 64
WAITING_LOGGER = "kgot.llm.waiting"
_waiting = logging.getLogger(WAITING_LOGGER)


class _MethodUnsupported(Exception):
    """The endpoint refused a structured-output method on its first use."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.detail)
        self.failure = failure


class _FailedTry(Exception):
    """One try of a request failed; carries what :func:`~kgot.llm.retry.classify` made of it."""

    def __init__(self, failure: Failure, number: int) -> None:
        super().__init__(failure.detail)
        self.failure = failure
        self.number = number  # 1-based

    @property
    def cause(self) -> BaseException | None:
        """What the request raised."""
        return self.__cause__


class LLMClient:
    """One role's model, with retries, structured output, timeouts and usage accounting.

    Args:
        model: the LangChain chat model (see :func:`~kgot.llm.models.build_chat_model`).
        role: ``planning`` or ``execution`` (recorded with every call).
        model_name: ``provider:name``, for messages and prices.
        endpoint: base URL or provider name, for error messages.
        ledger: where every request is recorded (a fresh one if omitted).
        prices: price table for cost (built-in prices if omitted).
        timeout: seconds per request, enforced by kgot whatever the SDK does.
        retry: backoff policy for transient errors.
        structured_output: ``auto`` or one fixed method.
        structured_retries: re-asks after output that fails validation.
        stop_on_invalid_output: end a :meth:`structured_samples` step whose every answer was
            unusable for one reason with a :class:`~kgot.errors.ModelError`.
        notice_after: seconds without an answer before one ``INFO`` record on the
            ``kgot.llm.waiting`` logger names the endpoint, step, try and time waited
            (``0`` = never). Concurrent requests that wait alike share one record.
        probe_url: a configured base URL to check once before the first request
            (:func:`~kgot.llm.http.ensure_reachable`): a server that is down then fails the
            first request at once with a :class:`~kgot.errors.ConfigError` instead of every
            concurrent request retrying. ``None``: no probe (a provider's own API, a model
            handed in ready-made).

    Raises:
        ConfigError: ``structured_output="json_object"`` for a model that is not reached
            through an OpenAI-compatible API.
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        role: str,
        model_name: str,
        endpoint: str,
        ledger: UsageLedger | None = None,
        prices: PriceTable | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        structured_output: StructuredMethod = "auto",
        structured_retries: int = 3,
        stop_on_invalid_output: bool = True,
        notice_after: float = 15.0,
        probe_url: str | None = None,
    ) -> None:
        self.model = model
        self.role = role
        self.model_name = model_name
        self.endpoint = endpoint
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.prices = prices if prices is not None else PriceTable()
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.structured_retries = structured_retries
        self.stop_on_invalid_output = stop_on_invalid_output
        self.notice_after = notice_after
        self.probe_url = probe_url
        self._in_flight = 0
        self._last_notice = -math.inf
        self.structured_output: StructuredMethod = structured_output
        if structured_output == "auto":
            self._chain: tuple[Method, ...] = applicable_methods(model)
        elif structured_output in applicable_methods(model):
            self._chain = (structured_output,)
        else:
            raise ConfigError(
                f"structured output {structured_output!r} needs an OpenAI-compatible endpoint; "
                f"{model_name} is not one (set KGOT_STRUCTURED_OUTPUT=auto)"
            )
        self._proven: Method | None = None
        self._unsupported: set[Method] = set()
        self._bindings: dict[Any, tuple[Any, Runnable[Any, Any]]] = {}

    @classmethod
    def from_settings(
        cls,
        role: str,
        settings: ModelSettings,
        *,
        llm: LLMSettings | None = None,
        ledger: UsageLedger | None = None,
        prices: PriceTable | None = None,
        model: BaseChatModel | None = None,
        name_from_settings: bool = False,
    ) -> LLMClient:
        """A client for one role.

        Args:
            role: ``planning`` or ``execution``.
            settings: the role's model settings (timeout, retries, structured output).
            llm: the shared LLM settings (re-ask count, prices); defaults if omitted.
            ledger: where requests are recorded.
            prices: the price table (built from ``llm.prices`` if omitted).
            model: a ready chat model to use instead of building one from ``settings``; it is
                named after itself (``describe_model``) unless ``name_from_settings``.
            name_from_settings: name the client after ``settings.model`` even when ``model``
                is given (a model object shared between roles with equal settings).

        Raises:
            ConfigError: see :func:`~kgot.llm.models.build_chat_model`.
        """
        llm = llm or LLMSettings()
        probe_url = None
        if model is None or name_from_settings:
            probe_url = endpoint_url(settings)
            model = model if model is not None else build_chat_model(settings)
            model_name = settings.model or describe_model(model)
            endpoint = settings.base_url or (
                model_name.split(":", 1)[0] if ":" in model_name else describe_endpoint(model)
            )
        else:
            model_name = describe_model(model)
            endpoint = describe_endpoint(model)
        return cls(
            model,
            role=role,
            model_name=model_name,
            endpoint=endpoint,
            ledger=ledger,
            prices=prices if prices is not None else PriceTable(llm.prices),
            timeout=settings.timeout,
            retry=RetryPolicy(
                max_retries=settings.max_retries, backoff_base=settings.retry_backoff
            ),
            structured_output=settings.structured_output,
            structured_retries=llm.structured_retries,
            stop_on_invalid_output=llm.stop_on_invalid_output,
            notice_after=llm.waiting_notice_after,
            probe_url=probe_url,
        )

    @property
    def structured_method(self) -> Method | None:
        """The structured-output method proven to work here (``None`` until one has)."""
        return self._proven

    def __repr__(self) -> str:
        return (
            f"LLMClient(role={self.role!r}, model={self.model_name!r}, endpoint={self.endpoint!r})"
        )

    # ------------------------------------------------------------------ public calls

    async def text(self, messages: Sequence[BaseMessage], *, step: str) -> str:
        """The model's plain-text answer (a leading ``<think>`` section removed).

        Raises:
            ModelError: the endpoint failed (after retries for transient errors).
        """
        message, call = await self._request(
            self.model, list(messages), step=step, method=None, attempts=itertools.count(1)
        )
        self._record(call)
        return strip_reasoning(message.text)

    async def tool_calls(
        self, messages: Sequence[BaseMessage], tools: Sequence[BaseTool], *, step: str
    ) -> AIMessage:
        """The model's answer with ``tools`` offered (``tool_choice="auto"``).

        The returned message may hold no tool calls; ``invalid_tool_calls`` keeps calls whose
        arguments were not valid JSON.

        Raises:
            ModelError: the endpoint failed, or the model class cannot call tools.
        """
        runnable = self._tool_binding(tools)
        message, call = await self._request(
            runnable, list(messages), step=step, method=None, attempts=itertools.count(1)
        )
        self._record(call)
        return message

    async def structured(self, messages: Sequence[BaseMessage], schema: type[M], *, step: str) -> M:
        """The model's answer as a validated ``schema`` instance.

        Output that does not validate is sent back with the validation error, at most
        ``structured_retries`` times.

        Raises:
            StructuredOutputError: every attempt failed validation (``attempts`` holds the raw
                text and the problem of each).
            ModelError: the endpoint failed (after retries for transient errors).
        """
        conversation = list(messages)
        attempts = itertools.count(1)
        failures: list[tuple[str, str]] = []
        reasons: list[str] = []
        methods: list[str] = []
        for _ in range(self.structured_retries + 1):
            message, call, method = await self._structured_request(
                conversation, schema, step, attempts
            )
            try:
                value = parse_output(message, method, schema)
            except InvalidOutput as bad:
                call.ok = False
                call.error = f"invalid output: {bad}"
                self._record(call)
                failures.append((bad.raw, str(bad)))
                reasons.append(bad.reason)
                methods.append(method)
                conversation = repair_messages(conversation, bad.raw, str(bad))
                continue
            self._record(call)
            return value
        raise StructuredOutputError(
            f"{step}: no valid {schema.__name__} from {self.model_name} after "
            f"{len(failures)} attempts; last problem: {failures[-1][1]}",
            failures,
            reasons=reasons,
            methods=methods,
        )

    async def structured_samples(
        self, messages: Sequence[BaseMessage], schema: type[M], *, step: str, count: int
    ) -> list[M | StructuredOutputError]:
        """``count`` concurrent :meth:`structured` answers to one request (votes, samples).

        A sample that never validated is returned as its :class:`StructuredOutputError`, so the
        caller can count it as a failed vote. When *every* attempt of every sample failed for
        the same reason (say, never any JSON), re-asking is not going to help: with
        ``stop_on_invalid_output`` the step ends in a :class:`ModelError` that names the
        endpoint, the model, the methods tried and what to try instead.

        Raises:
            ModelError: the endpoint failed, or the step's answers were all unusable alike.
        """
        results = await asyncio.gather(
            *(self.structured(messages, schema, step=step) for _ in range(count)),
            return_exceptions=True,
        )
        samples: list[M | StructuredOutputError] = []
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, StructuredOutputError):
                raise result  # the endpoint failed for good (or the task was cancelled)
            samples.append(result)
        failures = [s for s in samples if isinstance(s, StructuredOutputError)]
        if self.stop_on_invalid_output and failures and len(failures) == len(samples):
            reasons = {reason for failure in failures for reason in failure.reasons}
            if len(reasons) == 1:
                raise self._unusable_answers_error(step, reasons.pop(), failures)
        return samples

    def _unusable_answers_error(
        self, step: str, reason: str, failures: Sequence[StructuredOutputError]
    ) -> ModelError:
        requests = sum(len(failure.attempts) for failure in failures)
        tried = list(dict.fromkeys(m for failure in failures for m in failure.methods))
        untried = [
            m
            for m in applicable_methods(self.model)
            if m not in tried and m not in self._unsupported
        ]
        if untried:
            options = ", ".join(untried[:-1]) + (" or " if len(untried) > 1 else "") + untried[-1]
            advice = (
                f"try KGOT_STRUCTURED_OUTPUT={options} (or --structured-output), "
                "or a model that follows JSON schemas"
            )
        else:
            advice = "every structured-output method was tried: use a model that follows them"
        return ModelError(
            f"model endpoint {self.endpoint} ({self.model_name}) gave no usable answer in step "
            f"{step}: all {requests} requests returned {reason} (structured-output "
            f"method{'s' * (len(tried) > 1)} tried: {', '.join(tried)}); {advice}; "
            "set llm.stop_on_invalid_output = false to keep going instead"
        )

    # ------------------------------------------------------------------ structured output

    async def _structured_request(
        self,
        conversation: list[BaseMessage],
        schema: type[BaseModel],
        step: str,
        attempts: itertools.count[int],
    ) -> tuple[AIMessage, LLMCall, Method]:
        while True:
            method = self._current_method()
            has_fallback = self._proven is None and method != self._chain[-1]
            try:
                runnable = self._structured_binding(method, schema)
            except NotImplementedError as error:
                if has_fallback:
                    self._unsupported.add(method)
                    continue
                raise self._model_error(classify(error, timeout=self.timeout), 0, method) from error
            try:
                message, call = await self._request(
                    runnable,
                    prepare_messages(conversation, method, schema),
                    step=step,
                    method=method,
                    attempts=attempts,
                    probing=has_fallback,
                )
            except _MethodUnsupported:
                self._unsupported.add(method)
                continue
            if self._proven is None:
                self._proven = method
            return message, call, method

    def _current_method(self) -> Method:
        if self._proven is not None:
            return self._proven
        for method in self._chain:
            if method not in self._unsupported:
                return method
        return self._chain[-1]

    def _structured_binding(self, method: Method, schema: type[BaseModel]) -> Runnable[Any, Any]:
        key = (method, schema)
        cached = self._bindings.get(key)
        if cached is None:
            cached = (schema, bind_method(self.model, method, schema))
            self._remember(key, cached)
        return cached[1]

    def _tool_binding(self, tools: Sequence[BaseTool]) -> Runnable[Any, Any]:
        key = ("tools", *(id(tool) for tool in tools))
        cached = self._bindings.get(key)
        if cached is None:
            try:
                runnable = self.model.bind_tools(list(tools), tool_choice="auto")
            except NotImplementedError:
                raise ModelError(
                    f"model {self.model_name} cannot call tools; choose a tool-calling model "
                    f"for the {self.role} role (KGOT_{self.role.upper()}_MODEL)"
                ) from None
            # The tuple keeps the tools alive so their ids cannot be reused by other objects.
            cached = (tuple(tools), runnable)
            self._remember(key, cached)
        return cached[1]

    def _remember(self, key: Any, value: tuple[Any, Runnable[Any, Any]]) -> None:
        if len(self._bindings) >= _BINDING_CACHE_SIZE:
            self._bindings.pop(next(iter(self._bindings)))
        self._bindings[key] = value

    # ------------------------------------------------------------------ one request, retried

    async def _request(
        self,
        runnable: Runnable[Any, Any],
        messages: list[BaseMessage],
        *,
        step: str,
        method: Method | None,
        attempts: itertools.count[int],
        probing: bool = False,
    ) -> tuple[AIMessage, LLMCall]:
        """Send one request, retrying transient failures; failed tries are recorded here.

        The successful try's :class:`LLMCall` is returned unrecorded so that the caller can
        mark it failed if its output turns out unusable.
        """
        config: RunnableConfig = {
            "metadata": {STEP_METADATA_KEY: step},
            "run_name": f"kgot:{step}",
        }
        if self.probe_url is not None:
            # Before any try: concurrent votes wait for one probe instead of each retrying a
            # server that is down (the probe raises ConfigError, which is not retried).
            await ensure_reachable(self.probe_url)

        async def one_try(number: int) -> tuple[AIMessage, LLMCall]:
            attempt = next(attempts)
            started_at = time.time()
            started = time.perf_counter()
            watch = self._watch(step, number - 1, started)
            self._in_flight += 1
            try:
                output = await asyncio.wait_for(
                    runnable.ainvoke(messages, config=config), self.timeout
                )
                message = raw_message(output)
            except asyncio.CancelledError:  # the run stops; the request may still have cost
                self._record(
                    self._call(
                        step,
                        method=method,
                        attempt=attempt,
                        started_at=started_at,
                        started=started,
                        messages=messages,
                        message=None,
                        error="cancelled",
                    )
                )
                raise
            except Exception as error:  # classified below
                failure = classify(error, timeout=self.timeout)
                # Every failed try is in the ledger (and so in the trace), retried or not.
                self._record(
                    self._call(
                        step,
                        method=method,
                        attempt=attempt,
                        started_at=started_at,
                        started=started,
                        messages=messages,
                        message=None,
                        error=failure.detail,
                    )
                )
                if isinstance(error, KgotError):
                    # kgot's own error from inside the model (a scripted model with no reply
                    # for the step) already names the problem and the fix: pass it on as is.
                    raise
                if probing and failure.method_signal:
                    raise _MethodUnsupported(failure) from error
                raise _FailedTry(failure, number) from error
            finally:
                self._in_flight -= 1
                if watch is not None:
                    watch.cancel()
            return message, self._call(
                step,
                method=method,
                attempt=attempt,
                started_at=started_at,
                started=started,
                messages=messages,
                message=message,
            )

        try:
            return await retry_async(
                one_try,
                self.retry,
                retryable=lambda error: isinstance(error, _FailedTry) and error.failure.transient,
                retry_after=lambda error: (
                    error.failure.retry_after if isinstance(error, _FailedTry) else None
                ),
            )  # the waits between tries are not on the endpoint: no waiting notice meanwhile
        except RetriesExhausted as gave_up:
            failed = gave_up.error
            if not isinstance(failed, _FailedTry):  # retryable says only a _FailedTry is
                raise
            raise self._model_error(failed.failure, failed.number - 1, method) from failed.cause
        except _FailedTry as failed:  # not worth another try
            raise self._model_error(failed.failure, failed.number - 1, method) from failed.cause

    def _watch(self, step: str, retries: int, started: float) -> asyncio.TimerHandle | None:
        """Arrange the waiting notice for one try (cancelled when the try ends)."""
        if not self.notice_after:
            return None
        return asyncio.get_running_loop().call_later(
            self.notice_after, self._notice_waiting, step, retries, started
        )

    def _notice_waiting(self, step: str, retries: int, started: float) -> None:
        now = time.perf_counter()
        if now - self._last_notice < self.notice_after:
            return  # concurrent votes waiting on the same endpoint: one line says it
        self._last_notice = now
        elapsed = now - started
        waiting = f"{self._in_flight} requests" if self._in_flight > 1 else "a request"
        _waiting.info(
            "still waiting for model endpoint %s (%s): %s for step %s, try %d of %d, %.0f s "
            "so far; each try gives up after %g s",
            self.endpoint,
            self.model_name,
            waiting,
            step,
            retries + 1,
            self.retry.max_retries + 1,
            elapsed,
            self.timeout,
            extra={
                "endpoint": self.endpoint,
                "model": self.model_name,
                "step": step,
                "try_number": retries + 1,
                "elapsed_s": elapsed,
            },
        )

    def _call(
        self,
        step: str,
        *,
        method: Method | None,
        attempt: int,
        started_at: float,
        started: float,
        messages: list[BaseMessage],
        message: AIMessage | None,
        error: str | None = None,
    ) -> LLMCall:
        duration_ms = (time.perf_counter() - started) * 1000
        input_tokens = output_tokens = 0
        estimated = False
        if message is not None:
            usage = message.usage_metadata
            if usage:
                input_tokens = int(usage.get("input_tokens") or 0)
                output_tokens = int(usage.get("output_tokens") or 0)
            else:  # the endpoint reported nothing: estimate rather than claim zero
                estimated = True
                input_tokens = sum(count_tokens(_text_of(m)) for m in messages)
                output_tokens = count_tokens(message.text) + sum(
                    count_tokens(json.dumps(tc.get("args"))) for tc in message.tool_calls
                )
        return LLMCall(
            role=self.role,
            step=step,
            model=self.model_name,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=self.prices.cost(self.model_name, input_tokens, output_tokens),
            duration_ms=duration_ms,
            ok=error is None,
            error=error,
            method=method,
            attempt=attempt,
            estimated=estimated,
            started_at=started_at,
        )

    def _record(self, call: LLMCall) -> None:
        self.ledger.record(call)
        # A child of the step that asked (found through the context), failed tries included.
        emit(
            ModelCall(
                **child_span_ids(),
                role=call.role,
                step=call.step,
                model=call.model,
                attempt=call.attempt,
                input_tokens=call.input_tokens,
                output_tokens=call.output_tokens,
                estimated=call.estimated,
                cost_usd=call.cost_usd,
                duration_s=call.duration_ms / 1000,
                ok=call.ok,
                error=call.error,
                method=call.method,
            )
        )

    def _model_error(self, failure: Failure, retries: int, method: Method | None) -> ModelError:
        where = f"model endpoint {self.endpoint} ({self.model_name})"
        hint = failure.hint
        refused = failure.status is None or failure.status >= 400  # not an unreadable answer
        if (
            method is not None
            and not failure.transient
            and refused
            and self.structured_output != "auto"
        ):
            hint += f", or set KGOT_STRUCTURED_OUTPUT=auto instead of {self.structured_output}"
        if failure.transient:
            tries = retries + 1
            return ModelError(
                f"{where} failed after {tries} attempt{'s' * (tries > 1)}: {failure.detail}; {hint}"
            )
        return ModelError(f"{where} failed: {failure.detail}; {hint}")


class Roles(NamedTuple):
    """The two model roles of KGoT."""

    planning: LLMClient
    """Decisions, graph code, queries, solutions."""
    execution: LLMClient
    """Tool calls."""


def build_llm_clients(
    settings: Settings,
    ledger: UsageLedger | None = None,
    *,
    models: Mapping[str, BaseChatModel] | None = None,
) -> Roles:
    """Clients for both roles, sharing one ledger and price table.

    Args:
        settings: the effective settings (``settings.llm.planning`` / ``.execution``).
        ledger: where requests are recorded; a fresh ledger if omitted (reach it through
            ``roles.planning.ledger``).
        models: ready chat models by role name (tests, embedding applications); roles not in it
            are built from the settings. Roles with identical settings share one model object.

    Raises:
        ConfigError: no model configured for a role that needs building, unknown provider,
            missing provider package, unknown role name in ``models``.
    """
    ledger = ledger if ledger is not None else UsageLedger()
    injected = dict(models or {})
    unknown = set(injected) - set(ROLES)
    if unknown:
        raise ConfigError(
            f"unknown model role(s) {', '.join(sorted(unknown))}; use {' and '.join(ROLES)}"
        )
    require_models(settings.llm, given=injected)
    prices = PriceTable(settings.llm.prices)
    built: list[tuple[ModelSettings, BaseChatModel]] = []
    clients: dict[str, LLMClient] = {}
    for role in ROLES:
        role_settings: ModelSettings = getattr(settings.llm, role)
        if role in injected:
            clients[role] = LLMClient.from_settings(
                role,
                role_settings,
                llm=settings.llm,
                ledger=ledger,
                prices=prices,
                model=injected[role],
            )
            continue
        shared = next((m for s, m in built if s == role_settings), None)
        client = LLMClient.from_settings(
            role,
            role_settings,
            llm=settings.llm,
            ledger=ledger,
            prices=prices,
            model=shared,
            name_from_settings=True,
        )
        built.append((role_settings, client.model))
        clients[role] = client
    return Roles(planning=clients["planning"], execution=clients["execution"])


def describe_model(model: BaseChatModel) -> str:
    """A ``provider:name``-like label for a ready chat model."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    if isinstance(name, str) and name:
        provider = _provider_of(model)
        if ":" in name or not provider or name == provider:
            return name
        return f"{provider}:{name}"
    return type(model).__name__


def describe_endpoint(model: BaseChatModel) -> str:
    """The base URL a ready chat model talks to, or its provider name."""
    for attribute in ("openai_api_base", "base_url", "anthropic_api_url"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return _provider_of(model) or type(model).__name__


def _provider_of(model: BaseChatModel) -> str:
    try:
        return str(model._llm_type).split("-")[0]
    except Exception:  # some integrations compute it lazily; the label is cosmetic
        return ""


def _text_of(message: BaseMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else json.dumps(content, default=str)
