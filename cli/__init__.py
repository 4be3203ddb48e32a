"""The `kgot` command line: one module per command group, assembled in :mod:`kgot.cli.main`.

What other modules use of it is named here: :func:`run` (the console script, ``python -m
kgot``) and the helpers a command extension's module builds its commands with
(:class:`CommandGroups`, the ``--db`` and ``--json`` options, :func:`opened_store`, the
printing and confirming helpers; docs/architecture.md, "Extension points"). The names load
their module on first use, so importing the package loads no command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgot.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from kgot.cli.common import confirm_irreversible, print_json, printable, settings_from
    from kgot.cli.extensions import CommandGroups
    from kgot.cli.main import run
    from kgot.cli.store_cmd import DbOption, JsonOption, opened_store

_HOMES = {
    "CommandGroups": "kgot.cli.extensions",
    "DbOption": "kgot.cli.store_cmd",
    "JsonOption": "kgot.cli.store_cmd",
    "confirm_irreversible": "kgot.cli.common",
    "opened_store": "kgot.cli.store_cmd",
    "print_json": "kgot.cli.common",
    "printable": "kgot.cli.common",
    "run": "kgot.cli.main",
    "settings_from": "kgot.cli.common",
}

__all__ = [
    "CommandGroups",
    "DbOption",
    "JsonOption",
    "confirm_irreversible",
    "opened_store",
    "print_json",
    "printable",
    "run",
    "settings_from",
]


__getattr__ = lazy_exports(__name__, _HOMES)
