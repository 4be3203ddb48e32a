"""No module of kgot uses another module's private names (issue 28, part 5).

A name that starts with ``_`` is its module's own: a module that needs it from elsewhere means
it should be public (named for what it is, in ``__all__`` where the module has one) or live in
the module that uses it. Every Python module of kgot outside the tests is parsed; it may not
``from kgot.x import _name`` (relative imports included) for a module other than itself, nor
read ``module._name`` on a kgot module it imported (``import kgot.x as m``, ``from kgot import
x``). Dunder names (``__version__``) are not private. Tests may reach into what they test.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import kgot

ROOT = Path(kgot.__file__).resolve().parent  # the checkout: the repository root is the package
SKIPPED = {"tests", "docs", "build", "examples", ".git", ".venv", "__pycache__"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_kgot_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of this checkout."""
    base = ROOT.joinpath(*dotted.split(".")[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(["kgot", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module a ``from … import`` names, relative imports resolved against ``importer``."""
    if not node.level:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def private_uses(
    source: str,
    importer: str,
    *,
    is_package: bool = False,
    is_module: Callable[[str], bool] = _is_kgot_module,
) -> list[str]:
    """Where ``source`` (the module ``importer``) uses a private name of another kgot module:
    ``line: what`` for each."""
    tree = ast.parse(source)
    found: list[str] = []
    modules: dict[str, str] = {}  # local name -> the kgot module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node, importer, is_package)
            if module != "kgot" and not module.startswith("kgot."):
                continue
            for alias in node.names:
                if _private(alias.name) and module != importer:
                    found.append(f"{node.lineno}: from {module} import {alias.name}")
                elif is_module(f"{module}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "kgot" or alias.name.startswith("kgot."):
                    # `import kgot.x.y` binds `kgot`; `import kgot.x.y as m` binds the module
                    bound = alias.asname or "kgot"
                    modules[bound] = alias.name if alias.asname else "kgot"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = [node.attr]
        base = node.value
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in modules:
            continue
        # `m.sub._x` on module m: the first private name of the chain, read on a module
        dotted = modules[base.id]
        for name in reversed(chain):
            if _private(name):
                if dotted != importer:
                    found.append(f"{node.lineno}: {dotted}.{name}")
                break
            dotted = f"{dotted}.{name}"
            if not is_module(dotted):
                break  # past the modules: an object's attribute, not a module's name
    return sorted(set(found))


def _modules() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        if not SKIPPED.intersection(path.relative_to(ROOT).parts):
            yield path


@pytest.mark.parametrize(
    ("source", "seen"),
    [
        ("from kgot.memory.writes import _Upkeep\n", "1: from kgot.memory.writes import _Upkeep"),
        ("from .search import _Index\n", "1: from kgot.memory.search import _Index"),
        ("from . import _helpers\n", "1: from kgot.memory import _helpers"),
        ("import kgot.memory.search as s\nx = s._Index\n", "2: kgot.memory.search._Index"),
        ("from kgot.memory import search\nsearch._Index()\n", "2: kgot.memory.search._Index"),
        ("import kgot.memory.search\nkgot.memory.search._Index\n", "2: kgot.memory.search._Index"),
    ],
)
def test_the_check_sees_each_way_of_using_a_private_name(source: str, seen: str) -> None:
    modules = {"kgot.memory", "kgot.memory.search", "kgot.memory.writes"}
    found = private_uses(source, "kgot.memory.api", is_module=modules.__contains__)
    assert found == [seen]


def test_own_names_dunders_and_objects_attributes_are_not_flagged() -> None:
    source = (
        "from kgot.memory.api import _local\n"  # the module's own name
        "from kgot.version import __version__\n"
        "import kgot.memory.search as s\n"
        "s.SearchHit._fields\n"  # an attribute of a class, not of the module
        "self._cache\n"
        "from networkx import _private_thing\n"  # not kgot's
    )
    modules = {"kgot.memory", "kgot.memory.search", "kgot.memory.api", "kgot.version"}
    assert private_uses(source, "kgot.memory.api", is_module=modules.__contains__) == []


@pytest.mark.slow  # parses every module of kgot (~4 s)
def test_no_module_uses_another_module_s_private_names() -> None:
    found = {
        path.relative_to(ROOT).as_posix(): hits
        for path in _modules()
        if (
            hits := private_uses(
                path.read_text(encoding="utf-8"),
                _module_name(path),
                is_package=path.name == "__init__.py",
            )
        )
    }
    assert found == {}, "make the name public, or move it to the module that uses it"
    assert len(list(_modules())) > 100  # the walk did find kgot's modules
