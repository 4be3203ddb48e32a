"""Helpers every command group shares: the global options and settings loading."""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
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
