"""Readable, live rendering of a run's trace events (`kgot ask --trace`).

In a terminal, lines are fitted to its width and code is framed; piped or redirected, each line
is written whole (a fixed 80-column wrap would break questions, results and code in logs).

Every value in an event can come from a model or a web page, so each one is escaped before it
meets Rich markup (a tool named ``[/bold]`` must print as text, not end a style, or the run)
and loses its control characters (an escape sequence must not recolour, clear or retitle the
terminal).
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from kgot.cli.common import printable
from kgot.cli.layout import plural
from kgot.tracing import (
    Code,
    CodeFailed,
    FailedSample,
    FailedVote,
    GraphRefreshed,
    GraphUpdated,
    Math,
    ModelCall,
    QueryResult,
    RunFinished,
    RunStarted,
    Solutions,
    StepFailed,
    ToolCall,
    ToolCalls,
    ToolResult,
    TraceEvent,
    Votes,
    excerpt,
)

_RESULT_CHARS = 400
_RUN_KINDS = {"ask": "Run", "ingest": "Ingestion", "aide_cycle": "Aide cycle"}


def _safe(value: Any, limit: int | None = None) -> str:
    """``value`` as text that prints as itself: no control characters, no Rich markup."""
    text = printable(str(value))
    return escape(excerpt(text, limit) if limit else text)


class TraceRenderer:
    """Prints each event as it arrives. The step_started / step_finished brackets are not
    shown (what a step did is); an event kind without a handler is shown as JSON."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.fits_width = console.is_terminal

    def __call__(self, event: TraceEvent) -> None:
        if event.type in ("step_started", "step_finished"):
            return
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is None:
            self._line(Text(printable(event.model_dump_json()), style="dim"))
        else:
            handler(event)

    def _line(self, markup: str | Text) -> None:
        self.console.print(markup, soft_wrap=not self.fits_width)

    def _rule(self, markup: str) -> None:
        if self.fits_width:
            self.console.rule(markup)
        else:
            self._line(f"── {markup} ──")

    def _on_run_started(self, event: RunStarted) -> None:
        verb = "Resuming" if event.resumed else _RUN_KINDS[event.kind]
        where = f" · entity [bold]{_safe(event.entity)}[/]" if event.entity else ""
        self._rule(f"{verb} {_safe(event.run_id)} · {_safe(event.backend)}{where}")
        self._line(f"[bold]Question:[/] {_safe(event.question)}")

    def _on_votes(self, event: Votes) -> None:
        it = event.iteration
        if event.forced:
            self._line(f"\n[bold yellow]Iteration {it}: limit reached — forcing retrieval[/]")
            return
        self._line(f"\n[bold]Iteration {it}[/] → [bold cyan]{_safe(event.decision)}[/]")
        for vote in event.votes:
            if isinstance(vote, FailedVote):
                self._line(f"  [red]✗ vote failed:[/] {_safe(vote.failed, 200)}")
            else:
                self._line(f"  • {_safe(vote.decision)}: {_safe(vote.reason, 200)}")

    def _on_tool_calls(self, event: ToolCalls) -> None:
        if not event.calls:
            self._line("  [yellow]no tool calls proposed[/]")
        for call in event.calls:
            self._line(f"  [magenta]⚙ {_safe(call.name)}[/]({_safe(_args(call.args))})")
        for problem in event.rejected:
            self._line(f"  [red]✗ unusable tool call:[/] {_safe(problem, 300)}")

    def _on_tool_result(self, event: ToolResult) -> None:
        if event.skipped:
            mark = "[dim]↺ skipped (already done)[/]"
        elif event.ok:
            mark = "[green]✓[/]" + (" [dim](cached)[/]" if event.cached else "")
        else:
            mark = "[red]✗[/]"
        self._line(f"  {mark} {_safe(event.name)}: {_safe(event.output, _RESULT_CHARS)}")

    def _on_code(self, event: Code) -> None:
        title = Text(f"{event.purpose} code ({_attempt(event.attempt)})")
        lexer = "sparql" if event.purpose == "query" and "SELECT" in event.code else "python"
        code = printable(event.code)
        if self.fits_width:
            framed = Panel(Syntax(code, lexer, word_wrap=True), title=title, title_align="left")
            self.console.print(framed)
        else:
            self._line(Text.assemble("── ", title, " ──"))
            self._line(Text(code.rstrip("\n")))

    def _on_code_failed(self, event: CodeFailed) -> None:
        self._line(f"  [red]✗ {_safe(event.purpose)} failed:[/] {_safe(event.error, 600)}")

    def _on_graph_updated(self, event: GraphUpdated) -> None:
        counts = f"{plural(event.nodes, 'node')}, {plural(event.edges, 'edge')}"
        self._line(f"  [green]graph:[/] {_safe(event.summary)} → {counts}")

    def _on_graph_refreshed(self, event: GraphRefreshed) -> None:
        counts = f"{plural(event.nodes, 'node')}, {plural(event.edges, 'edge')}"
        self._line(f"  [cyan]caught up with other writers:[/] {_safe(event.summary)} → {counts}")

    def _on_query_result(self, event: QueryResult) -> None:
        if event.empty:
            self._line("  [yellow]query returned nothing[/]")
        else:
            self._line(f"  [green]query result:[/] {_safe(event.result, _RESULT_CHARS)}")

    def _on_math(self, event: Math) -> None:
        if event.needs_math:
            self._line(f"  [cyan]maths:[/] {_safe(event.output)}")
        else:
            self._line("  [dim]no calculation needed[/]")

    def _on_solutions(self, event: Solutions) -> None:
        for sample in event.samples:
            if isinstance(sample, FailedSample):
                self._line(f"  [red]✗ solution failed:[/] {_safe(sample.failed, 200)}")
            else:
                self._line(f"  • {_safe(sample.answer)}")

    def _on_model_call(self, event: ModelCall) -> None:
        # A request that worked is in the step's usage; one that failed is retried or
        # re-asked (or ends the step), which the reader should see as it happens.
        if not event.ok:
            self._line(
                f"  [yellow]⟳ {_safe(event.role)} model, {_safe(event.step)}:[/] "
                f"{_safe(event.error or 'failed', 300)}"
            )

    def _on_tool_call(self, event: ToolCall) -> None:
        """Shown by the tool_result that follows it (with the output the model saw)."""

    def _on_step_failed(self, event: StepFailed) -> None:
        self._line(f"  [red]step {_safe(event.step)} failed:[/] {_safe(event.error)}")

    def _on_run_finished(self, event: RunFinished) -> None:
        style = {"answered": "green", "forced": "yellow"}.get(event.status, "red")
        self._rule(f"[{style}]{_safe(event.status)}[/]")


def _args(args: dict[str, object]) -> str:
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return excerpt(shown, 300)


def _attempt(attempt: int | str) -> str:
    """``attempt 2``; a query's ``generation.fix`` reads ``query 2, fix 1`` (a fix of the
    second query written), or ``query 2`` before any fix."""
    if isinstance(attempt, int):
        return f"attempt {attempt}"
    generation, _, fix = attempt.partition(".")
    return f"query {generation}" + (f", fix {fix}" if fix not in ("", "0") else "")
