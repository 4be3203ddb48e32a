"""Helpers every command group shares: the global options and settings loading."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from kgot.config import Settings, load_settings


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
    """Write one JSON document to stdout (UTF-8, no ASCII escaping, newline-terminated)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")


# C0 and C1 control characters except tab and newline: ESC starts terminal escape sequences
# (colours, cursor moves, window titles, OSC 8 links), and CR can overwrite what was printed.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Text from a model, a web page or a file made safe for a terminal: control characters
    removed, newlines and tabs kept. Rich markup escaping does not do this."""
    return _CONTROL.sub("", text)
