"""The names a package exports lazily (PEP 562): one ``__getattr__`` for every package.

A package's ``__init__`` names what other packages may use; many load the module behind a name
only when it is first used, so that importing the package (``kgot --help``, a sandbox job's
host side) stays cheap. Each used to write the same ``__getattr__``; they now say where their
names live and take it from here::

    __getattr__ = lazy_exports(__name__, {"Store": ".store", "fact_id": ".facts:fact_id"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``homes`` maps each exported name to
    ``module`` or ``module:attribute`` (the attribute defaults to the name; a module starting
    with ``.`` is relative to ``package``). A name is imported on first use and kept in the
    package's namespace, so the lookup runs once.
    """

    def exported(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = home.partition(":")
        value = getattr(importlib.import_module(module, package), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    return exported
