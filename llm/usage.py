"""Token and cost accounting: one :class:`LLMCall` per model request, summed by a ledger.

A *request* is one HTTP round trip (or one scripted answer): a transient failure that is retried
is two requests, and a structured answer that failed validation and was re-asked is two requests.
Every one of them is recorded, so totals show what a run really cost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

CallListener = Callable[["LLMCall"], None]


@dataclass
class LLMCall:
    """One request to a chat model.

    Attributes:
        role: ``planning`` or ``execution``.
        step: the controller step that asked (``decide``, ``write_code``, …).
        model: ``provider:name`` of the model.
        input_tokens, output_tokens: as reported by the endpoint (``usage_metadata``); estimated
            offline when the endpoint reported none (then ``estimated`` is true).
        cost_usd: from the price table; ``None`` when the model's price is unknown.
        duration_ms: wall time of the request, including a timeout if it hit one.
        ok: the request succeeded *and* its output was usable (a structured answer that failed
            validation is recorded with ``ok=False``).
        error: one line describing the failure, ``None`` when ``ok``.
        method: the structured-output method used (``json_schema``, ``tool_calling``,
            ``json_object``, ``prompt``), ``None`` for plain text and tool calls.
        attempt: 1-based number of this request within its logical call (retries and re-asks
            count up).
        estimated: token counts are an offline estimate, not the endpoint's figures.
        started_at: UNIX time the request started.
    """

    role: str
    step: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    duration_ms: float = 0.0
    ok: bool = True
    error: str | None = None
    method: str | None = None
    attempt: int = 1
    estimated: bool = False
    started_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON output and traces)."""
        return asdict(self)


@dataclass
class UsageTotals:
    """Sums over a set of :class:`LLMCall` records.

    Attributes:
        cost_usd: total cost; ``None`` when any summed call's price is unknown (never a silent 0).
    """

    calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class UsageLedger:
    """Every model request of a run; safe to share across threads and asyncio tasks.

    Listeners added with :meth:`subscribe` are called after each record (outside the lock), e.g.
    to stream a trace; an exception in a listener propagates to the recording call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[LLMCall] = []
        self._listeners: list[CallListener] = []
        # Kept as calls arrive: the controller asks for totals after every step, and summing
        # the whole list each time grows with the run.
        self._totals: dict[str | None, UsageTotals] = {None: UsageTotals()}
        self._by_step: dict[str, dict[str, int]] = {}

    def record(self, call: LLMCall) -> None:
        """Append one request and notify listeners."""
        with self._lock:
            self._calls.append(call)
            for key in (None, call.role):
                _add(self._totals.setdefault(key, UsageTotals()), call)
            figures = self._by_step.setdefault(call.step, empty_step_figures())
            figures["calls"] += 1
            figures["failed"] += 0 if call.ok else 1
            figures["input_tokens"] += call.input_tokens
            figures["output_tokens"] += call.output_tokens
            listeners = list(self._listeners)
        for listener in listeners:
            listener(call)

    def subscribe(self, listener: CallListener) -> Callable[[], None]:
        """Call ``listener`` for every future record; returns a function that unsubscribes."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    @property
    def calls(self) -> list[LLMCall]:
        """A snapshot of all records, oldest first."""
        with self._lock:
            return list(self._calls)

    def totals(self, role: str | None = None) -> UsageTotals:
        """Sums over all records, or over one role's records.

        Args:
            role: ``planning`` / ``execution``; ``None`` sums both.
        """
        with self._lock:
            return replace(self._totals.get(role) or UsageTotals())

    def by_step(self) -> dict[str, dict[str, int]]:
        """Requests, failures and tokens per step (``decide``, ``solve``, …)."""
        with self._lock:
            return {step: dict(figures) for step, figures in self._by_step.items()}

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)


def _add(totals: UsageTotals, call: LLMCall) -> None:
    totals.calls += 1
    totals.failed_calls += not call.ok
    totals.input_tokens += call.input_tokens
    totals.output_tokens += call.output_tokens
    if totals.cost_usd is not None:  # unknown stays unknown: never a silent 0
        totals.cost_usd = None if call.cost_usd is None else totals.cost_usd + call.cost_usd


def empty_step_figures() -> dict[str, int]:
    """What is counted per step: requests, failed ones, input and output tokens."""
    return {"calls": 0, "failed": 0, "input_tokens": 0, "output_tokens": 0}
