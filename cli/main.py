"""Entry point of the `kgot` console script.

Every :class:`~kgot.errors.KgotError` becomes one line on stderr and a non-zero exit code; a
traceback is only ever shown for a bug (an exception kgot did not raise on purpose), and only
with ``KGOT_DEBUG=1``.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer import Abort, Exit
from typer.core import TyperOption

from kgot.cli import (
    aide_cmd,
    ask_cmd,
    bench_cmd,
    config_cmd,
    graph_cmd,
    ingest_cmd,
    mcp_cmd,
    memory_cmd,
    sandbox_cmd,
    store_cmd,
    tools_cmd,
)
from kgot.cli.common import global_options, restore_interrupts
from kgot.cli.extensions import CommandGroups, add_extension_commands
from kgot.errors import KgotError
from kgot.version import __version__

try:  # recent typer carries its own copy of click; older ones use the click package
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import ClickException, UsageError  # type: ignore[no-redef,assignment]


def _show_flags_without_a_value_type() -> None:
    """Typer's rich help prints a value type after every option, flags included (`--json
    <bool>`), which reads as if the flag took a value; `--json true` is then refused. Flags
    take none, so their help shows none (typer versions without the column need nothing)."""
    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None:
        return

    def value_type(option: TyperOption, ctx: Any) -> str | None:
        return None if option.is_flag else shown(option, ctx)

    TyperOption.display_type_rich = value_type  # type: ignore[method-assign,assignment]


def _help_texts_as_written() -> None:
    """Typer's rich help reads every help text as Rich markup, so a bracketed word vanished
    (`'.[advisor]'` printed as `'.'`, `[memory.trust]` as nothing). kgot's help texts hold no
    markup; each is shown as written (the panels, the `[default: …]` and `[required]` notes
    and the option highlighting stay)."""
    from rich.text import Text
    from typer import rich_utils

    made = getattr(rich_utils, "_make_rich_text", None)
    if made is None:
        return

    def literal(*, text: str, style: str = "", markup_mode: Any) -> Any:
        if markup_mode != "rich":
            return made(text=text, style=style, markup_mode=markup_mode)
        return rich_utils.highlighter(Text(inspect.cleandoc(text), style=style))

    rich_utils._make_rich_text = literal


_show_flags_without_a_value_type()
_help_texts_as_written()

app = typer.Typer(
    name="kgot",
    help="Answer hard questions by building a knowledge graph (Knowledge Graph of Thoughts).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("ask")(ask_cmd.ask)
app.add_typer(ask_cmd.runs_app, name="runs")
app.add_typer(config_cmd.app, name="config")
app.add_typer(bench_cmd.app, name="bench")
app.add_typer(tools_cmd.app, name="tools")
app.add_typer(sandbox_cmd.app, name="sandbox")
app.add_typer(graph_cmd.app, name="graph")
app.add_typer(store_cmd.entities_app, name="entities")
app.add_typer(store_cmd.types_app, name="types")
app.add_typer(memory_cmd.app, name="memory")
app.command("ingest")(ingest_cmd.ingest)
app.add_typer(aide_cmd.app, name="aide")
app.add_typer(mcp_cmd.app, name="mcp")

# Commands other packages add (the kgot.cli extension point: the advisor's under `kgot aide`).
# One that cannot be added stops every command with its error (see _dispatch), never silently.
_extension_failures = add_extension_commands(
    CommandGroups(
        root=app,
        groups={
            "runs": ask_cmd.runs_app,
            "config": config_cmd.app,
            "bench": bench_cmd.app,
            "tools": tools_cmd.app,
            "sandbox": sandbox_cmd.app,
            "graph": graph_cmd.app,
            "entities": store_cmd.entities_app,
            "types": store_cmd.types_app,
            "memory": memory_cmd.app,
            "aide": aide_cmd.app,
            "mcp": mcp_cmd.app,
        },
    )
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kgot {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="TOML config file (default: $KGOT_CONFIG or XDG path)."),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")
    ] = False,
) -> None:
    global_options(ctx).config_path = config
    _show_waiting_notices()


class _StderrLine(logging.Handler):
    """Each record as one ``kgot: …`` line on the stderr of the moment (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"kgot: {record.getMessage()}\n")
            sys.stderr.flush()
        except Exception:  # a closed or broken stderr must not end the run
            self.handleError(record)


def _show_waiting_notices() -> None:
    """Print the model layer's "still waiting" notices: a hung endpoint is not silent minutes.

    The library only logs them (INFO on ``kgot.llm.waiting``); the command line shows them.
    """
    logger = logging.getLogger("kgot.llm.waiting")
    if not any(isinstance(handler, _StderrLine) for handler in logger.handlers):
        logger.addHandler(_StderrLine())
    logger.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (also used by tests); the caller's SIGINT handling
    is as it was when this returns."""
    try:
        return _dispatch(argv)
    finally:
        restore_interrupts()


def _dispatch(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code, one ``kgot: error: …`` line for a failure."""
    if _extension_failures:  # an installed extension is broken: say which, whatever was asked
        _fail(str(_extension_failures[0]))
        return _extension_failures[0].exit_code
    try:
        # Without standalone mode click *returns* the code of a `typer.Exit(n)`; keep it.
        outcome = app(args=argv, prog_name="kgot", standalone_mode=False)
    except KgotError as error:
        _fail(str(error))
        return error.exit_code
    except Exit as done:
        return done.exit_code
    except UsageError as error:
        if not error.format_message():  # no_args_is_help: the help it printed is the answer
            return error.exit_code
        command = error.ctx.command_path if error.ctx else "kgot"
        _fail(f"{error.format_message()} (see `{command} --help`)")
        return error.exit_code
    except ClickException as error:
        _fail(error.format_message())
        return error.exit_code
    except (KeyboardInterrupt, Abort):
        _fail("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # a bug: one line by default, the trace on request
        if os.environ.get("KGOT_DEBUG"):
            raise
        _fail(
            f"internal error: {type(error).__name__}: {error} (rerun with KGOT_DEBUG=1 "
            "for a traceback and please report it)"
        )
        return 70
    return outcome if isinstance(outcome, int) else 0


def _fail(message: str) -> None:
    sys.stderr.write(f"kgot: error: {message}\n")


def run() -> None:
    """The ``kgot`` process: a command that reached its outcome keeps Ctrl-C from turning it
    into an interruption until the process has exited (see ``common.outcome_reached``)."""
    sys.exit(_dispatch())


if __name__ == "__main__":
    run()
