"""Extension points: how a package, kgot's own advisor or a separate distribution, plugs into
kgot without kgot naming it (docs/architecture.md, "Extension points").

Each extension point is a :class:`Registry` over one entry-point group:

===================== ====================================== =================================
group                 an entry point names                   asked by
===================== ====================================== =================================
``kgot.entity_tools`` ``provider(store, entity) -> tools``   the controller, for every run on
                                                             an entity
``kgot.aide_programs`` a module: ``on_create``,              :mod:`kgot.aides.programs`
                      ``check_ready``, ``run_cycle``
``kgot.cli``          ``register(groups)``, adding commands  the ``kgot`` command as it starts
``kgot.mcp_tools``    ``register(tools, app) -> names``      ``kgot mcp serve`` as it builds
                                                             the server
``kgot.perf_areas``   ``run(quick=False) -> figures``        ``kgot bench perf`` and
                                                             :mod:`kgot.benchmarks.run_all`
===================== ====================================== =================================

A distribution declares its entry points in its own metadata (``[project.entry-points."kgot.cli"]``
in its ``pyproject.toml``); kgot's advisor is declared the same way in kgot's. Reading a
group's declarations does not import anything; an entry point's object is imported when the
registry first hands it out, so ``kgot --help`` pays for the command extensions' modules only,
and a run on an entity for the tool providers' only. An application embedding kgot may add
to a registry in-process with :meth:`Registry.register` instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from kgot.errors import ConfigError

__all__ = [
    "AIDE_PROGRAMS",
    "CLI_COMMANDS",
    "ENTITY_TOOLS",
    "MCP_TOOLS",
    "PERF_AREAS",
    "Registry",
    "function_check",
]

ENTITY_TOOLS = "kgot.entity_tools"
AIDE_PROGRAMS = "kgot.aide_programs"
CLI_COMMANDS = "kgot.cli"
MCP_TOOLS = "kgot.mcp_tools"
PERF_AREAS = "kgot.perf_areas"

T = TypeVar("T")


def function_check(shape: str) -> Callable[[object], Any]:
    """A :class:`Registry` ``check`` for extensions that are functions: the loaded object when
    it is callable, else a ``TypeError`` naming ``shape``, how kgot calls it
    (``"register(groups)"``)."""

    def check(found: object) -> Any:
        if not callable(found):
            raise TypeError(f"expected a function {shape}, found {found!r}")
        return found  # its signature is the extension's promise

    return check


class Registry(Generic[T]):
    """The extensions of one entry-point group, by name.

    ``check`` turns a loaded object into the registry's type or raises ``TypeError`` saying
    what was expected; a declared extension that cannot be imported or has the wrong shape is
    a :class:`~kgot.errors.ConfigError` naming it, its distribution and the fix.
    """

    def __init__(self, group: str, what: str, check: Callable[[object], T]) -> None:
        self.group = group
        self.what = what  # "entity tool provider": how messages name one
        self._check = check
        self._lock = threading.Lock()
        self._declared: dict[str, EntryPoint] | None = None
        self._clashes: dict[str, list[str]] = {}  # a name several distributions declare
        self._loaded: dict[str, T] = {}
        self._registered: dict[str, T] = {}

    def register(self, name: str, extension: T) -> None:
        """Add ``extension`` under ``name`` in this process (it replaces a declared one of the
        same name)."""
        with self._lock:
            self._registered[name] = extension

    def unregister(self, name: str) -> None:
        """Remove what :meth:`register` added under ``name`` (nothing if it added nothing)."""
        with self._lock:
            self._registered.pop(name, None)

    def names(self) -> list[str]:
        """Every extension's name, sorted, importing none of them."""
        with self._lock:
            return sorted({*self._entry_points(), *self._registered})

    def get(self, name: str) -> T | None:
        """The extension called ``name`` (imported now if it was not), ``None`` if there is
        none."""
        with self._lock:
            if name in self._registered:
                return self._registered[name]
            if name in self._loaded:
                return self._loaded[name]
            point = self._entry_points().get(name)
            if point is None:
                return None
            self._loaded[name] = extension = self._load(point)
            return extension

    def items(self) -> list[tuple[str, T]]:
        """Every extension with its name, sorted by name (all imported now)."""
        found = [(name, self.get(name)) for name in self.names()]
        return [(name, extension) for name, extension in found if extension is not None]

    def _entry_points(self) -> dict[str, EntryPoint]:
        """The group's entry points, read once per process; two distributions declaring one
        name is refused when that name is asked for (:meth:`_load`)."""
        if self._declared is None:
            declared: dict[str, EntryPoint] = {}
            for point in entry_points(group=self.group):
                if point.name in declared:
                    self._clashes.setdefault(point.name, [_origin(declared[point.name])])
                    self._clashes[point.name].append(_origin(point))
                    continue
                declared[point.name] = point
            self._declared = declared
        return self._declared

    def _load(self, point: EntryPoint) -> T:
        clash = self._clashes.get(point.name)
        if clash:
            raise ConfigError(
                f"{len(clash)} installed distributions declare the {self.what} {point.name!r} "
                f"(entry-point group {self.group}): {', '.join(clash)}; uninstall all but one"
            )
        try:
            return self._check(point.load())
        except Exception as error:  # an extension's import may fail in any way
            raise ConfigError(
                f"the {self.what} {point.name!r} of {_origin(point)} ({point.value}) cannot be "
                f"loaded: {type(error).__name__}: {error}; reinstall that distribution or "
                "uninstall it"
            ) from error


def _origin(point: EntryPoint) -> str:
    """The distribution that declared ``point``, for messages."""
    dist = getattr(point, "dist", None)
    return f"distribution {dist.name}" if dist is not None else "an installed distribution"
