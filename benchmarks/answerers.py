"""Who answers a benchmark question, and who grades a SimpleQA answer.

* :func:`kgot_answerer` — the KGoT controller; each question is its own run with its own graph.
* :func:`direct_answerer` — the baseline: the plain planning model, one request, no graph and
  no tools (a document attachment's text is put in the prompt, as KGoT's zero-shot baseline
  does).
* :class:`Grader` — SimpleQA's grader model (``[llm.grader]``, else the planning model).

Every model is reached through kgot's LLM layer (:class:`kgot.llm.LLMClient`), so retries,
timeouts, structured output and token/cost accounting are the same as in a normal run, and
``models=`` injects stand-ins. :func:`check_models` builds the clients a run needs before
anything is written, so a configuration error leaves no half-made output folder.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, field_validator

from kgot.benchmarks.answer_scoring import Grade, parse_grade
from kgot.benchmarks.datasets import BenchTask
from kgot.benchmarks.harness import AnswerFn
from kgot.benchmarks.prompts import DIRECT_SYSTEM, GAIA_ANSWER_RULES, render_grader_prompt
from kgot.config import ModelSettings, Settings
from kgot.controller import AskResult
from kgot.errors import StructuredOutputError
from kgot.tracing import Sample, Solutions, StepFinished, StepStarted, TraceEvent, Usage, emit, span

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from kgot.llm import LLMClient, UsageLedger

__all__ = [
    "ATTACHMENT_CHAR_LIMIT",
    "GradeResult",
    "Grader",
    "GraderVerdict",
    "Mode",
    "check_models",
    "direct_answerer",
    "grader_settings",
    "kgot_answerer",
    "model_names",
    "run_settings",
]

Mode = Literal["kgot", "direct"]
RUNS_DB_FILE = "runs.db"
# Enough for most GAIA documents (≈ 10k tokens) while keeping one baseline request bounded.
ATTACHMENT_CHAR_LIMIT = 40_000


def model_names(
    settings: Settings, models: Mapping[str, BaseChatModel] | None = None
) -> dict[str, str]:
    """``provider:name`` per role, as configured or as the injected models call themselves."""
    names: dict[str, str] = {}
    for role in ("planning", "execution"):
        injected = (models or {}).get(role)
        if injected is not None:
            names[role] = _injected_name(injected)
        else:
            names[role] = getattr(settings.llm, role).model or "(not configured)"
    return names


def _injected_name(model: BaseChatModel) -> str:
    return str(getattr(model, "model_name", None) or type(model).__name__)


def check_models(
    settings: Settings, mode: Mode, models: Mapping[str, BaseChatModel] | None = None
) -> None:
    """Build the model clients ``mode`` needs, so a configuration error stops the run before it
    writes anything (the direct baseline needs only the planning role).

    Raises:
        ConfigError: a needed model is not configured or cannot be set up.
    """
    from kgot.llm import build_llm_clients

    if mode == "kgot":
        build_llm_clients(settings, models=models)
    else:
        _planning_client(settings, models)


def _planning_client(
    settings: Settings,
    models: Mapping[str, BaseChatModel] | None,
    ledger: UsageLedger | None = None,
) -> LLMClient:
    """The planning role alone (the baseline must not require an execution model)."""
    from kgot.llm import LLMClient

    injected = (models or {}).get("planning")
    return LLMClient.from_settings(
        "planning", settings.llm.planning, llm=settings.llm, ledger=ledger, model=injected
    )


def run_settings(
    settings: Settings, out_dir: Path, *, db: str | None = None, gaia_format: bool | None = None
) -> Settings:
    """The settings a benchmark run uses: its checkpoints kept in the output folder (unless
    ``db`` names another store) and, when given, GAIA answer formatting switched on or off."""
    store = settings.store.model_copy(update={"db": db or str(out_dir / RUNS_DB_FILE)})
    update: dict[str, Any] = {"store": store}
    if gaia_format is not None:
        update["controller"] = settings.controller.model_copy(update={"gaia_format": gaia_format})
    return settings.model_copy(update=update)


def kgot_answerer(
    settings: Settings, *, models: Mapping[str, BaseChatModel] | None = None
) -> AnswerFn:
    """Answer with the KGoT loop (:func:`kgot.controller.ask_async`), one run per question."""

    async def answer(task: BenchTask) -> AskResult:
        from kgot.controller import ask_async

        attachments = (task.attachment,) if task.attachment else ()
        # `kgot bench` is a command: SIGTERM and SIGHUP stop its runs as Ctrl-C does.
        return await ask_async(
            task.question,
            settings=settings,
            attachments=attachments,
            models=models,
            handle_signals=True,
        )

    return answer


def direct_answerer(
    settings: Settings,
    *,
    models: Mapping[str, BaseChatModel] | None = None,
    gaia_format: bool = False,
) -> AnswerFn:
    """Answer with one request to the planning model (the baseline KGoT is compared against).

    Args:
        settings: model configuration.
        models: injected chat models per role.
        gaia_format: add GAIA's answer-format rules to the instructions.
    """
    from langchain_core.messages import HumanMessage, SystemMessage

    system = DIRECT_SYSTEM + ("\n\n" + GAIA_ANSWER_RULES if gaia_format else "")

    async def answer(task: BenchTask) -> AskResult:
        from kgot.llm import UsageLedger

        started = time.perf_counter()
        ledger = UsageLedger()
        planning = _planning_client(settings, models, ledger)
        prompt = task.question
        if task.attachment is not None:
            prompt += "\n\n" + await _attachment_text(task.attachment, settings)
        # The same record a KGoT run keeps: a run span with one step, bracketed, the model
        # request inside it (the client raises it into the span) and the answer.
        trace: list[TraceEvent] = []
        with span(sink=trace.append), span():
            emit(StepStarted(step="direct_answer"))
            step_started = time.perf_counter()
            reply = await planning.text(
                [SystemMessage(system), HumanMessage(prompt)], step="direct_answer"
            )
            totals = ledger.totals()
            usage = Usage(
                llm_calls=totals.calls,
                failed_llm_calls=totals.failed_calls,
                input_tokens=totals.input_tokens,
                output_tokens=totals.output_tokens,
                cost_usd=totals.cost_usd,
                tool_calls=0,
                duration_s=time.perf_counter() - started,
                by_step=ledger.by_step(),
            )
            emit(Solutions(samples=[Sample(answer=reply, reasoning="")], answer=reply))
            emit(
                StepFinished(
                    step="direct_answer",
                    duration_s=time.perf_counter() - step_started,
                    ok=True,
                    usage=usage,
                )
            )
        return AskResult(
            answer=reply,
            run_id=f"direct-{uuid.uuid4()}",
            status="answered",
            llm_calls=totals.calls,
            input_tokens=totals.input_tokens,
            output_tokens=totals.output_tokens,
            cost_usd=totals.cost_usd,
            duration_s=time.perf_counter() - started,
            trace=trace,
        )

    return answer


async def _attachment_text(path: Path, settings: Settings) -> str:
    """The attachment as text for the baseline prompt, or a note saying why it is not shown.

    Documents go through :func:`kgot.documents.read_document` (parsed in the sandbox:
    attachments are untrusted input); images, audio and archives need tools the baseline does
    not have.
    """
    from kgot import documents

    outcome = await documents.read_document(path, settings)
    if isinstance(outcome, documents.Unreadable):
        if outcome.problem == "not_a_document":
            shown = outcome.format or "binary"
            return f"[Attached file {path.name} ({shown}) cannot be shown without tools]"
        return f"[Attached file {path.name} could not be read: {outcome.detail}]"
    text = outcome.text
    if not text.strip():
        return f"[Attached file {path.name} has no text content]"
    if len(text) > ATTACHMENT_CHAR_LIMIT:
        cut = len(text) - ATTACHMENT_CHAR_LIMIT
        text = text[:ATTACHMENT_CHAR_LIMIT] + f"\n[… {cut} more characters not shown]"
    return f"Attached file {path.name}:\n<file>\n{text}\n</file>"


_LETTER_BY_WORD = {"CORRECT": "A", "INCORRECT": "B", "NOT_ATTEMPTED": "C"}


class GraderVerdict(BaseModel):
    """A SimpleQA grade for one predicted answer."""

    grade: Literal["A", "B", "C"] = Field(
        description="A = CORRECT, B = INCORRECT, C = NOT_ATTEMPTED"
    )

    @field_validator("grade", mode="before")
    @classmethod
    def _letter(cls, value: Any) -> Any:
        # "a", " B ", "**C**" and the grade words are the same grades; anything else still
        # fails validation (and is shown to the model).
        if not isinstance(value, str):
            return value
        text = value.strip(" *`\"'.").upper().replace(" ", "_")
        return _LETTER_BY_WORD.get(text, text)


_GRADE_BY_LETTER = {"A": Grade.CORRECT, "B": Grade.INCORRECT, "C": Grade.NOT_ATTEMPTED}


def grader_settings(settings: Settings) -> tuple[ModelSettings, bool]:
    """The grader's model settings, and whether that is the planning model grading itself.

    ``[llm.grader]`` with a ``model`` is used as it is (its endpoint, key and options; shared
    ``[llm]`` keys fill the gaps); without one the planning role's settings are. Either way the
    grader samples at temperature 0 unless its settings say otherwise.
    """
    own = settings.llm.grader
    chosen = own if own.model else settings.llm.planning
    if chosen.temperature is None:
        chosen = chosen.model_copy(update={"temperature": 0.0})
    return chosen, not own.model


@dataclass
class GradeResult:
    """One grading request.

    Attributes:
        grade: the grade read from the reply (``NOT_ATTEMPTED`` when none could be read, as in
            the reference implementation; then ``parsed`` is false).
        reply: the grader's reply that decided the grade (the JSON of a structured answer, or
            the text read by :func:`~kgot.benchmarks.answer_scoring.parse_grade`), kept for audit.
        parsed: whether the reply named a grade.
        input_tokens, output_tokens, cost_usd: what grading cost (``None``: unknown price).
    """

    grade: Grade
    reply: str
    parsed: bool
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


class Grader:
    """SimpleQA's grader: a chat model asked for a structured grade of one answer.

    The grade is requested as ``{"grade": "A" | "B" | "C"}`` through the LLM layer's structured
    output (JSON schema, a forced tool call, JSON mode or the prompt, whichever the endpoint
    supports). A reply that is not that JSON is read as plain text with
    :func:`~kgot.benchmarks.answer_scoring.parse_grade`; only a reply stating no grade (or two
    different ones) is asked again, at most ``llm.structured_retries`` times, and otherwise
    counted as unparsed.

    Args:
        settings: model configuration; the grader is ``[llm.grader]`` when it names a model,
            else the planning role (see :func:`grader_settings`).
        model: an injected chat model (tests); wins over the settings' model.

    Raises:
        ConfigError: the grader model is not configured or cannot be set up.
    """

    def __init__(self, settings: Settings, *, model: BaseChatModel | None = None) -> None:
        from kgot.llm import LLMClient

        self.model_settings, self.grades_itself = grader_settings(settings)
        self._llm = settings.llm.model_copy(update={"structured_retries": 0})
        self._tries = settings.llm.structured_retries + 1
        self._model = model
        # A missing or unknown model fails here, before any question is asked. Each grading
        # then gets a client of its own (as each question does), which keeps its usage apart.
        probe = LLMClient.from_settings("grader", self.model_settings, llm=self._llm, model=model)
        self.name = _injected_name(model) if model is not None else probe.model_name
        self.endpoint = probe.endpoint

    async def grade(self, question: str, target: str, prediction: str) -> GradeResult:
        """Grade ``prediction`` against ``target``.

        Raises:
            ModelError: the grader model could not be reached (after its retries).
        """
        from langchain_core.messages import BaseMessage, HumanMessage

        from kgot.llm import UsageLedger, repair_messages

        ledger = UsageLedger()
        client = self._client(ledger)
        conversation: list[BaseMessage] = [
            HumanMessage(render_grader_prompt(question, target, prediction))
        ]
        grade: Grade | None = None
        reply = ""
        for attempt in range(self._tries):
            try:
                verdict = await client.structured(conversation, GraderVerdict, step="grade")
            except StructuredOutputError as invalid:
                reply, problem = invalid.attempts[-1] if invalid.attempts else ("", str(invalid))
                grade = parse_grade(reply)
                if grade is not None or attempt + 1 == self._tries:
                    break
                conversation = repair_messages(conversation, reply, problem)
                continue
            reply = json.dumps(verdict.model_dump())
            grade = _GRADE_BY_LETTER[verdict.grade]
            break
        if client.structured_method is not None and self.model_settings.structured_output == "auto":
            # Later gradings go straight to the method this endpoint accepted.
            self.model_settings = self.model_settings.model_copy(
                update={"structured_output": client.structured_method}
            )
        totals = ledger.totals()
        return GradeResult(
            grade=grade or Grade.NOT_ATTEMPTED,
            reply=reply,
            parsed=grade is not None,
            input_tokens=totals.input_tokens,
            output_tokens=totals.output_tokens,
            cost_usd=totals.cost_usd,
        )

    def _client(self, ledger: UsageLedger) -> LLMClient:
        from kgot.llm import LLMClient

        return LLMClient.from_settings(
            "grader", self.model_settings, llm=self._llm, ledger=ledger, model=self._model
        )
