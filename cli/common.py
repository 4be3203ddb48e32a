"""Helpers every command group shares: the global options and settings loading."""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import re
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from kgot.config import Settings, load_settings
from kgot.errors import UsageError


@dataclass
class GlobalOptions:
    """Options given before the command (`kgot --config FILE ask …`)."""

    config_path: Path | None = None


def global_options(ctx: typer.Context) -> GlobalOptions:
    root = ctx.find_root()
    if not isinstance(root.obj, GlobalOptions):
        root.obj = GlobalOptions()
    return root.obj


def settings_from(ctx: typer.Context, overrides: dict[str, Any] | None = None) -> Settings:
    """Effective settings: these command-line overrides > environment > TOML file."""
    return load_settings(overrides, config_path=global_options(ctx).config_path)


def print_json(value: Any) -> None:
    """Write one JSON document to stdout (UTF-8, no ASCII escaping, newline-terminated),
    strictly: JSON has no Infinity or NaN (a strict reader refuses them), so a number that is
    not finite is refused with the path to it instead of printed.

    Raises:
        UsageError: ``value`` holds a number that is not finite.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2, default=str, allow_nan=False)
    except ValueError:
        where, number = _not_finite(value) or ("$", math.nan)
        raise UsageError(
            f"cannot print {where} = {number!r} as JSON: it is not a finite number; correct "
            "it and ask again"
        ) from None
    sys.stdout.write(text + "\n")


def _not_finite(value: Any, where: str = "$") -> tuple[str, float] | None:
    """The JSON path and value of the first number in ``value`` that is not finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    if isinstance(value, dict):
        items: Any = ((f"{where}.{key}", item) for key, item in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{where}[{n}]", item) for n, item in enumerate(value))
    else:
        return None
    for path, item in items:
        found = _not_finite(item, path)
        if found is not None:
            return found
    return None


def confirm_irreversible(refusal: str, question: str) -> None:
    """Ask before something that cannot be undone (the caller asks only without ``--yes``):
    ``question`` + "? This cannot be undone" on a terminal, aborting unless answered yes.
    Without a terminal there is no one to answer (a script): refused with ``refusal`` +
    " cannot be undone; pass --yes to confirm".

    Raises:
        UsageError: stdin is not a terminal.
        typer.Abort: the answer was no.
    """
    if not sys.stdin.isatty():
        raise UsageError(f"{refusal} cannot be undone; pass --yes to confirm")
    typer.confirm(f"{question} This cannot be undone", abort=True)


# C0 and C1 control characters except tab and newline: ESC starts terminal escape sequences
# (colours, cursor moves, window titles, OSC 8 links), and CR can overwrite what was printed.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Text from a model, a web page or a file made safe for a terminal: control characters
    removed, newlines and tabs kept. Rich markup escaping does not do this."""
    return _CONTROL.sub("", text)


# SIGINT handlers that `outcome_reached` replaced, newest last (see `restore_interrupts`).
_replaced_handlers: list[Any] = []


def outcome_reached(exit_code: int) -> None:
    """The command has done its work (a run's answer is in hand): Ctrl-C from here on must not
    turn it into "interrupted" (130) while the rest — printing the answer and summary, closing
    up, the interpreter's exit — finishes.

    A first SIGINT is noted and ignored: the little that is left runs to its end and the
    command exits as it would have. A second one leaves at once with ``exit_code`` (what was
    printed so far is flushed), for a close-up that hangs. The handler stays until
    :func:`restore_interrupts` (``kgot.cli.main.main`` calls it for in-process callers; the
    ``kgot`` process keeps it through its exit). Outside the main thread, where no signal
    handler can be set, nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    pressed: list[int] = []

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        if pressed:
            for stream in (sys.stdout, sys.stderr):
                # A closed or broken stream has nothing left to deliver.
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(exit_code)
        pressed.append(signum)

    _replaced_handlers.append(signal.signal(signal.SIGINT, on_interrupt))


def _ignore_interrupts_at_exit() -> None:
    """The last of kgot's exit handlers: while the interpreter finalises, Python puts a signal
    with a Python handler back to its default action (a Ctrl-C would kill the process: 130),
    so a command that reached its outcome ignores SIGINT outright for that last stretch."""
    if _replaced_handlers:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


# Registered on import, before the modules a run loads register theirs: exit handlers run in
# reverse order, so this one runs after them (the second-Ctrl-C way out holds through theirs).
atexit.register(_ignore_interrupts_at_exit)


def restore_interrupts() -> None:
    """Put back the SIGINT handling that :func:`outcome_reached` replaced, if it did."""
    while _replaced_handlers:
        signal.signal(signal.SIGINT, _replaced_handlers.pop())
