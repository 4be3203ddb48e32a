"""`kgot tools …`: list the tool belt and run one tool by hand."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kgot.cli.common import print_json, settings_from
from kgot.cli.layout import terminal_width
from kgot.errors import KgotError, UsageError

if TYPE_CHECKING:
    from kgot.config import Settings
    from kgot.tools import ToolArgument, ToolInfo

app = typer.Typer(help="List the tools the loop uses, or run one directly.", no_args_is_help=True)


@app.command("list")
def list_tools(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Show every tool with its arguments and whether it is enabled (and why not)."""
    from kgot.tools import describe_tools  # loads the registry only: no LangChain to list

    infos = describe_tools(settings_from(ctx))
    if as_json:
        print_json([info.to_dict() for info in infos])
        return
    width = terminal_width()
    for number, info in enumerate(infos):
        if number:
            typer.echo("")
        for line in tool_lines(info, width):
            typer.echo(line)


_STATE_COLOURS = {"enabled": "green", "unavailable": "yellow", "disabled": "red"}
_LABEL_WIDTH = len("arguments")


def tool_lines(info: ToolInfo, width: int) -> list[str]:
    """One tool of ``kgot tools list``: its name and state (and why), then its arguments and
    notes under labels, wrapped at ``width`` between words only: a URL or a setting's name is
    never cut, a word longer than the line overflows it instead."""
    state = "enabled" if info.enabled else "unavailable" if not info.available else "disabled"
    head = f"{typer.style(info.name, bold=True)}  {typer.style(state, fg=_STATE_COLOURS[state])}"
    lines = [head]
    labelled = [("why", info.reason)] if info.reason else []
    labelled += [("arguments", _argument_text(a)) for a in info.arguments]
    labelled += [("notes", note) for note in info.notes]
    previous = None
    for label, text in labelled:
        shown = label if label != previous else ""
        previous = label
        first = f"  {shown:<{_LABEL_WIDTH}}  "
        lines += _wrapped(text, width, indent=first, hanging=" " * len(first))
    return lines


def _argument_text(argument: ToolArgument) -> str:
    return f"{argument.name}{'' if argument.required else '?'}: {argument.type}"


def _wrapped(text: str, width: int, *, indent: str, hanging: str) -> list[str]:
    return textwrap.wrap(
        text,
        max(width, 40),
        initial_indent=indent,
        subsequent_indent=hanging,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


@app.command("run")
def run_tool(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The tool, e.g. visit_page (see `kgot tools list`).")],
    arg: Annotated[
        list[str] | None,
        typer.Option(
            "--arg",
            help="key=value (repeatable). key=@FILE reads the value from FILE (@@ for a value "
            "that starts with @); lists and objects are given as JSON.",
        ),
    ] = None,
    attach: Annotated[
        list[Path] | None,
        typer.Option(
            "--attach",
            "-a",
            help="A file the tools may read, as if attached to a question (repeatable; -a as "
            "in kgot ask).",
        ),
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            help="Keep downloads, extracted members and python outputs (the files its code "
            "writes in its working directory, /work/out) in DIR, created if missing; by "
            "default they are deleted at exit. Reuse DIR to read them later.",
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds (default: tools.timeout).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="`provider:name` for llm_query (default: llm.model)."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="OpenAI-compatible endpoint for --model."),
    ] = None,
    sandbox_kind: Annotated[
        str | None,
        typer.Option(
            "--sandbox",
            help="Sandbox for the python tool: auto, bwrap, fallback, docker or subprocess.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the whole outcome as JSON.")
    ] = False,
) -> None:
    """Run one tool with the given arguments and print its result (exit 1 when it fails,
    2 for a bad command line or arguments the tool does not take)."""
    settings = settings_from(
        ctx,
        {
            "tools.timeout": timeout,
            "llm.model": model,
            "llm.base_url": base_url,
            "sandbox.kind": sandbox_kind,
        },
    )
    args, attachments = _request(name, settings, arg or [], attach or [])
    from kgot.tools import ToolContext, ToolRunner, build_tools, workspace_has_files

    with contextlib.ExitStack() as cleanup:
        if workspace is not None:
            kept, temporary = _workspace_dir(workspace), False
        else:  # a private scratch directory (0700), removed when the command ends
            scratch = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="kgot-tools-"))
            kept, temporary = Path(scratch) / "workspace", True
        sandbox, llm = _services(name, settings, cleanup)
        # Only the tool asked for is built: building them all would also warm the document
        # parsers' sandbox workers, seconds of CPU wasted on a call that reads no document.
        only = settings.model_copy(
            update={"tools": settings.tools.model_copy(update={"enabled": [name]})}
        )
        context = ToolContext.from_settings(
            only, sandbox=sandbox, llm=llm, attachments=attachments, workspace=kept
        )
        runner = ToolRunner(
            build_tools(context),
            timeout=settings.tools.timeout,
            max_output_chars=settings.tools.max_output_chars,
        )
        outcome = asyncio.run(runner.run(name, args))
        lost = temporary and workspace_has_files(kept)
    if as_json:
        print_json(outcome.to_dict())
    elif outcome.ok:
        typer.echo(outcome.output)
    if lost:
        sys.stderr.write(
            "kgot: note: the files this call saved under workspace/ were deleted at exit; "
            "pass --workspace DIR to keep them\n"
        )
    if not outcome.ok:
        message = " ".join(outcome.output.removeprefix("Error: ").split())
        raise KgotError(f"{name} failed ({outcome.error_kind}): {message}")


def _request(
    name: str, settings: Settings, pairs: list[str], attach: list[Path]
) -> tuple[dict[str, Any], list[Path]]:
    """The tool's arguments and the files it may read, checked before anything starts.

    Raises:
        UsageError: an unknown or disabled tool, malformed ``--arg``, arguments the tool does
            not take, a missing ``--attach`` file.
    """
    from kgot.tools import TOOL_NAMES, argument_problem, configuration_reason

    if name not in TOOL_NAMES:
        raise UsageError(f"no tool named {name!r}; known tools: {', '.join(TOOL_NAMES)}")
    reason = configuration_reason(name, settings.tools)
    if reason:
        raise UsageError(f"the tool {name} is {reason}; change the configuration to run it")
    args = _parse_args(pairs)
    # Files first: `-a key=value` (an argument given as an attachment) is best explained
    # by the attachment's refusal, not by the argument then missing.
    attachments = [_existing(p) for p in attach]
    problem = argument_problem(name, args)
    if problem is not None:
        raise UsageError(problem)
    if name == "inspect_file" and isinstance(args.get("path"), str):
        # Naming a file on the command line is the user's permission to read it.
        given = Path(args["path"]).expanduser()
        if given.is_file():
            attachments.append(Path(os.path.abspath(given)))
    return args, attachments


def _services(name: str, settings: Settings, cleanup: contextlib.ExitStack) -> tuple[Any, Any]:
    """The sandbox (python) or the model client (llm_query) the tool needs, if any."""
    if name == "python":
        from kgot.sandbox import open_sandbox

        # One job: a worker of its own that pre-imports nothing (pool_size 0) starts in a
        # fraction of the time a warm pool's pre-imports take, and none is left starting.
        sandbox = open_sandbox(settings.sandbox.model_copy(update={"pool_size": 0}))
        cleanup.callback(sandbox.close)
        return sandbox, None
    if name == "llm_query":
        from kgot.llm import build_llm_clients

        return None, build_llm_clients(settings).execution
    return None, None


def _workspace_dir(path: Path) -> Path:
    """``--workspace DIR``, created (owner-only, marked as kgot's) when missing, so the user
    finds it whether or not the call saves anything."""
    from kgot.tools import make_workspace_dir

    resolved = path.expanduser().resolve()
    if resolved.exists() and not resolved.is_dir():
        raise UsageError(f"--workspace {path}: not a directory; give a directory to keep files in")
    if not resolved.exists():
        try:
            make_workspace_dir(resolved)
        except OSError as error:
            raise UsageError(
                f"--workspace {path}: cannot create it ({error.strerror or error}); give a "
                "directory you may write to"
            ) from None
    return resolved


def _parse_args(pairs: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--arg {pair!r} is not key=value; e.g. --arg url=https://example.org")
        if key in args:
            raise UsageError(f"--arg {key} is given twice; give each argument once")
        args[key] = _value(key, value)
    return args


def _value(key: str, value: str) -> Any:
    if value.startswith("@@"):
        return value[1:]  # escaped: a literal value that starts with @
    if value.startswith("@") and len(value) > 1:
        path = Path(value[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(
                f"--arg {key}=@{path}: cannot read the file ({error}); write @@ for a value "
                "that starts with @"
            ) from None
    stripped = value.strip()
    if stripped[:1] in ("[", "{"):
        try:
            return json.loads(stripped)
        except ValueError:
            return value  # not JSON after all: pass the text; validation will judge it
    return value  # numbers and booleans are converted by the tool's schema


def _existing(path: Path) -> Path:
    # Absolute, links not followed: the tools show the name the user gave.
    absolute = Path(os.path.abspath(path.expanduser()))
    if not absolute.is_file():
        if "=" in str(path):  # `-a key=value`: -a attaches a file here, as in `kgot ask`
            raise UsageError(
                f"--attach {path}: no such file; -a is --attach, as in kgot ask: give a tool "
                f"argument as --arg {path}"
            )
        raise UsageError(f"--attach {path}: no such file")
    return absolute
